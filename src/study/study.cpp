#include "study/study.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "compat/torch_compat.h"
#include "model/encoder.h"
#include "report/files.h"
#include "report/results.h"
#include "report/run_info.h"
#include "study/collect.h"
#include "study/member_files.h"
#include "study/positional_analysis.h"
#include "task/copy_task.h"
#include "task/length_sets.h"
#include "train/checkpoint.h"
#include "train/trainer.h"

namespace copytask {
namespace fs = std::filesystem;

namespace {

// Schemes that may share a batch: equal configs once the per-member keys are removed.
std::string batch_key(const Config& config) {
  nlohmann::json j = config_to_json(config);
  j["model"].erase("positional");
  j["model"].erase("causal");
  for (const auto& key : positional_option_keys()) j["model"].erase(key);
  j["train"].erase("seeds");
  j.erase("compare");
  j.erase("report");
  return j.dump();
}

// A config as study.json compares it on a rerun: read back as a config (so keys a newer
// copytask added hold their defaults, as they did for the run that wrote it), without the
// keys that may differ between the machines that train one study.
nlohmann::json comparable(nlohmann::json config) {
  try {
    config = config_to_json(config_from_json(config));
  } catch (const std::exception&) {
    // Not a config this copytask reads: compared as it is, so it differs.
  }
  if (config.is_object() && config.contains("train")) {
    config["train"].erase("device");
    config["train"].erase("threads");
  }
  return config;
}

// Live progress on a terminal: one line, rewritten at most ten times a second.
class ProgressLine {
 public:
  ProgressLine(bool enabled, std::string label, int64_t steps)
      : enabled_(enabled), label_(std::move(label)), steps_(steps), start_(std::chrono::steady_clock::now()) {}
  void update(int64_t step, const torch::Tensor& member_loss) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    if (step != steps_ && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = step / std::max(elapsed, 1e-9);
    std::fprintf(stderr, "\r%s step %lld/%lld  loss %.4f  %.1f steps/s  eta %.0fs  %s   ", label_.c_str(),
                 static_cast<long long>(step), static_cast<long long>(steps_), member_loss.mean().item<double>(),
                 rate, (steps_ - step) / std::max(rate, 1e-9), last_evaluation_.c_str());
    if (step == steps_) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
  // The latest evaluation, shown at the end of the line.
  void set_evaluation(std::string summary) { last_evaluation_ = std::move(summary); }

 private:
  bool enabled_;
  std::string label_;
  int64_t steps_;
  std::chrono::steady_clock::time_point start_, last_{};
  std::string last_evaluation_;
};

// A member's attention.json: per probe its maps [layer][head][T][T] and its output [T].
nlohmann::json member_attention_json(const std::vector<torch::Tensor>& layers, const torch::Tensor& outputs,
                                     int64_t member, const nlohmann::json& inputs) {
  // layers[l]: (M, P, H, T, T) for P probes; outputs: (M, P, T).
  nlohmann::json probes = nlohmann::json::array();
  for (int64_t p = 0; p < outputs.size(1); ++p) {
    nlohmann::json per_layer = nlohmann::json::array();
    for (const auto& layer : layers) {
      const torch::Tensor maps = layer[member][p];  // (H, T, T)
      nlohmann::json heads = nlohmann::json::array();
      for (int64_t h = 0; h < maps.size(0); ++h) heads.push_back(matrix_json(maps[h]));
      per_layer.push_back(heads);
    }
    auto out = outputs[member][p].contiguous();
    probes.push_back({{"attention", per_layer},
                      {"output", std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel())}});
  }
  return {{"inputs", inputs}, {"probes", probes}};
}

}  // namespace

std::string StudyMember::name() const { return scheme->name + "/seed-" + std::to_string(seed); }

Shard shard_parse(const std::string& text) {
  const std::string how = "--shard " + text + ": write i/n with 1 <= i <= n, e.g. --shard 2/3 for the second of three shards";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw ConfigError(how);
  Shard shard;
  try {
    size_t used = 0;
    shard.index = std::stoll(text.substr(0, slash), &used);
    if (used != slash) throw ConfigError(how);
    const std::string count = text.substr(slash + 1);
    shard.count = std::stoll(count, &used);
    if (used != count.size()) throw ConfigError(how);
  } catch (const std::logic_error&) {
    throw ConfigError(how);
  }
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) throw ConfigError(how);
  return shard;
}

std::vector<StudyScheme> study_schemes_for_train(const Config& config) {
  nlohmann::json overrides = {{"model.positional", config.model.positional}, {"model.causal", config.model.causal}};
  return {StudyScheme{scheme_name_of(config.model), config, overrides}};
}

std::vector<StudyScheme> study_schemes_for_compare(const Config& config) {
  std::vector<StudyScheme> schemes;
  const std::vector<nlohmann::json> points = grid_combinations(config.compare.grid);
  for (const auto& spec : config.compare.schemes) {
    for (const auto& point : points) {
      SchemeSpec at_point = spec;
      at_point.name = grid_point_name(spec.name, point);
      for (const auto& item : point.items()) at_point.overrides[item.key()] = item.value();
      schemes.push_back({at_point.name, config_for_scheme(config, at_point), at_point.overrides});
    }
  }
  return schemes;
}

std::vector<StudyMember> study_members(const std::vector<StudyScheme>& schemes) {
  std::vector<StudyMember> members;
  for (const auto& scheme : schemes)
    for (int64_t seed : scheme.config.train.seeds)
      members.push_back({&scheme, seed, static_cast<int64_t>(members.size())});
  return members;
}

std::vector<StudyMember> shard_members(const std::vector<StudyMember>& members, const Shard& shard) {
  std::vector<StudyMember> mine;
  for (const auto& member : members)
    if (member.index % shard.count == shard.index - 1) mine.push_back(member);
  return mine;
}

std::vector<std::vector<StudyMember>> study_batches(const std::vector<StudyMember>& members) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<StudyMember>> by_key;
  for (const auto& member : members) {
    const std::string key = batch_key(member.scheme->config);
    if (!by_key.count(key)) keys.push_back(key);
    by_key[key].push_back(member);
  }
  std::vector<std::vector<StudyMember>> batches;
  for (const auto& key : keys) batches.push_back(by_key[key]);
  return batches;
}

std::vector<MemberSpec> study_batch_specs(const std::vector<StudyMember>& batch) {
  std::vector<MemberSpec> specs;
  for (const auto& member : batch)
    specs.push_back(MemberSpec{member.scheme->name, member.seed, member.scheme->config.model.positional,
                               member.scheme->config.model.causal, member.scheme->config.model.positional_options});
  return specs;
}

nlohmann::json study_manifest(const std::string& command, const Config& base, const std::vector<StudyScheme>& schemes) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& scheme : schemes)
    list.push_back({{"name", scheme.name}, {"overrides", scheme.overrides}, {"config", config_to_json(scheme.config)}});
  return {{"command", command}, {"config", config_to_json(base)}, {"schemes", list}};
}

std::vector<StudyScheme> study_schemes_from_manifest(const nlohmann::json& manifest) {
  std::vector<StudyScheme> schemes;
  try {
    for (const auto& entry : manifest.at("schemes")) {
      Config config = config_from_json(entry.at("config"));
      config_validate(config);
      schemes.push_back({entry.at("name").get<std::string>(), config, entry.at("overrides")});
    }
  } catch (const nlohmann::json::exception& error) {
    throw ConfigError(std::string("study.json is not a copytask study manifest (") + error.what() + ")");
  }
  if (schemes.empty()) throw ConfigError("study.json lists no schemes");
  return schemes;
}

void study_check_out_dir(const std::string& out_dir, const nlohmann::json& manifest) {
  if (fs::exists(out_dir) && !fs::is_directory(out_dir))
    throw ConfigError("--out " + out_dir + " exists and is not a folder; choose another path");
  const fs::path manifest_path = fs::path(out_dir) / "study.json";
  if (fs::exists(manifest_path)) {
    nlohmann::json existing;
    try {
      existing = nlohmann::json::parse(file_read(manifest_path.string()));
    } catch (const std::exception& error) {
      throw ConfigError("--out " + out_dir + ": its study.json is unreadable (" + std::string(error.what()).substr(0, 120) +
                        "); choose another folder");
    }
    // The same study may be resumed; another one would mix results.
    nlohmann::json a = manifest, b = existing;
    for (auto* m : {&a, &b}) {
      if (!m->contains("schemes") || !m->contains("config")) continue;
      (*m)["config"] = comparable((*m)["config"]);
      for (auto& scheme : (*m)["schemes"])
        if (scheme.contains("config")) scheme["config"] = comparable(scheme["config"]);
    }
    if (a != b) {
      std::string differences;
      if (b.contains("config")) {
        const auto patch = nlohmann::json::diff(b["config"], a["config"]);
        for (size_t i = 0; i < patch.size() && i < 5; ++i) {
          std::string path = patch[i].value("path", "");
          std::replace(path.begin(), path.end(), '/', '.');
          differences += (differences.empty() ? "" : ", ") + path.substr(1);
        }
      }
      if (a.value("command", "") != b.value("command", ""))
        differences += (differences.empty() ? "" : ", ") + std::string("the command (") + b.value("command", "?") + ")";
      if (differences.empty()) differences = "the scheme list";
      throw ConfigError("--out " + out_dir + " holds another study (it differs in " + differences +
                        "); rerun with that study's config (its config.json) to resume it, or choose another --out");
    }
    return;
  }
  if (fs::exists(fs::path(out_dir) / "results.json") || fs::exists(fs::path(out_dir) / "config.json"))
    throw ConfigError("--out " + out_dir + " holds results that are not a resumable study (no study.json); "
                      "choose another folder or remove it first");
  // The folder must be creatable and writable, or the study would fail only after training.
  // Found by doing it: create the folder (and its missing parents) and a file in it, then
  // remove what was made. (access() says yes to root on a read-only mount and on /proc or
  // /sys, where mkdir then fails.)
  const fs::path target = fs::absolute(out_dir);
  fs::path first_missing;  // the outermost folder of the path that does not exist yet
  for (fs::path p = target; !p.empty() && !fs::exists(p) && p != p.parent_path(); p = p.parent_path()) first_missing = p;
  std::string problem;
  std::error_code error;
  fs::create_directories(target, error);
  if (error) {
    problem = error.message();
  } else {
    const fs::path probe = target / (".copytask-probe-" + std::to_string(::getpid()));
    try {
      file_write_atomic(probe.string(), "probe");
    } catch (const std::exception& write_error) {
      problem = write_error.what();
    }
    fs::remove(probe, error);
  }
  // Only the empty folders this made: a shard starting beside us may already write there.
  if (!first_missing.empty())
    for (fs::path p = target;; p = p.parent_path()) {
      fs::remove(p, error);  // removes a folder only when it is empty
      if (p == first_missing || p == p.parent_path()) break;
    }
  if (!problem.empty())
    throw ConfigError("--out " + out_dir + ": cannot create or write a folder there (" + problem +
                      "); choose a path on a writable disk");
}

nlohmann::json study_run(const Config& base, const std::vector<StudyScheme>& schemes, const StudyOptions& options) {
  const fs::path out(options.out_dir);
  const std::string study_dir = out.string();
  fs::create_directories(out / "members");
  // Every shard writes the same content; the rename makes concurrent writes harmless.
  json_write_atomic((out / "config.json").string(), config_to_json(base));
  json_write_atomic((out / "study.json").string(), study_manifest(options.command, base, schemes));

  RunInfo info;
  info.command = options.command_line;
  info.device = options.device.str();
  const GpuInfo gpu = gpu_info(options.device);
  info.gpu = gpu.name;
  info.cuda_runtime = gpu.cuda_runtime;
  info.cuda_driver = gpu.cuda_driver;
  info.threads = options.threads;
  info.started = utc_now_iso8601();
  fs::path info_path = out / "run.json";
  if (!options.shard.whole()) {
    info.shard = options.shard.str();
    fs::create_directories(out / "shards");
    info_path = out / "shards" / (std::to_string(options.shard.index) + "-of-" + std::to_string(options.shard.count) + ".json");
  }
  info.earlier_runs = run_info_earlier_runs(info_path.string());

  const std::vector<StudyMember> mine = shard_members(study_members(schemes), options.shard);
  std::vector<StudyMember> to_train;
  for (const auto& member : mine)
    if (!member_complete(study_dir, member.scheme->name, member.seed)) to_train.push_back(member);
  info.members_skipped = static_cast<int64_t>(mine.size() - to_train.size());
  json_write_atomic(info_path.string(), run_info_json(info));
  if (info.members_skipped > 0)
    spdlog::info("{} of {} member(s) already complete in {}: skipped", info.members_skipped, mine.size(), study_dir);

  try {
    if (!to_train.empty()) {
      // The data: one copy task for the whole study (schemes may not change task.*).
      const CopyTask task = copy_task_generate(base.task);
      TrainData data = train_data_upload(task, options.device);
      spdlog::info("task: {} train / {} test examples, context {}, vocab {}", task.train.count, task.test.count,
                   task.context, task.vocab_size);
      // Length generalization: the same examples per length for every member (eval.* is the study's).
      data.lengths = length_data_upload(length_sets_generate(base.task, base.eval, task.train), options.device);
      if (!data.lengths.empty())
        spdlog::info("length generalization: lengths {}..{} at every evaluation, up to {} examples each, contexts {}..{}",
                     data.lengths.lengths.front(), data.lengths.lengths.back(), base.eval.per_length,
                     data.lengths.contexts.front(), data.lengths.contexts.back());

      // The probes' full inputs (<copy> and padding added); report.probes may be empty.
      nlohmann::json probe_inputs_json = nlohmann::json::array();
      std::vector<int64_t> probe_flat;
      for (const auto& probe : base.report.probes) {
        auto input = copy_input(probe_tokens(probe, base.task), base.task.vocab_size, base.task.context);
        probe_inputs_json.push_back(input);
        probe_flat.insert(probe_flat.end(), input.begin(), input.end());
      }
      const int64_t probe_count = static_cast<int64_t>(base.report.probes.size());
      const torch::Tensor probe_inputs =
          torch::tensor(probe_flat, torch::kLong).view({probe_count, base.task.context}).to(options.device);  // (P, T)

      const auto batches = study_batches(to_train);
      for (size_t b = 0; b < batches.size(); ++b) {
        const std::vector<StudyMember>& batch = batches[b];
        const Config& config = batch.front().scheme->config;
        const std::vector<MemberSpec> specs = study_batch_specs(batch);
        const int64_t M = static_cast<int64_t>(specs.size());
        std::vector<std::string> scheme_names;
        for (const auto& member : batch)
          if (scheme_names.empty() || scheme_names.back() != member.scheme->name) scheme_names.push_back(member.scheme->name);
        std::string names;
        for (const auto& name : scheme_names) names += (names.empty() ? "" : ", ") + name;
        spdlog::info("batch {}/{}: {} members ({}), {} steps, batch size {}", b + 1, batches.size(), M, names,
                     config.train.steps,
                     config.train.batch_size == 0 ? std::string("full") : std::to_string(config.train.batch_size));

        // A member that was not complete may have left files from an interrupted run.
        std::vector<std::string> dirs;
        for (const auto& member : batch) {
          dirs.push_back(member_dir(study_dir, member.scheme->name, member.seed));
          fs::remove_all(dirs.back());
          fs::create_directories(dirs.back());
        }

        torch::manual_seed(0);  // nothing should draw from the global generator; pin it anyway
        Encoder model(encoder_shape_of(config), specs, options.device);
        ProgressLine progress(options.progress_line,
                              "[" + std::to_string(b + 1) + "/" + std::to_string(batches.size()) + "]", config.train.steps);

        // Learned additive tables at every evaluation (and at the start): their path in positional.json.
        std::vector<std::vector<std::pair<int64_t, torch::Tensor>>> learned_path(M);
        auto record_learned = [&](int64_t step) {
          torch::NoGradGuard no_grad;
          for (int64_t m = 0; m < M; ++m)
            if (model->scheme(m).hook() == PositionalHook::additive && model->scheme(m).learned())
              learned_path[m].emplace_back(step, model->scheme(m).table(config.task.context).detach().cpu().clone());
        };
        record_learned(0);

        auto on_evaluation = [&](const Evaluation& evaluation) {
          std::map<std::string, std::pair<double, int>> test_mean;
          for (int64_t m = 0; m < M; ++m) {
            nlohmann::json line = {{"step", evaluation.step},
                                   {"scheme", specs[m].scheme},
                                   {"seed", specs[m].seed},
                                   {"seconds", evaluation.seconds},
                                   {"train_loss", evaluation.train[m].loss},
                                   {"train_exact", evaluation.train[m].exact},
                                   {"train_token", evaluation.train[m].token},
                                   {"test_loss", evaluation.test[m].loss},
                                   {"test_exact", evaluation.test[m].exact},
                                   {"test_token", evaluation.test[m].token},
                                   {"test_exact_by_length", by_length_json(evaluation.test[m].exact_by_length)}};
            if (!evaluation.lengths.empty()) line["length_generalization"] = length_metrics_json(evaluation.lengths[m]);
            jsonl_append((fs::path(dirs[m]) / "metrics.jsonl").string(), line);
            test_mean[specs[m].scheme].first += evaluation.test[m].exact;
            test_mean[specs[m].scheme].second += 1;
          }
          record_learned(evaluation.step);
          std::string line;
          for (const auto& name : scheme_names) {
            const auto& [sum, count] = test_mean[name];
            line += fmt::format("{}{} {:.3f}", line.empty() ? "" : ", ", name, sum / count);
          }
          progress.set_evaluation("test exact: " + line);
          // On a terminal the progress line shows each evaluation; the log keeps the last.
          if (!options.progress_line || evaluation.step == config.train.steps)
            spdlog::info("step {}/{} ({:.1f}s) test exact: {}", evaluation.step, config.train.steps, evaluation.seconds, line);
        };
        auto on_step = [&](int64_t step, const torch::Tensor& loss) { progress.update(step, loss); };
        BatchRecord record;
        for (const auto& member : batch) record.members.push_back(member.name());
        auto on_start = [&](const TrainingStep& step) {
          record.training_step = step.name();
          record.fallback_reason = step.fallback_reason();
          // Never silently slower: a CPU batch off the fused step says why.
          if (!record.fallback_reason.empty())
            spdlog::warn("batch {}/{}: training on the autograd step, several times slower than the fused CPU step: {}",
                         b + 1, batches.size(), record.fallback_reason);
        };
        const TrainOutcome outcome = train_members(model, data, config.train, on_evaluation, on_step, on_start);
        info.batches.push_back(record);

        // Outputs and attention maps of every member on the probes.
        std::vector<torch::Tensor> probe_attention;
        const torch::Tensor probe_outputs =
            probe_count > 0 ? predict_tokens(model, probe_inputs, &probe_attention).cpu()  // (M, P, T)
                            : torch::zeros({M, 0, base.task.context}, torch::kLong);
        for (auto& layer : probe_attention) layer = layer.cpu();

        for (int64_t m = 0; m < M; ++m) {
          const StudyScheme& scheme = *batch[m].scheme;
          const fs::path dir(dirs[m]);
          checkpoint_save(model, m, 1, (dir / "model.pt").string());
          json_write_atomic((dir / "attention.json").string(),
                            member_attention_json(probe_attention, probe_outputs, m, probe_inputs_json));
          json_write_atomic((dir / "positional.json").string(),
                            positional_member_json(model->scheme(m), specs[m].seed, config.task.context, learned_path[m]));
          RunRecord run = run_record_of(specs[m].seed, outcome.final.train[m], outcome.final.test[m]);
          run.steps = outcome.steps;
          run.seconds = outcome.seconds;
          run.batch_members = M;
          if (!outcome.final.lengths.empty())
            run.length_generalization =
                length_generalization_json(outcome.final.lengths[m], config.task.max_len, config.task.context);
          nlohmann::json result = run_record_json(run);
          result["training_step"] = outcome.training_step;
          result["scheme"] = scheme.name;
          result["positional"] = scheme.config.model.positional;
          result["causal"] = scheme.config.model.causal;
          result["overrides"] = scheme.overrides;
          result["model"] = config_to_json(scheme.config)["model"];  // what a reader needs to rebuild it
          result["device"] = options.device.str();
          result["threads"] = options.threads;
          result["finished"] = utc_now_iso8601();
          // Last: the member is complete once this file exists.
          json_write_atomic((dir / "result.json").string(), result);
          info.members_trained.push_back(batch[m].name());
        }
        json_write_atomic(info_path.string(), run_info_json(info));
        // The study's files follow every batch (but the last: collected once the run is
        // recorded as finished), so a later failure keeps what finished.
        if (b + 1 < batches.size()) study_collect(study_dir);
      }
    }
  } catch (const Interrupted&) {
    info.status = "interrupted";
    info.ended = utc_now_iso8601();
    json_write_atomic(info_path.string(), run_info_json(info));
    throw;
  } catch (const std::exception& error) {
    info.status = "failed";
    info.error = error.what();
    info.ended = utc_now_iso8601();
    json_write_atomic(info_path.string(), run_info_json(info));
    throw;
  }
  // Finished before the last collection, so the report shows how the run ended.
  info.status = "ok";
  info.ended = utc_now_iso8601();
  json_write_atomic(info_path.string(), run_info_json(info));
  return study_collect(study_dir);
}

}  // namespace copytask
