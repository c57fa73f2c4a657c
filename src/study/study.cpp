#include "study/study.h"

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>

#include <unistd.h>

#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include "model/encoder.h"
#include "report/files.h"
#include "report/results.h"
#include "report/run_info.h"
#include "task/copy_task.h"
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
  j["train"].erase("seeds");
  j.erase("compare");
  j.erase("report");
  return j.dump();
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

// attention.json entry of one scheme: per probe, [member][layer][head][T][T] and outputs.
nlohmann::json attention_entry(const std::vector<torch::Tensor>& layers, const torch::Tensor& outputs, int64_t first,
                               int64_t count) {
  // layers[l]: (M, P, H, T, T) for P probes; outputs: (M, P, T).
  nlohmann::json per_probe = nlohmann::json::array();
  const int64_t probes = outputs.size(1);
  for (int64_t p = 0; p < probes; ++p) {
    nlohmann::json members = nlohmann::json::array(), predicted = nlohmann::json::array();
    for (int64_t m = first; m < first + count; ++m) {
      nlohmann::json per_layer = nlohmann::json::array();
      for (const auto& layer : layers) {
        auto maps = layer[m][p].to(torch::kFloat64).contiguous();  // (H, T, T)
        const int64_t H = maps.size(0), T = maps.size(1);
        auto a = maps.accessor<double, 3>();
        nlohmann::json heads = nlohmann::json::array();
        for (int64_t h = 0; h < H; ++h) {
          nlohmann::json rows = nlohmann::json::array();
          for (int64_t i = 0; i < T; ++i) {
            nlohmann::json row = nlohmann::json::array();
            for (int64_t j = 0; j < T; ++j) row.push_back(std::round(a[h][i][j] * 1e6) / 1e6);
            rows.push_back(row);
          }
          heads.push_back(rows);
        }
        per_layer.push_back(heads);
      }
      members.push_back(per_layer);
      auto out = outputs[m][p].contiguous();
      predicted.push_back(std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel()));
    }
    per_probe.push_back({{"attention", members}, {"output", predicted}});
  }
  return per_probe;
}

}  // namespace

std::vector<std::vector<const StudyScheme*>> study_batches(const std::vector<StudyScheme>& schemes) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<const StudyScheme*>> by_key;
  for (const auto& scheme : schemes) {
    const std::string key = batch_key(scheme.config);
    if (!by_key.count(key)) keys.push_back(key);
    by_key[key].push_back(&scheme);
  }
  std::vector<std::vector<const StudyScheme*>> batches;
  for (const auto& key : keys) batches.push_back(by_key[key]);
  return batches;
}

std::vector<MemberSpec> study_batch_members(const std::vector<const StudyScheme*>& batch) {
  std::vector<MemberSpec> members;
  for (const auto* scheme : batch) {
    auto more = members_of(scheme->name, scheme->config.model.positional, scheme->config.model.causal,
                           scheme->config.train.seeds);
    members.insert(members.end(), more.begin(), more.end());
  }
  return members;
}

std::vector<StudyScheme> study_schemes_for_train(const Config& config) {
  nlohmann::json overrides = {{"model.positional", config.model.positional}, {"model.causal", config.model.causal}};
  return {StudyScheme{scheme_name_of(config.model), config, overrides}};
}

std::vector<StudyScheme> study_schemes_for_compare(const Config& config) {
  std::vector<StudyScheme> schemes;
  for (const auto& spec : config.compare.schemes)
    schemes.push_back({spec.name, config_for_scheme(config, spec), spec.overrides});
  return schemes;
}

void study_check_out_dir(const std::string& out_dir) {
  for (const char* file : {"config.json", "results.json", "run.json"}) {
    if (fs::exists(fs::path(out_dir) / file))
      throw ConfigError("--out " + out_dir + " already holds a study (" + file +
                        "); choose another folder or remove it first");
  }
  if (fs::exists(out_dir) && !fs::is_directory(out_dir))
    throw ConfigError("--out " + out_dir + " exists and is not a folder; choose another path");
  // The folder (or the nearest part of its path that exists) must be writable, or the
  // study would fail only after training.
  fs::path existing = fs::absolute(out_dir);
  while (!fs::exists(existing) && existing.has_parent_path() && existing != existing.parent_path())
    existing = existing.parent_path();
  if (!fs::is_directory(existing) || ::access(existing.c_str(), W_OK | X_OK) != 0)
    throw ConfigError("--out " + out_dir + ": cannot create or write there (" + existing.string() +
                      " is not a writable folder); choose another path");
}

nlohmann::json study_run(const Config& base, const std::vector<StudyScheme>& schemes, const StudyOptions& options) {
  const fs::path out(options.out_dir);
  fs::create_directories(out / "checkpoints");
  json_write_atomic((out / "config.json").string(), config_to_json(base));

  RunInfo info;
  info.command = options.command_line;
  info.device = options.device.str();
  info.threads = options.threads;
  info.started = utc_now_iso8601();
  json_write_atomic((out / "run.json").string(), run_info_json(info));

  nlohmann::json results = {{"schemes", nlohmann::json::object()}};
  nlohmann::json attention = {
      {"probes", base.report.probes}, {"inputs", nlohmann::json::array()}, {"schemes", nlohmann::json::object()}};
  const std::string metrics_path = (out / "metrics.jsonl").string();

  try {
    // The data: one copy task for the whole study (schemes may not change task.*).
    const CopyTask task = copy_task_generate(base.task);
    const TrainData data = train_data_upload(task, options.device);
    spdlog::info("task: {} train / {} test examples, context {}, vocab {}", task.train.count, task.test.count,
                 task.context, task.vocab_size);

    // The probes' full inputs (<copy> and padding added); report.probes may be empty.
    std::vector<int64_t> probe_flat;
    for (const auto& probe : base.report.probes) {
      auto input = copy_input(probe_tokens(probe, base.task), base.task.vocab_size, base.task.context);
      attention["inputs"].push_back(input);
      probe_flat.insert(probe_flat.end(), input.begin(), input.end());
    }
    const int64_t probe_count = static_cast<int64_t>(base.report.probes.size());
    const torch::Tensor probe_inputs =
        torch::tensor(probe_flat, torch::kLong).view({probe_count, base.task.context}).to(options.device);  // (P, T)

    const auto batches = study_batches(schemes);
    for (size_t b = 0; b < batches.size(); ++b) {
      const std::vector<const StudyScheme*>& batch = batches[b];
      const Config& config = batch.front()->config;
      const std::vector<MemberSpec> members = study_batch_members(batch);
      std::string names;
      for (const auto* scheme : batch) names += (names.empty() ? "" : ", ") + scheme->name;
      const int64_t M = static_cast<int64_t>(members.size());
      spdlog::info("batch {}/{}: {} members ({}), {} steps, batch size {}", b + 1, batches.size(), M, names,
                   config.train.steps, config.train.batch_size == 0 ? std::string("full") : std::to_string(config.train.batch_size));

      torch::manual_seed(0);  // nothing should draw from the global generator; pin it anyway
      Encoder model(encoder_shape_of(config), members, options.device);
      ProgressLine progress(options.progress_line, "[" + std::to_string(b + 1) + "/" + std::to_string(batches.size()) + "]",
                            config.train.steps);

      auto on_evaluation = [&](const Evaluation& evaluation) {
        std::map<std::string, std::pair<double, int>> test_mean;
        for (int64_t m = 0; m < M; ++m) {
          jsonl_append(metrics_path, {{"step", evaluation.step},
                                      {"scheme", members[m].scheme},
                                      {"seed", members[m].seed},
                                      {"seconds", evaluation.seconds},
                                      {"train_loss", evaluation.train[m].loss},
                                      {"train_exact", evaluation.train[m].exact},
                                      {"train_token", evaluation.train[m].token},
                                      {"test_loss", evaluation.test[m].loss},
                                      {"test_exact", evaluation.test[m].exact},
                                      {"test_token", evaluation.test[m].token},
                                      {"test_exact_by_length", by_length_json(evaluation.test[m].exact_by_length)}});
          test_mean[members[m].scheme].first += evaluation.test[m].exact;
          test_mean[members[m].scheme].second += 1;
        }
        std::string line;
        for (const auto* scheme : batch) {
          const auto& [sum, count] = test_mean[scheme->name];
          line += fmt::format("{}{} {:.3f}", line.empty() ? "" : ", ", scheme->name, sum / count);
        }
        progress.set_evaluation("test exact: " + line);
        // On a terminal the progress line shows each evaluation; the log keeps the last.
        if (!options.progress_line || evaluation.step == config.train.steps)
          spdlog::info("step {}/{} ({:.1f}s) test exact: {}", evaluation.step, config.train.steps, evaluation.seconds, line);
      };
      auto on_step = [&](int64_t step, const torch::Tensor& loss) { progress.update(step, loss); };
      const TrainOutcome outcome = train_members(model, data, config.train, on_evaluation, on_step);

      // Outputs and attention maps of every member on the probes.
      std::vector<torch::Tensor> probe_attention;
      const torch::Tensor probe_outputs =
          probe_count > 0 ? predict_tokens(model, probe_inputs, &probe_attention).cpu()  // (M, P, T)
                          : torch::zeros({M, 0, base.task.context}, torch::kLong);
      for (auto& layer : probe_attention) layer = layer.cpu();

      int64_t first = 0;
      for (const auto* scheme : batch) {
        const int64_t count = static_cast<int64_t>(scheme->config.train.seeds.size());
        std::vector<RunRecord> runs;
        for (int64_t m = first; m < first + count; ++m) {
          RunRecord run;
          run.seed = members[m].seed;
          run.test_exact = outcome.final.test[m].exact;
          run.test_token = outcome.final.test[m].token;
          run.train_exact = outcome.final.train[m].exact;
          run.train_token = outcome.final.train[m].token;
          run.final_loss = outcome.final.train[m].loss;
          run.test_loss = outcome.final.test[m].loss;
          run.steps = outcome.steps;
          run.seconds = outcome.seconds;
          run.batch_members = M;
          run.test_exact_by_length = outcome.final.test[m].exact_by_length;
          runs.push_back(run);
        }
        results["schemes"][scheme->name] = scheme_results_json(runs);
        results["schemes"][scheme->name]["positional"] = scheme->config.model.positional;
        results["schemes"][scheme->name]["causal"] = scheme->config.model.causal;
        results["schemes"][scheme->name]["overrides"] = scheme->overrides;
        attention["schemes"][scheme->name] = {{"seeds", scheme->config.train.seeds},
                                              {"probes", attention_entry(probe_attention, probe_outputs, first, count)}};
        checkpoint_save(model, first, count, (out / "checkpoints" / (scheme->name + ".pt")).string());
        first += count;
      }
      // Rewritten whole after every batch: a later failure keeps what finished.
      json_write_atomic((out / "results.json").string(), results);
      json_write_atomic((out / "attention.json").string(), attention);
    }
  } catch (const Interrupted&) {
    info.status = "interrupted";
    info.ended = utc_now_iso8601();
    json_write_atomic((out / "run.json").string(), run_info_json(info));
    throw;
  } catch (const std::exception& error) {
    info.status = "failed";
    info.error = error.what();
    info.ended = utc_now_iso8601();
    json_write_atomic((out / "run.json").string(), run_info_json(info));
    throw;
  }
  info.status = "ok";
  info.ended = utc_now_iso8601();
  json_write_atomic((out / "run.json").string(), run_info_json(info));
  return results;
}

}  // namespace copytask
