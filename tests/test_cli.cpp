// The command line as a user meets it: exit codes and messages for bad input (before any
// work starts, leaving nothing behind), and the files a study writes with their keys.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "cli_util.h"
#include "model/cpu_variant.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;
using test::fresh_dir;
using test::kTiny;
using test::Outcome;
using test::read_json;
using test::run;
using test::run_interrupted_after;
using test::expect_no_temporary_files;

void expect_bad_input(const std::string& arguments, const std::vector<std::string>& fragments) {
  const fs::path out = fresh_dir("bad");
  Outcome outcome = run(arguments + " --out " + out.string());
  EXPECT_EQ(outcome.exit_code, 2) << arguments << "\n" << outcome.output;
  for (const auto& fragment : fragments)
    EXPECT_NE(outcome.output.find(fragment), std::string::npos) << "'" << fragment << "' missing from:\n" << outcome.output;
  EXPECT_FALSE(fs::exists(out)) << "bad input must leave no output folder behind";
}

TEST(Cli, BadInputExitsWithCode2AndSaysWhatToFix) {
  expect_bad_input("train model.head=2", {"unknown key 'model.head'", "did you mean 'model.heads'"});
  expect_bad_input("train model.heads=3", {"model.heads = 3", "must divide model.embed = 20"});
  expect_bad_input("compare task.examples=99999999", {"task.examples", "distinct inputs"});
  expect_bad_input("train --config /nonexistent.json", {"cannot open the file"});
  expect_bad_input("train model.positional=rope model.heads=4", {"even head dimension"});
  expect_bad_input("train oops", {"not key=value"});
  expect_bad_input("train --no-such-flag", {"no-such-flag"});
  expect_bad_input("frobnicate", {"frobnicate"});
  expect_bad_input("", {"subcommand"});
  expect_bad_input("compare --shard 4/3", {"--shard 4/3", "1 <= i <= n"});
  expect_bad_input("compare --shard two", {"--shard two", "e.g. --shard 2/3"});
  expect_bad_input("compare 'compare.grid={\"model.heads\": [1, 3]}'", {"none@model.heads=3", "must divide"});
  expect_bad_input("compare 'compare.grid={\"task.seed\": [1, 2]}'", {"cannot be a grid axis"});
  expect_bad_input("compare 'compare.grid={\"model.heads\": 2}'", {"non-empty list"});
  // An --out that can never be created: below a file, and on a pseudo filesystem where even
  // root may not make folders (both root-proof, unlike a permission test).
  for (const std::string out : {"/etc/hostname/study", "/proc/copytask-study", "/sys/copytask-study"}) {
    Outcome unwritable = run("train --out " + out);
    EXPECT_EQ(unwritable.exit_code, 2) << out << "\n" << unwritable.output;
    EXPECT_NE(unwritable.output.find("cannot create or write a folder there"), std::string::npos) << unwritable.output;
    EXPECT_FALSE(fs::exists(out));
  }
  // A number too large for a double, and a study too big for the machine's memory.
  expect_bad_input("train model.dropout=1e999", {"model.dropout = 1e999", "too large for a double"});
  expect_bad_input("train task.context=4096 task.max_len=4000 task.examples=40000000",
                   {"the study needs about", "TiB", "available", "lower task.examples"});
  if (!torch::cuda::is_available()) expect_bad_input("train train.device=cuda", {"train.device = cuda", "no CUDA device"});
}

TEST(Cli, PrintConfigPrintsTheResolvedConfigAsJson) {
  Outcome outcome = run("train --print-config model.heads=2");
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  nlohmann::json config = nlohmann::json::parse(outcome.output);
  EXPECT_EQ(config["model"]["heads"], 2);
  EXPECT_EQ(config["task"]["vocab_size"], 11);
  EXPECT_TRUE(config["compare"]["schemes"].is_array());
}

TEST(Cli, TrainWritesEveryFileWithItsKeys) {
  const fs::path out = fresh_dir("train");
  Outcome outcome = run(std::string("train ") + kTiny + " model.positional=alibi model.causal=true --out " + out.string());
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  EXPECT_NE(outcome.output.find("alibi+causal"), std::string::npos) << "the table names the scheme";

  // config.json reruns the same study: it resolves to itself.
  nlohmann::json config = read_json(out / "config.json");
  EXPECT_EQ(config["model"]["positional"], "alibi");
  EXPECT_EQ(config["train"]["steps"], 30);

  nlohmann::json run_info = read_json(out / "run.json");
  for (const char* key : {"version", "git_commit", "libtorch", "cpu", "device", "threads", "started", "ended", "status", "command"})
    EXPECT_TRUE(run_info.contains(key)) << key;
  // The CPU model is this machine's, as /proc/cpuinfo names it, so timings name their machine.
  std::ifstream cpuinfo("/proc/cpuinfo");
  const std::string cpuinfo_text((std::istreambuf_iterator<char>(cpuinfo)), std::istreambuf_iterator<char>());
  if (cpuinfo_text.find("model name") != std::string::npos) {
    EXPECT_NE(run_info["cpu"], "unknown");
    EXPECT_NE(cpuinfo_text.find(run_info["cpu"].get<std::string>()), std::string::npos) << run_info["cpu"];
  }
  EXPECT_EQ(run_info["status"], "ok");
  EXPECT_EQ(run_info["device"], "cpu");
  EXPECT_EQ(run_info["cpu_kernel"], cpu_variant_name(cpu_variant_default()));
  // Which training step ran, for the run, each batch and each member.
  EXPECT_EQ(run_info["training_step"], "fused CPU");
  ASSERT_EQ(run_info["batches"].size(), 1u);
  EXPECT_EQ(run_info["batches"][0]["members"], nlohmann::json::array({"alibi+causal/seed-0", "alibi+causal/seed-1"}));
  EXPECT_EQ(read_json(out / "members" / "alibi+causal" / "seed-0" / "result.json")["training_step"], "fused CPU");

  nlohmann::json results = read_json(out / "results.json");
  ASSERT_TRUE(results["schemes"].contains("alibi+causal")) << results.dump();
  const auto& scheme = results["schemes"]["alibi+causal"];
  ASSERT_EQ(scheme["runs"].size(), 2u);
  for (const char* key : {"seed", "test_exact", "test_token", "train_exact", "train_token", "final_loss", "steps", "seconds"})
    EXPECT_TRUE(scheme["runs"][0].contains(key)) << key;
  EXPECT_EQ(scheme["runs"][1]["seed"], 1);
  EXPECT_EQ(scheme["runs"][0]["steps"], 30);
  for (const char* metric : {"test_exact", "test_token", "train_exact", "train_token"}) {
    const auto& summary = scheme[metric];
    for (const char* key : {"n", "mean", "std", "min", "max", "ci95"}) EXPECT_TRUE(summary.contains(key)) << metric << key;
    EXPECT_EQ(summary["n"], 2);
    EXPECT_LE(summary["min"].get<double>(), summary["mean"].get<double>());
    EXPECT_LE(summary["mean"].get<double>(), summary["max"].get<double>());
  }

  // attention.json: [member][layer][head][T][T] per scheme and probe; rows sum to 1 and
  // the causal mask shows: nothing above the diagonal.
  nlohmann::json attention = read_json(out / "attention.json");
  const auto& maps = attention["schemes"]["alibi+causal"]["probes"][0]["attention"];
  ASSERT_EQ(maps.size(), 2u);     // members
  ASSERT_EQ(maps[0].size(), 2u);  // layers
  ASSERT_EQ(maps[0][0].size(), 1u);  // heads
  ASSERT_EQ(maps[0][0][0].size(), 10u);
  for (size_t i = 0; i < 10; ++i) {
    double sum = 0;
    for (size_t j = 0; j < 10; ++j) {
      sum += maps[1][1][0][i][j].get<double>();
      if (j > i) {
        EXPECT_EQ(maps[1][1][0][i][j].get<double>(), 0.0);
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-4);
  }

  // metrics.jsonl: one line per evaluation and member (steps 10, 20, 30 x 2 seeds).
  std::ifstream metrics(out / "metrics.jsonl");
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) {
    auto entry = nlohmann::json::parse(line);
    for (const char* key : {"step", "scheme", "seed", "train_loss", "train_exact", "test_exact", "test_token"})
      EXPECT_TRUE(entry.contains(key)) << key;
    ++lines;
  }
  EXPECT_EQ(lines, 6);
  EXPECT_TRUE(fs::exists(out / "members" / "alibi+causal" / "seed-1" / "model.pt"));
  EXPECT_EQ(read_json(out / "study.json")["command"], "train");

  // positional.json: ALiBi's per-head bias, -slope * |i - j|.
  nlohmann::json positional = read_json(out / "positional.json");
  EXPECT_EQ(positional["context"], 10);
  const auto& alibi = positional["schemes"]["alibi+causal"]["runs"][0];
  EXPECT_EQ(alibi["seed"], 0);
  ASSERT_EQ(alibi["bias"].size(), 1u);
  EXPECT_NEAR(alibi["bias"][0][2][7].get<double>(), -alibi["slopes"][0].get<double>() * 5, 1e-6);
  expect_no_temporary_files(out);

  // Another study into the same folder is refused, naming what differs; the first study
  // is untouched.
  const auto before = fs::last_write_time(out / "results.json");
  Outcome other = run(std::string("train ") + kTiny + " --out " + out.string());
  EXPECT_EQ(other.exit_code, 2) << other.output;
  EXPECT_NE(other.output.find("holds another study"), std::string::npos) << other.output;
  EXPECT_NE(other.output.find("model.positional"), std::string::npos) << other.output;
  EXPECT_EQ(fs::last_write_time(out / "results.json"), before);

  // The same command again resumes: every member is complete, nothing is retrained.
  Outcome again = run(std::string("train ") + kTiny + " model.positional=alibi model.causal=true --out " + out.string());
  EXPECT_EQ(again.exit_code, 0) << again.output;
  EXPECT_NE(again.output.find("2 of 2 member(s) already complete"), std::string::npos) << again.output;
  EXPECT_EQ(read_json(out / "results.json")["schemes"], results["schemes"]);
  const nlohmann::json resumed = read_json(out / "run.json");
  EXPECT_EQ(resumed["members_skipped"], 2);
  // The first run's record is kept in the new one (the refused study left none): when and
  // where the two members were trained is not lost by resuming.
  ASSERT_EQ(resumed["earlier_runs"].size(), 1u) << resumed.dump();
  EXPECT_EQ(resumed["earlier_runs"][0]["members_trained"], run_info["members_trained"]);
  EXPECT_EQ(resumed["earlier_runs"][0]["started"], run_info["started"]);
  EXPECT_FALSE(resumed["earlier_runs"][0].contains("earlier_runs")) << "flattened, oldest first";
  fs::remove_all(out);
}

TEST(Cli, ConfigJsonRerunsTheStudyToTheSameNumbers) {
  const fs::path first = fresh_dir("rerun1"), second = fresh_dir("rerun2");
  Outcome a = run(std::string("train ") + kTiny + " model.positional=learned --out " + first.string());
  ASSERT_EQ(a.exit_code, 0) << a.output;
  // The rerun also has no probes: attention.json is then written with none.
  Outcome b = run("train --config " + (first / "config.json").string() + " report.probes=[] --out " + second.string());
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto runs_a = read_json(first / "results.json")["schemes"]["learned"]["runs"];
  auto runs_b = read_json(second / "results.json")["schemes"]["learned"]["runs"];
  ASSERT_EQ(runs_a.size(), 2u);
  for (size_t i = 0; i < runs_a.size(); ++i)
    for (const char* key : {"test_exact", "test_token", "train_exact", "final_loss"})
      EXPECT_EQ(runs_a[i][key], runs_b[i][key]) << key << " of seed " << i;
  EXPECT_EQ(read_json(first / "attention.json")["inputs"][0],
            nlohmann::json({7, 1, 8, 2, 10, 0, 0, 0, 0, 0}));
  EXPECT_TRUE(read_json(second / "attention.json")["schemes"]["learned"]["probes"].empty());
  fs::remove_all(first);
  fs::remove_all(second);
}

TEST(Cli, CompareTrainsEverySchemeAndPrintsTheTable) {
  const fs::path out = fresh_dir("compare");
  const std::string schemes =
      "'compare.schemes=[{\"name\": \"sin\", \"model.positional\": \"sinusoidal\"},"
      " {\"name\": \"rope-2h\", \"model.positional\": \"rope\", \"model.heads\": 2}]'";
  Outcome outcome = run(std::string("compare ") + kTiny + " " + schemes + " --out " + out.string());
  ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
  nlohmann::json results = read_json(out / "results.json");
  EXPECT_TRUE(results["schemes"].contains("sin"));
  EXPECT_TRUE(results["schemes"].contains("rope-2h"));
  EXPECT_EQ(results["schemes"]["rope-2h"]["overrides"]["model.heads"], 2) << "each scheme says what made it";
  // Two batches (the head counts differ); every member has its own checkpoint.
  EXPECT_EQ(results["schemes"]["sin"]["runs"][0]["batch_members"], 2);
  EXPECT_TRUE(fs::exists(out / "members" / "rope-2h" / "seed-1" / "model.pt"));
  EXPECT_EQ(results["scheme_order"], nlohmann::json({"sin", "rope-2h"}));
  EXPECT_EQ(results["complete"]["runs"], 4);
  const size_t table = outcome.output.find("test exact");
  ASSERT_NE(table, std::string::npos) << outcome.output;
  EXPECT_NE(outcome.output.find("sin ", table), std::string::npos);
  EXPECT_NE(outcome.output.find("rope-2h", table), std::string::npos);
  EXPECT_NE(outcome.output.find("output folder: " + out.string()), std::string::npos);
  fs::remove_all(out);
}

TEST(Cli, BenchTimesTheTrainingStepOfTrainOrOfCompare) {
  const fs::path json = fresh_dir("bench.json");
  Outcome single = run(std::string("bench --warmup 1 --steps 3 --json ") + json.string() + " " + kTiny);
  ASSERT_EQ(single.exit_code, 0) << single.output;
  EXPECT_NE(single.output.find("member-steps/s"), std::string::npos) << single.output;
  nlohmann::json numbers = read_json(json);
  EXPECT_EQ(numbers["members"], 2);  // train's scheme x train.seeds [0, 1]
  EXPECT_EQ(numbers["batch_size"], 32);
  EXPECT_EQ(numbers["step_seconds"].size(), 3u);
  EXPECT_GT(numbers["step_seconds_median"].get<double>(), 0.0);
  EXPECT_LE(numbers["step_seconds_min"].get<double>(), numbers["step_seconds_median"].get<double>());
  EXPECT_NEAR(numbers["member_steps_per_second"].get<double>(), 2 / numbers["step_seconds_median"].get<double>(), 1e-6);
  EXPECT_GT(numbers["peak_rss_mib"].get<double>(), 10.0);
  EXPECT_NEAR(numbers["flops_per_second"].get<double>(),
              numbers["flops_per_step"].get<double>() / numbers["step_seconds_median"].get<double>(), 1e-6 * 1e9);
  // The CPU kernels' variant that ran, and the share of the FMA peak: the rate over cores x
  // clock x FLOP per cycle, each recorded with where it came from.
  EXPECT_EQ(numbers["cpu_kernel"], cpu_variant_name(cpu_variant_default()));
  EXPECT_NE(single.output.find(std::string("CPU kernels ") + cpu_variant_name(cpu_variant_default())), std::string::npos)
      << single.output;
  if (!numbers["cpu_peak"].is_null()) {
    const auto& peak = numbers["cpu_peak"];
    EXPECT_NEAR(peak["flops_per_second"].get<double>(),
                peak["cores"].get<double>() * peak["clock_ghz"].get<double>() * 1e9 * peak["flop_per_cycle"].get<double>(),
                1.0);
    EXPECT_NEAR(peak["share"].get<double>(),
                numbers["flops_per_second"].get<double>() / peak["flops_per_second"].get<double>(), 1e-9);
    EXPECT_FALSE(peak["clock_source"].get<std::string>().empty());
    EXPECT_NE(single.output.find("share of FMA peak"), std::string::npos) << single.output;
    // The limit measured here (an in-register FMA loop on the step's threads, in its
    // variant), beside the nominal one; its rate is a machine's, so only its form is checked.
    EXPECT_GT(peak["measured_flops_per_second"].get<double>(), 0.0);
    EXPECT_NEAR(peak["measured_share"].get<double>(),
                numbers["flops_per_second"].get<double>() / peak["measured_flops_per_second"].get<double>(), 1e-9);
    EXPECT_NE(peak["measured_how"].get<std::string>().find(cpu_variant_name(cpu_variant_default())), std::string::npos);
    EXPECT_NE(single.output.find("share of measured"), std::string::npos) << single.output;
  }
  // A forced variant: the generic one runs and is recorded; one that names nothing, or that
  // this CPU lacks, stops before any work (exit 2) with what to set instead.
  Outcome generic = run(std::string("bench --warmup 0 --steps 1 --json ") + json.string() + " " + kTiny,
                        "COPYTASK_CPU_KERNEL=generic ");
  ASSERT_EQ(generic.exit_code, 0) << generic.output;
  EXPECT_EQ(read_json(json)["cpu_kernel"], "generic");
  Outcome bogus = run(std::string("bench --steps 1 ") + kTiny, "COPYTASK_CPU_KERNEL=avx9000 ");
  EXPECT_EQ(bogus.exit_code, 2) << bogus.output;
  EXPECT_NE(bogus.output.find("COPYTASK_CPU_KERNEL: 'avx9000' names no CPU kernel variant"), std::string::npos)
      << bogus.output;
  if (!cpu_variant_missing(CpuVariant::x86_64_v4).empty()) {
    Outcome lacking = run(std::string("bench --steps 1 ") + kTiny, "COPYTASK_CPU_KERNEL=x86-64-v4 ");
    EXPECT_EQ(lacking.exit_code, 2) << lacking.output;
    EXPECT_NE(lacking.output.find("it lacks"), std::string::npos) << lacking.output;
  }

  // --compare: the first batch of the study, all six default schemes x 2 seeds.
  Outcome study = run(std::string("bench --compare --warmup 0 --steps 1 --json ") + json.string() + " " + kTiny);
  ASSERT_EQ(study.exit_code, 0) << study.output;
  EXPECT_EQ(read_json(json)["members"], 12);
  EXPECT_EQ(run("bench --steps 0").exit_code, 2);
  EXPECT_EQ(run("bench model.heads=3").exit_code, 2);
  // --profile profiles a GPU's kernels: on the CPU it is refused before any work, saying why.
  Outcome profile = run(std::string("bench --steps 1 --profile ") + (json.string() + ".trace") + " " + kTiny);
  EXPECT_EQ(profile.exit_code, 2) << profile.output;
  EXPECT_NE(profile.output.find("--profile profiles a GPU's kernels; this bench runs on cpu"), std::string::npos)
      << profile.output;
  EXPECT_FALSE(fs::exists(json.string() + ".trace"));
  // So is a --json file in a folder that does not exist: before the timing, not after it.
  Outcome nowhere = run(std::string("bench --steps 1 --json ") + (json / "no-folder" / "bench.json").string() + " " + kTiny);
  EXPECT_EQ(nowhere.exit_code, 2) << nowhere.output;
  EXPECT_NE(nowhere.output.find("does not exist"), std::string::npos) << nowhere.output;
  EXPECT_EQ(nowhere.output.find("step time"), std::string::npos) << "refused before any work: " << nowhere.output;
  fs::remove(json);
}

// train.step: bench times the step it asks for and records which, and a value that is not
// a step is refused before any work with what is allowed.
TEST(Cli, BenchTimesTheStepThatTrainStepAsksFor) {
  const fs::path json = fresh_dir("bench-step.json");
  for (const std::string step : {"auto", "fused-cpu", "fused", "autograd"}) {
    Outcome outcome = run("bench --warmup 0 --steps 1 --json " + json.string() + " " + kTiny + " train.step=" + step);
    ASSERT_EQ(outcome.exit_code, 0) << outcome.output;
    const nlohmann::json numbers = read_json(json);
    EXPECT_EQ(numbers["training_step"], step == "autograd" ? "autograd" : "fused CPU") << step;
    EXPECT_TRUE(numbers["fallback_reason"].is_null()) << step << ": " << numbers["fallback_reason"];
    // The resolved config names the step: `fused`, fused-cpu's old name, is read as it.
    EXPECT_EQ(numbers["config"]["train"]["step"], step == "fused" ? "fused-cpu" : step);
  }
  fs::remove(json);
  expect_bad_input("train train.step=fast",
                   {"train.step = \"fast\"", "must be auto, fused-cpu (or fused, its old name), fused-gpu or autograd"});
}

// Every command's errors reach the user the same way (cli/command_errors.h): one line
// "copytask <command>: ...", exit 2 for bad input (a config error says so; an option names
// itself), 1 for a failure while running.
TEST(Cli, EveryCommandSaysWhatWentWrongTheSameWay) {
  struct Case {
    std::string arguments;
    int exit_code;
    std::string line;
  };
  const fs::path out = fresh_dir("errors");
  ASSERT_EQ(run(std::string("train ") + kTiny + " train.steps=2 --out " + out.string()).exit_code, 0);
  for (const Case& c : std::vector<Case>{
           {"train model.heads=3", 2, "copytask train: config error: model.heads = 3: must divide model.embed = 20"},
           {"compare --shard 0/2 --out " + out.string(), 2, "copytask compare: --shard 0/2: write i/n"},
           {"bench model.heads=3", 2, "copytask bench: config error: model.heads = 3"},
           {"eval --run " + out.string() + " model.heads=2", 2, "copytask eval: config error: eval cannot change 'model.heads'"},
           {"eval --run /nonexistent-study", 2, "copytask eval: --run /nonexistent-study"},
           {"predict --run " + out.string() + " --member nope \"1 2\"", 2, "copytask predict: --member nope"},
           {"report", 2, "copytask report: which study? give its folder: copytask report --run DIR"},
           {"report --run /nonexistent-study", 2, "copytask report: --run /nonexistent-study: no such folder"},
       }) {
    const Outcome outcome = run(c.arguments);
    EXPECT_EQ(outcome.exit_code, c.exit_code) << c.arguments << "\n" << outcome.output;
    EXPECT_NE(outcome.output.find(c.line), std::string::npos) << "'" << c.line << "' missing from:\n" << outcome.output;
  }
  // A failure while running: a member's result.json without its fields.
  std::ofstream(out / "members" / "sinusoidal" / "seed-0" / "result.json") << "{}";
  const Outcome broken = run("report --run " + out.string());
  EXPECT_EQ(broken.exit_code, 1) << broken.output;
  EXPECT_NE(broken.output.find("copytask report: " + (out / "members" / "sinusoidal" / "seed-0" / "result.json").string() +
                               " lacks a field"),
            std::string::npos)
      << broken.output;
  fs::remove_all(out);
}

TEST(Cli, InterruptKeepsFinishedMembersAndSaysSo) {
  // Two batches (the step counts differ): the first finishes in a second, the second
  // would run for hours. Ctrl-C (SIGINT) during the second (once it says it started) must
  // keep the first's results.
  const fs::path out = fresh_dir("interrupt");
  const std::string schemes =
      "'compare.schemes=[{\"name\": \"quick\", \"model.positional\": \"rope\"},"
      " {\"name\": \"endless\", \"model.positional\": \"rope\", \"train.steps\": 10000000}]'";
  Outcome outcome = run_interrupted_after(std::string("compare ") + kTiny + " " + schemes + " --out " + out.string(),
                                         "batch 2/2");
  EXPECT_EQ(outcome.exit_code, 130) << outcome.output;
  EXPECT_NE(outcome.output.find("copytask compare: interrupted; the finished members are kept in " + out.string()),
            std::string::npos) << outcome.output;
  EXPECT_EQ(read_json(out / "run.json")["status"], "interrupted");
  nlohmann::json results = read_json(out / "results.json");
  EXPECT_TRUE(results["schemes"].contains("quick")) << results.dump();
  EXPECT_FALSE(results["schemes"].contains("endless"));
  EXPECT_TRUE(fs::exists(out / "members" / "quick" / "seed-0" / "model.pt"));
  EXPECT_EQ(results["complete"]["missing"], nlohmann::json({"endless/seed-0", "endless/seed-1"}));
  expect_no_temporary_files(out);
  fs::remove_all(out);
}

}  // namespace
}  // namespace copytask
