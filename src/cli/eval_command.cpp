// copytask eval --run DIR [key=value ...]: reloads a study's trained members and evaluates
// them again, on the study's own data (the numbers must equal those at the end of training)
// or on other data (task.* overrides, e.g. task.seed=1), and at content lengths beyond the
// trained ones (eval.max_len=16: length generalization without retraining).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>

#include <CLI/CLI.hpp>
#include "util/log.h"

#include "cli/commands.h"
#include "cli/options.h"
#include "compat/torch_compat.h"
#include "util/atomic_files.h"
#include "records/split_metrics.h"
#include "report/results.h"
#include "study/member_files.h"
#include "study/saved_study.h"
#include "task/copy_task.h"
#include "task/length_sets.h"
#include "train/evaluate.h"
#include "train/trainer.h"

namespace copytask {
namespace {

// The keys eval may change: the data, and where it runs. The model's keys are the study's.
const std::vector<std::string>& eval_keys() {
  static const std::vector<std::string> keys = {"task.seed",     "task.examples", "task.test_fraction", "task.min_len",
                                                "task.max_len",  "eval.max_len",  "eval.per_length",    "eval.seed",
                                                "eval.position_start", "eval.inputs",
                                                "train.device",  "train.threads"};
  return keys;
}

struct MemberScores {
  StudyMember member;
  SplitScores train, test;
  std::vector<LengthScores> lengths;  // empty unless eval.max_len > 0
  nlohmann::json rescaled;            // RoPE's rescalings (eval.rope_rescaling), or null
};

}  // namespace

CLI::App* eval_command_add(CLI::App& app, EvalCommandOptions& options) {
  CLI::App& command = *app.add_subcommand("eval", "reload a study's trained members and evaluate them again");
  command.add_option("--run", options.run_dir, "the study folder (what train or compare printed as output folder)")
      ->required();
  command.add_option("--json", options.json_file, "also write the numbers to this JSON file");
  command.add_option("overrides", options.overrides,
                     "key=value: other data (task.seed, task.examples, task.test_fraction, task.min_len, "
                     "task.max_len), longer lengths (eval.max_len, eval.per_length, eval.seed), whose inputs they are (eval.inputs), the "
                     "start of offset and coupled IDs (eval.position_start) or where to run "
                     "(train.device, train.threads)");
  return &command;
}

namespace {

// What eval works on: the study, its config with eval's overrides, its complete members.
struct EvalSetup {
  SavedStudy study;
  Config config;
  nlohmann::json overrides;  // the dotted eval overrides, applied to each member's own config
  std::vector<StudyMember> members;  // point into study.schemes
  c10::Device device{c10::kCPU};
};

// Opens the study and applies the overrides; throws ConfigError (OptionError for --run and
// --json) saying what to change.
EvalSetup eval_setup(const EvalCommandOptions& options) {
  EvalSetup setup;
  try {
    setup.study = saved_study_open(options.run_dir);
  } catch (const ConfigError& error) {
    throw option_error("--run", error);
  }
  const nlohmann::json dotted = config_overrides_parse(options.overrides);
  const auto& keys = eval_keys();
  for (const auto& item : dotted.items())
    if (std::find(keys.begin(), keys.end(), item.key()) == keys.end()) {
      std::string allowed;
      for (const auto& key : keys) allowed += (allowed.empty() ? "" : ", ") + key;
      throw ConfigError("eval cannot change '" + item.key() + "': the models keep the study's config; allowed: " + allowed);
    }
  setup.config = config_with_overrides(setup.study.base, dotted, "eval");
  setup.overrides = dotted;
  // Saved models keep their learned rows: lengths beyond them are reported, not refused.
  config_validate(setup.config, /*learned_rows_must_fit_eval=*/false);
  setup.device = device_resolve(setup.config.train.device);
  output_file_check("--json", options.json_file);
  setup.members = saved_members(setup.study);
  if (setup.members.empty())
    throw OptionError("--run " + options.run_dir + " has no complete member yet; train the study first");
  return setup;
}

// Every member on both splits (batch by batch), then on the length sets one at a time, on
// the data of its own task (the kind and noise may differ between schemes), made once per task.
std::vector<MemberScores> members_evaluate(const EvalSetup& setup, const std::string& run_dir, bool same_data,
                                           int threads) {
  struct TaskData {
    CopyTask task;
    TrainData data;
  };
  // Each member's config under eval's overrides and its task's key, once.
  struct MemberConfig {
    Config config;
    std::string task_key;
  };
  std::map<std::string, MemberConfig> configs;  // by member name
  for (const auto& member : setup.members) {
    Config config = config_with_overrides(member.arm->config, setup.overrides, "eval");
    const std::string key = config_to_json(config)["task"].dump();
    configs.emplace(member.name(), MemberConfig{std::move(config), key});
  }
  auto config_of = [&](const StudyMember& member) -> const MemberConfig& { return configs.at(member.name()); };
  std::map<std::string, TaskData> by_task;
  auto task_data = [&](const StudyMember& member) -> const TaskData& {
    const MemberConfig& own = config_of(member);
    if (by_task.count(own.task_key)) return by_task.at(own.task_key);
    CopyTask task = copy_task_generate(own.config.task);
    TrainData data = train_data_upload(task, setup.device);
    log_info("eval: task {}, {} data ({} train / {} test)", own.config.task.kind, same_data ? "the study's" : "other",
             task.train.count, task.test.count);
    return by_task.emplace(own.task_key, TaskData{std::move(task), std::move(data)}).first->second;
  };
  // The length sets per task: one shared set, or under eval.inputs = per-seed one set per
  // seed of the task's members (each member evaluated on its seed's: LengthData::set_of).
  std::map<std::string, LengthData> by_lengths;
  auto length_data = [&](const StudyMember& member) -> const LengthData& {
    const MemberConfig& own = config_of(member);
    if (by_lengths.count(own.task_key)) return by_lengths.at(own.task_key);
    std::vector<int64_t> seeds;
    for (const auto& other : setup.members)
      if (config_of(other).task_key == own.task_key) seeds.push_back(other.seed);
    const Config& config = own.config;
    LengthData made = length_data_make(config.task, config.eval, task_data(member).task.train, seeds,
                                       member.arm->config.task.context, setup.device);
    if (!made.empty())
      log_info("eval: lengths {}..{}, up to {} examples each{}, contexts {}..{}", made.lengths.front(),
               made.lengths.back(), config.eval.per_length,
               made.set_seeds.empty() ? std::string() : " (one set per seed: " + std::to_string(made.set_seeds.size()) + ")",
               made.contexts.front(), made.contexts.back());
    return by_lengths.emplace(own.task_key, std::move(made)).first->second;
  };
  std::vector<MemberScores> scores;
  log_info("eval: {} member(s) of {}, device {}, {} thread(s)", setup.members.size(), run_dir, setup.device.str(),
               threads);
  for (const auto& batch : study_batches(setup.members)) {
    const TrainData& data = task_data(batch.front()).data;  // a batch shares its task (the batch key holds it)
    Encoder model = saved_batch_load(setup.study, batch, setup.device);
    const auto train = evaluate_split(model, data.train_evaluated_inputs, data.train_evaluated_targets, data.noise_token);
    const auto test = evaluate_split(model, data.test_inputs, data.test_targets, data.noise_token);
    for (size_t m = 0; m < batch.size(); ++m) scores.push_back({batch[m], train[m], test[m], {}, {}});
  }
  // One member at a time: each reaches as far as its own table (a learned member's rows).
  for (auto& s : scores) {
    const LengthData& lengths = length_data(s.member);
    if (lengths.empty()) continue;
    Encoder model = saved_batch_load(setup.study, {s.member}, setup.device);
    s.lengths = evaluate_lengths(model, lengths).front();
    s.rescaled = rescaled_member_json(evaluate_rope_rescalings(model, lengths), 0, s.member.arm->config.task.max_len,
                                      s.member.arm->config.task.context);
  }
  return scores;
}

// "identical" when the member's numbers equal those its result.json recorded at the end of
// training, else what training recorded.
std::string training_check(const SavedStudy& study, const MemberScores& s) {
  const RunRecord recorded = member_result_read(study.dir, s.member.arm->name, s.member.seed).get<RunRecord>();
  const RunRecord now = run_record_of(s.member.seed, s.train, s.test);
  return same_whole_split_numbers(recorded, now)
             ? "identical"
             : text_format("differs (training: test exact {:.4f}, loss {:.6g})", recorded.metric("test_exact"),
                           recorded.metric("final_loss"));
}

// Prints the members, the scheme table (and the length table) and returns --json's content.
nlohmann::json eval_report(const EvalSetup& setup, const std::vector<MemberScores>& scores, const std::string& run_dir,
                           bool same_data) {
  const SavedStudy& study = setup.study;
  std::printf("%-28s %10s %10s %11s %11s  %s\n", "member", "test exact", "test token", "train exact", "train token",
              same_data ? "vs training" : "");
  const nlohmann::json config = config_to_json(setup.config);
  nlohmann::json out = {{"run", run_dir},        {"task", config["task"]},        {"eval", config["eval"]},
                        {"same_data", same_data}, {"device", setup.device.str()}, {"members", nlohmann::json::array()}};
  std::map<std::string, std::vector<RunRecord>> by_scheme;
  int64_t differing = 0;
  for (const auto& s : scores) {
    const std::string check = same_data ? training_check(study, s) : "";
    differing += same_data && check != "identical" ? 1 : 0;
    std::printf("%-28s %10.4f %10.4f %11.4f %11.4f  %s\n", s.member.name().c_str(), s.test.exact, s.test.token,
                s.train.exact, s.train.token, check.c_str());
    RunRecord record = run_record_of(s.member.seed, s.train, s.test);
    if (!s.lengths.empty())
      record.length_generalization = length_generalization_json(s.lengths, study.base.task.max_len, study.base.task.context);
    record.length_generalization_rescaled = s.rescaled;
    by_scheme[s.member.arm->name].push_back(record);
    nlohmann::json entry = {{"member", s.member.name()}, {"scheme", s.member.arm->name}, {"seed", s.member.seed},
                            {"test_exact_by_length", by_length_json(s.test.exact_by_length)}};
    // The whole-split metrics under their metrics.jsonl names (records/split_metrics.h).
    for (const auto& [name, value] : split_metric_values(s.test, s.train, /*line_names=*/true)) entry[name] = value;
    if (same_data) entry["identical_to_training"] = check == "identical";
    if (!s.lengths.empty()) entry["length_generalization"] = record.length_generalization;
    if (!s.rescaled.is_null()) entry["length_generalization_rescaled"] = s.rescaled;
    out["members"].push_back(entry);
  }
  nlohmann::json summary = {{"schemes", nlohmann::json::object()}};
  std::vector<std::string> order;
  for (const auto& scheme : study.schemes)
    if (by_scheme.count(scheme.name)) {
      order.push_back(scheme.name);
      summary["schemes"][scheme.name] = scheme_results_json(by_scheme[scheme.name]);
    }
  out["schemes"] = summary["schemes"];
  std::printf("\n%s", table_format(results_table(summary, order)).c_str());
  if (!scores.empty() && !scores.front().lengths.empty()) std::printf("\n%s", length_table_format(summary, order).c_str());
  if (same_data)
    std::printf("\n%s\n", differing == 0 ? "every member's numbers are identical to those at the end of training"
                                         : text_format("{} member(s) differ from training (another device or thread "
                                                       "count changes the last bits)", differing).c_str());
  return out;
}

}  // namespace

int eval_command_run(const EvalCommandOptions& options) {
  const EvalSetup setup = eval_setup(options);  // bad input, before any work
  const int threads = threads_configure(setup.config.train.threads);
  const bool same_data = config_to_json(setup.config)["task"] == config_to_json(setup.study.base)["task"];
  // A checkpoint that cannot be loaded is bad input too (CheckpointError).
  const std::vector<MemberScores> scores = members_evaluate(setup, options.run_dir, same_data, threads);
  const nlohmann::json out = eval_report(setup, scores, options.run_dir, same_data);
  if (!options.json_file.empty()) json_write_atomic(options.json_file, out);
  return kExitOk;
}

}  // namespace copytask
