// Studies beyond one run: shards into one folder, a killed shard rerun, resume, the grid,
// and the trained members reloaded by eval and predict, all through the binary, as a user
// would run them; and a member's bits that do not depend on the training step its
// neighbours need (through study_run).
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "cli_util.h"
#include "study_util.h"
#include "study/study.h"
#include "util/atomic_files.h"
#include "util/gzip_files.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;
using test::fresh_dir;
using test::kTiny;
using test::Outcome;
using test::read_json;
using test::run;

// results.json without what depends on how the members were batched and timed.
nlohmann::json without_timing(nlohmann::json results) {
  for (auto& scheme : results["schemes"])
    for (auto& r : scheme["runs"]) {
      r.erase("seconds");
      r.erase("batch_members");
    }
  return results;
}

// Three schemes x 2 seeds; the training lasts a few seconds, so a shard can be killed in it.
const std::string kStudy = std::string(kTiny) + " train.steps=400 train.eval_every=100 " +
                           "'compare.schemes=[{\"name\": \"sin\", \"model.positional\": \"sinusoidal\"},"
                           " {\"name\": \"rope\", \"model.positional\": \"rope\"},"
                           " {\"name\": \"alibi+causal\", \"model.positional\": \"alibi\", \"model.causal\": true}]'";

TEST(Study, ThreeShardsOneKilledAndRerunGiveTheResultsOfOneRun) {
  const fs::path whole = fresh_dir("whole"), sharded = fresh_dir("sharded");
  Outcome one_go = run("compare " + kStudy + " --out " + whole.string());
  ASSERT_EQ(one_go.exit_code, 0) << one_go.output;
  const nlohmann::json expected = read_json(whole / "results.json");
  ASSERT_EQ(expected["complete"]["runs"], 6);

  ASSERT_EQ(run("compare " + kStudy + " --out " + sharded.string() + " --shard 1/3").exit_code, 0);
  // Shard 2 is killed (SIGKILL: no chance to clean up) in the middle of its training: once
  // its first member has written its first evaluation (step 100 of 400).
  const fs::path first_metrics = sharded / "members" / "sin" / "seed-1" / "metrics.jsonl";
  const std::string kill_mid_training = test::copytask_binary() + " compare " + kStudy + " --out " +
                                        sharded.string() + " --shard 2/3 > /dev/null 2>&1 & pid=$!; until [ -s " +
                                        first_metrics.string() + " ]; do sleep 0.02; done; kill -9 $pid; wait $pid";
  const int status = std::system(kill_mid_training.c_str());  // /bin/sh: the exit status of `wait`
  EXPECT_NE(status, 0) << "the shard was killed, not finished";
  ASSERT_EQ(run("compare " + kStudy + " --out " + sharded.string() + " --shard 3/3").exit_code, 0);
  nlohmann::json partial = read_json(sharded / "results.json");
  EXPECT_EQ(partial["complete"]["runs"], 4) << "shard 2 (members 2 and 5 of 6) did not finish";
  EXPECT_EQ(partial["complete"]["missing"], nlohmann::json({"sin/seed-1", "alibi+causal/seed-0"}));
  EXPECT_EQ(read_json(sharded / "shards" / "2-of-3.json")["status"], "running") << "a killed shard says nothing more";

  // Rerunning shard 2 trains only its two members; then the folder holds the whole study.
  Outcome rerun = run("compare " + kStudy + " --out " + sharded.string() + " --shard 2/3");
  ASSERT_EQ(rerun.exit_code, 0) << rerun.output;
  EXPECT_NE(rerun.output.find("2 members"), std::string::npos) << rerun.output;
  const nlohmann::json collected = read_json(sharded / "results.json");
  EXPECT_EQ(collected["complete"]["runs"], 6);
  EXPECT_EQ(without_timing(collected), without_timing(expected));

  // Collecting again (report, or any rerun) changes nothing; a whole rerun trains nothing.
  Outcome again = run("compare " + kStudy + " --out " + sharded.string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("6 of 6 member(s) already complete"), std::string::npos) << again.output;
  EXPECT_EQ(without_timing(read_json(sharded / "results.json")), without_timing(expected));
  // metrics.jsonl holds every member's evaluations once: 6 members x 4 evaluations.
  std::ifstream metrics(sharded / "metrics.jsonl");
  int64_t lines = std::count(std::istreambuf_iterator<char>(metrics), std::istreambuf_iterator<char>(), '\n');
  EXPECT_EQ(lines, 24);
  fs::remove_all(whole);
  fs::remove_all(sharded);
}

TEST(Study, ShardNeedsOutAndTheSameStudy) {
  Outcome no_out = run("compare " + std::string(kTiny) + " --shard 1/2");
  EXPECT_EQ(no_out.exit_code, 2);
  EXPECT_NE(no_out.output.find("--shard needs --out"), std::string::npos) << no_out.output;
}

TEST(Study, GridCrossesTheSchemesWithEveryValue) {
  const fs::path out = fresh_dir("grid");
  Outcome outcome = run("compare " + std::string(kTiny) +
                        " 'compare.schemes=[{\"name\": \"alibi\", \"model.positional\": \"alibi\"}]'"
                        " 'compare.grid={\"model.heads\": [1, 2], \"train.lr\": [0.003, 0.01]}' --out " + out.string());
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  const nlohmann::json results = read_json(out / "results.json");
  const nlohmann::json order = {"alibi@model.heads=1@train.lr=0.003", "alibi@model.heads=1@train.lr=0.01",
                                "alibi@model.heads=2@train.lr=0.003", "alibi@model.heads=2@train.lr=0.01"};
  EXPECT_EQ(results["scheme_order"], order);
  for (const auto& name : order) ASSERT_TRUE(results["schemes"].contains(name)) << name;
  EXPECT_EQ(results["schemes"]["alibi@model.heads=2@train.lr=0.01"]["overrides"]["model.heads"], 2);
  // Two heads: two ALiBi slopes and a bias per head.
  const nlohmann::json positional = read_json(out / "positional.json");
  EXPECT_EQ(positional["schemes"]["alibi@model.heads=2@train.lr=0.003"]["runs"][0]["bias"].size(), 2u);
  // Different values give different models (not one model four times).
  EXPECT_NE(results["schemes"][order[0].get<std::string>()]["runs"][0]["final_loss"],
            results["schemes"][order[1].get<std::string>()]["runs"][0]["final_loss"]);
  fs::remove_all(out);
}

TEST(Study, EvalReproducesTheFinalNumbersExactlyAndPredictShowsAttention) {
  const fs::path out = fresh_dir("eval");
  ASSERT_EQ(run("compare " + kStudy + " train.steps=60 --out " + out.string()).exit_code, 0);
  const fs::path json = fresh_dir("eval.json");
  Outcome same = run("eval --run " + out.string() + " --json " + json.string());
  ASSERT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("identical to those at the end of training"), std::string::npos) << same.output;
  const nlohmann::json evaluated = read_json(json);
  const nlohmann::json results = read_json(out / "results.json");
  ASSERT_EQ(evaluated["members"].size(), 6u);
  for (const auto& member : evaluated["members"]) {
    const auto& runs = results["schemes"][member["scheme"].get<std::string>()]["runs"];
    const auto& recorded = runs[member["seed"].get<size_t>()];
    EXPECT_EQ(member["test_exact"], recorded["test_exact"]);
    EXPECT_EQ(member["train_loss"], recorded["final_loss"]);
    EXPECT_EQ(member["identical_to_training"], true);
  }

  // Other data: a new task seed gives other test examples, so other numbers.
  Outcome other = run("eval --run " + out.string() + " task.seed=7 --json " + json.string());
  ASSERT_EQ(other.exit_code, 0) << other.output;
  EXPECT_EQ(read_json(json)["same_data"], false);
  EXPECT_NE(read_json(json)["members"][0]["test_loss"], evaluated["members"][0]["test_loss"]);

  // Bad input: a model key, a folder that is no study, a corrupt checkpoint.
  Outcome model_key = run("eval --run " + out.string() + " model.heads=2");
  EXPECT_EQ(model_key.exit_code, 2);
  EXPECT_NE(model_key.output.find("eval cannot change 'model.heads'"), std::string::npos) << model_key.output;
  EXPECT_EQ(run("eval --run /tmp").exit_code, 2);

  Outcome predicted = run("predict --run " + out.string() + " --member rope/1 \"3 4 5\"");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.output;
  for (const char* fragment : {"member  rope/seed-1", "input   3 4 5 <copy> _", "target  3 4 5 <copy> 3 4 5 _",
                               "output  ", "layer 1 head 1", "layer 2 head 1"})
    EXPECT_NE(predicted.output.find(fragment), std::string::npos) << fragment << "\n" << predicted.output;
  Outcome causal = run("predict --run " + out.string() + " --member alibi+causal \"3 4 5\"");
  EXPECT_NE(causal.output.find("causal: nothing right of the diagonal"), std::string::npos) << causal.output;
  // Longer than trained (8 tokens in a context of 10): the whole copy in its own context.
  Outcome longer = run("predict --run " + out.string() + " --member rope \"1 2 3 4 5 6 7 8 9 1 2\"");
  ASSERT_EQ(longer.exit_code, 0) << longer.output;
  for (const char* fragment : {"context 23: longer than training's 10", "target  1 2 3 4 5 6 7 8 9 1 2 <copy> 1 2 3 4 5 6 7 8 9 1 2\n"})
    EXPECT_NE(longer.output.find(fragment), std::string::npos) << fragment << "\n" << longer.output;
  Outcome unknown = run("predict --run " + out.string() + " --member nope \"3 4 5\"");
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.output.find("sin/seed-0"), std::string::npos) << "lists the members: " << unknown.output;
  EXPECT_EQ(run("predict --run " + out.string() + " \"3 14 5\"").exit_code, 2);

  {
    std::ofstream corrupt(out / "members" / "rope" / "seed-0" / "model.pt", std::ios::trunc);
    corrupt << "not a checkpoint";
  }
  Outcome broken = run("eval --run " + out.string());
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.output.find("corrupt"), std::string::npos) << broken.output;
  fs::remove(json);
  fs::remove_all(out);
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// eval.inputs = per-seed: training records each member on its own seed's inputs, eval
// gives those numbers again, and the shared inputs give others (the sets differ).
TEST(Study, PerSeedLengthInputsAreRecordedAndEvalReproducesThem) {
  const fs::path out = fresh_dir("lengths-per-seed");
  const std::string lengths = " eval.max_len=10 eval.per_length=30";
  Outcome trained = run("compare " + std::string(kTiny) + lengths + " eval.inputs=per-seed" +
                        " 'compare.schemes=[{\"name\": \"sin\", \"model.positional\": \"sinusoidal\"}]' --out " +
                        out.string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("for each of 2 seeds"), std::string::npos) << trained.output;
  const nlohmann::json results = read_json(out / "results.json");
  EXPECT_EQ(read_json(out / "config.json")["eval"]["inputs"], "per-seed") << "the resolved config keeps the choice";
  const fs::path json = fresh_dir("lengths-per-seed.json");
  Outcome same = run("eval --run " + out.string() + lengths + " --json " + json.string());  // the study's own inputs
  ASSERT_EQ(same.exit_code, 0) << same.output;
  const nlohmann::json own = read_json(json);  // kept: a loop over a temporary's member would dangle
  ASSERT_EQ(own["members"].size(), 2u);
  for (const auto& member : own["members"]) {
    const auto& recorded = results["schemes"]["sin"]["runs"][member["seed"].get<size_t>()];
    EXPECT_EQ(member["length_generalization"], recorded["length_generalization"]) << member["member"];
  }
  Outcome shared = run("eval --run " + out.string() + lengths + " eval.inputs=shared --json " + json.string());
  ASSERT_EQ(shared.exit_code, 0) << shared.output;
  int differing = 0;
  const nlohmann::json other = read_json(json);
  ASSERT_EQ(other["members"].size(), 2u);
  for (const auto& member : other["members"]) {
    const auto& recorded = results["schemes"]["sin"]["runs"][member["seed"].get<size_t>()];
    differing += member["length_generalization"] != recorded["length_generalization"] ? 1 : 0;
  }
  EXPECT_GT(differing, 0) << "the shared inputs are not any seed's own";
  EXPECT_EQ(run("eval --run " + out.string() + lengths + " eval.inputs=each").exit_code, 2) << "not a choice";
}

// Length generalization in a study (every member at lengths 1..12, recorded in
// result.json, results.json and metrics.jsonl) and from eval (the same numbers again from
// the checkpoints, and further lengths without retraining).
TEST(Study, LengthGeneralizationIsRecordedAndEvalReproducesAndExtendsIt) {
  const fs::path out = fresh_dir("lengths");
  const std::string schemes =
      " 'compare.schemes=[{\"name\": \"sin\", \"model.positional\": \"sinusoidal\"},"
      " {\"name\": \"learned\", \"model.positional\": \"learned\", \"model.learned_positions\": 25}]'";
  const std::string lengths = " eval.max_len=12 eval.per_length=20";
  // A learned table without the rows for the longest copy (context 25) is refused first.
  Outcome short_table = run("compare " + std::string(kTiny) + lengths +
                            " 'compare.schemes=[{\"name\": \"learned\", \"model.positional\": \"learned\"}]' --out " +
                            out.string());
  EXPECT_EQ(short_table.exit_code, 2) << short_table.output;
  EXPECT_NE(short_table.output.find("model.learned_positions=25"), std::string::npos) << short_table.output;
  EXPECT_FALSE(fs::exists(out / "results.json"));

  Outcome trained = run("compare " + std::string(kTiny) + lengths + schemes + " --out " + out.string());
  ASSERT_EQ(trained.exit_code, 0) << trained.output;
  EXPECT_NE(trained.output.find("length generalization: exact match over the copy"), std::string::npos) << trained.output;
  // The task's context of 10 cuts the copies of lengths 5..8 in training, and the table says so.
  EXPECT_NE(trained.output.find("lengths 5..8 were trained with the copy cut at the context of 10"), std::string::npos)
      << trained.output;
  const nlohmann::json results = read_json(out / "results.json");
  for (const char* scheme : {"sin", "learned"}) {
    const auto& summary = results["schemes"][scheme]["length_generalization"];
    EXPECT_EQ(summary["train_max_len"], 8);
    ASSERT_EQ(summary["by_length"].size(), 12u) << summary.dump();
    EXPECT_EQ(summary["by_length"]["12"]["exact"]["n"], 2) << "both seeds at length 12";
    const auto& run = results["schemes"][scheme]["runs"][0]["length_generalization"];
    EXPECT_EQ(run["positions_trained"], 10);
    EXPECT_EQ(run["by_length"]["12"]["context"], 25);
    EXPECT_EQ(run["by_length"]["12"]["n"], 20);
    EXPECT_EQ(run["by_length"]["3"]["trained"], true);
    EXPECT_EQ(run["by_length"]["9"]["trained"], false);
  }
  // metrics.jsonl: the per-length numbers at every evaluation (steps 10, 20, 30).
  std::ifstream metrics(out / "members" / "sin" / "seed-0" / "metrics.jsonl");
  std::string line;
  int evaluations = 0;
  while (std::getline(metrics, line)) {
    const nlohmann::json entry = nlohmann::json::parse(line);
    ASSERT_TRUE(entry.contains("length_generalization")) << line;
    EXPECT_EQ(entry["length_generalization"].size(), 12u);
    ++evaluations;
  }
  EXPECT_EQ(evaluations, 3);

  // eval with the same lengths: the numbers training recorded, from the checkpoints.
  const fs::path json = fresh_dir("lengths.json");
  Outcome same = run("eval --run " + out.string() + lengths + " --json " + json.string());
  ASSERT_EQ(same.exit_code, 0) << same.output;
  const nlohmann::json evaluated = read_json(json);
  for (const auto& member : evaluated["members"]) {
    const auto& recorded = results["schemes"][member["scheme"].get<std::string>()]["runs"][member["seed"].get<size_t>()];
    EXPECT_EQ(member["length_generalization"], recorded["length_generalization"]) << member["member"];
  }
  // At drawn starts (eval.position_start): IDs 0..T-1 have none, so the same numbers.
  Outcome drawn = run("eval --run " + out.string() + lengths + " eval.position_start=drawn --json " + json.string());
  ASSERT_EQ(drawn.exit_code, 0) << drawn.output;
  const nlohmann::json at_drawn = read_json(json);  // kept: a loop over a temporary's member would dangle
  ASSERT_EQ(at_drawn["members"].size(), 4u);
  for (const auto& member : at_drawn["members"]) {
    const auto& recorded = results["schemes"][member["scheme"].get<std::string>()]["runs"][member["seed"].get<size_t>()];
    EXPECT_EQ(member["length_generalization"], recorded["length_generalization"]) << member["member"];
  }
  // Further than trained for: up to 14; the learned table's 25 rows stop it after length 12.
  Outcome further = run("eval --run " + out.string() + " eval.max_len=14 eval.per_length=20 --json " + json.string());
  ASSERT_EQ(further.exit_code, 0) << further.output;
  const nlohmann::json extended = read_json(json);
  for (const auto& member : extended["members"]) {
    const auto& by_length = member["length_generalization"]["by_length"];
    ASSERT_EQ(by_length.size(), 14u);
    if (member["scheme"] == "learned") {
      EXPECT_TRUE(by_length["13"]["exact"].is_null());
      EXPECT_NE(by_length["13"]["skipped"].get<std::string>().find("25 rows"), std::string::npos);
      EXPECT_FALSE(by_length["12"]["exact"].is_null());
    } else {
      EXPECT_FALSE(by_length["14"]["exact"].is_null());
    }
  }
  EXPECT_FALSE(extended["schemes"]["learned"]["length_generalization"]["by_length"].contains("13"));
  EXPECT_EQ(run("eval --run " + out.string() + " eval.max_len=3").exit_code, 2) << "below task.max_len";

  // The study's files copied without its members (as experiments/ keeps them): report
  // writes the page again and leaves every number as it was.
  const fs::path copy = fresh_dir("lengths-copy");
  fs::create_directories(copy);
  for (const char* file : {"config.json", "study.json", "run.json", "results.json", "attention.json", "positional.json",
                           "metrics.jsonl"})
    fs::copy_file(out / file, copy / file);
  Outcome report = run("report --run " + copy.string());
  ASSERT_EQ(report.exit_code, 0) << report.output;
  EXPECT_EQ(run("report").exit_code, 2) << "no folder";
  EXPECT_EQ(read_json(copy / "results.json"), results);
  EXPECT_EQ(read_json(copy / "positional.json"), read_json(out / "positional.json"));
  EXPECT_GT(fs::file_size(copy / "metrics.jsonl"), 0u);
  std::ifstream page_file(copy / "report.html");
  const std::string page((std::istreambuf_iterator<char>(page_file)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find("class=\"chart length-generalization\""), std::string::npos);
  fs::remove_all(copy);

  // The same kept small: the large files gzipped (experiments/ keeps them so). The report
  // reads them, draws the same charts, and writes results.csv gzipped beside them.
  if (gzip_available()) {
    const fs::path packed = fresh_dir("lengths-gzipped");
    fs::create_directories(packed);
    for (const char* file : {"config.json", "study.json", "run.json"}) fs::copy_file(out / file, packed / file);
    for (const char* file : {"results.json", "attention.json", "positional.json", "metrics.jsonl"})
      file_write_gzipped_atomic((packed / (std::string(file) + ".gz")).string(), file_read((out / file).string()));
    Outcome packed_report = run("report --run " + packed.string());
    ASSERT_EQ(packed_report.exit_code, 0) << packed_report.output;
    EXPECT_FALSE(fs::exists(packed / "results.json")) << "no plain copy written beside";
    EXPECT_EQ(nlohmann::json::parse(file_read_stored((packed / "results.json.gz").string())), results);
    EXPECT_EQ(file_read_stored((packed / "results.csv.gz").string()), file_read((out / "results.csv").string()));
    std::ifstream packed_file(packed / "report.html");
    const std::string packed_page((std::istreambuf_iterator<char>(packed_file)), std::istreambuf_iterator<char>());
    for (const char* chart : {"class=\"chart length-generalization\"", "class=\"chart curves\"", "class=\"chart attention\""})
      EXPECT_EQ(packed_page.find(chart) == std::string::npos, page.find(chart) == std::string::npos) << chart;
    // A gzipped results.json cut short: refused, naming the file, nothing written over it.
    const std::string whole = file_read((packed / "results.json.gz").string());
    file_write_atomic((packed / "results.json.gz").string(), whole.substr(0, whole.size() / 2));
    Outcome cut = run("report --run " + packed.string());
    EXPECT_EQ(cut.exit_code, 2) << cut.output;
    EXPECT_NE(cut.output.find("results.json.gz"), std::string::npos) << cut.output;
    fs::remove_all(packed);
  }
  fs::remove_all(out);
}

// The neighbour test. Each scheme says which training step runs it (train.step), and a study
// puts members that need different steps in different batches, so that a member's numbers
// never depend on which members train beside it: a sinusoidal arm on the default step (the
// fused CPU step) trains to the same bits alone and in a study beside a RoPE arm that asks
// for the autograd step. run.json, each member's result.json (and copytask bench,
// Cli.BenchTimesTheStepThatTrainStepAsksFor) say which step ran.
std::string file_text(const fs::path& path) {
  std::ifstream file(path, std::ios::binary);
  EXPECT_TRUE(file.good()) << path;
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// A member's files without what depends on when it ran: result.json without its timing,
// metrics.jsonl without each line's seconds.
nlohmann::json member_numbers(const fs::path& member) {
  nlohmann::json result = read_json(member / "result.json");
  result.erase("seconds");
  result.erase("finished");
  nlohmann::json metrics = nlohmann::json::array();
  std::istringstream lines(file_text(member / "metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json entry = nlohmann::json::parse(line);
    entry.erase("seconds");
    metrics.push_back(entry);
  }
  return {{"result", result}, {"metrics", metrics}};
}

TEST(Study, AMemberTrainsToTheSameBitsAloneAndBesideAMemberOnAnotherStep) {
  const std::string sinusoidal = R"({"name": "sin", "model.positional": "sinusoidal"})";
  const std::string rope_on_autograd = R"({"name": "rope-autograd", "model.positional": "rope", "train.step": "autograd"})";
  const auto trained = test::tiny_study_train;
  const fs::path alone = fresh_dir("neighbour-alone"), beside = fresh_dir("neighbour-beside");
  trained("[" + sinusoidal + "]", alone);
  // RoPE first: were the arms batched together, the batch would take its step (autograd).
  trained("[" + rope_on_autograd + ", " + sinusoidal + "]", beside);

  // The two arms trained in different batches, each on its own step, and run.json says so.
  const nlohmann::json run_info = read_json(beside / "run.json");
  EXPECT_EQ(run_info["status"], "ok");
  EXPECT_EQ(run_info["training_step"], "autograd, fused CPU");
  ASSERT_EQ(run_info["batches"].size(), 2u) << run_info.dump();
  EXPECT_EQ(run_info["batches"][0]["members"], nlohmann::json({"rope-autograd/seed-0", "rope-autograd/seed-1"}));
  EXPECT_EQ(run_info["batches"][0]["training_step"], "autograd");
  EXPECT_FALSE(run_info["batches"][0].contains("fallback_reason")) << "asked for, autograd is no fallback";
  EXPECT_EQ(run_info["batches"][1]["members"], nlohmann::json({"sin/seed-0", "sin/seed-1"}));
  EXPECT_EQ(run_info["batches"][1]["training_step"], "fused CPU");
  EXPECT_EQ(read_json(alone / "run.json")["training_step"], "fused CPU");
  for (int seed : {0, 1}) {
    const std::string name = "seed-" + std::to_string(seed);
    EXPECT_EQ(read_json(beside / "members" / "rope-autograd" / name / "result.json")["training_step"], "autograd");
    // The sinusoidal member: the same step, losses, metrics at every evaluation and
    // parameters (model.pt, byte for byte) alone as beside the RoPE member.
    const fs::path a = alone / "members" / "sin" / name, b = beside / "members" / "sin" / name;
    EXPECT_EQ(read_json(b / "result.json")["training_step"], "fused CPU");
    EXPECT_EQ(member_numbers(a), member_numbers(b)) << name;
    EXPECT_EQ(file_text(a / "model.pt"), file_text(b / "model.pt")) << name << ": the parameters differ";
    EXPECT_EQ(file_text(a / "attention.json"), file_text(b / "attention.json")) << name;
  }
  // And the check can fail: the RoPE members trained, to other numbers.
  EXPECT_NE(read_json(beside / "members" / "rope-autograd" / "seed-0" / "result.json")["final_loss"],
            read_json(beside / "members" / "sin" / "seed-0" / "result.json")["final_loss"]);
  fs::remove_all(alone);
  fs::remove_all(beside);
}

}  // namespace
}  // namespace copytask
