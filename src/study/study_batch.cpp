#include "study/study_batch.h"

#include <filesystem>
#include <map>

#include "util/log.h"

#include "model/encoder.h"
#include "model/hooks/registry.h"
#include "util/atomic_files.h"
#include "records/member_result.h"
#include "records/split_metrics.h"
#include "report/results.h"
#include "config/config_fields.h"
#include "study/member_files.h"
#include "model/positional_analysis.h"
#include "task/copy_task.h"
#include "task/length_sets.h"
#include "train/checkpoint.h"
#include "train/evaluate.h"

namespace copytask {
namespace fs = std::filesystem;

namespace {

// A member's attention.json: per probe its maps [layer][head][T][T] and its output [T].
nlohmann::json member_attention_json(const std::vector<torch::Tensor>& layers, const torch::Tensor& outputs,
                                     int64_t member, const StudyInputs& inputs, const std::string& task_kind) {
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
    auto out = outputs[member][p].to(torch::kCPU).contiguous();  // the host's copy, from any device
    probes.push_back({{"attention", per_layer},
                      {"output", std::vector<int64_t>(out.data_ptr<int64_t>(), out.data_ptr<int64_t>() + out.numel())}});
  }
  return {{"inputs", inputs.probe_inputs}, {"targets", inputs.probe_targets}, {"task", task_kind}, {"probes", probes}};
}

// One metrics.jsonl line: a member's numbers at one evaluation.
MetricsLine metrics_line(const Evaluation& evaluation, int64_t m, const MemberSpec& spec) {
  MetricsLine line;
  line.step = evaluation.step;
  line.scheme = spec.arm;
  line.seed = spec.seed;
  line.seconds = evaluation.seconds;
  line.whole_split = split_metric_values(evaluation.test[m], evaluation.train[m], /*line_names=*/true);
  line.test_exact_by_length = evaluation.test[m].exact_by_length;
  if (!evaluation.lengths.empty()) line.length_generalization = length_metrics_of(evaluation.lengths[m]);
  return line;
}

// Test exact-match per scheme (mean over its seeds in the batch), in the batch's order.
std::vector<std::pair<std::string, double>> test_exact_by_scheme(const Evaluation& evaluation,
                                                                 const std::vector<MemberSpec>& specs) {
  std::vector<std::pair<std::string, double>> means;
  std::map<std::string, int> counts;
  for (size_t m = 0; m < specs.size(); ++m) {
    if (means.empty() || means.back().first != specs[m].arm) means.emplace_back(specs[m].arm, 0.0);
    means.back().second += evaluation.test[m].exact;
    counts[specs[m].arm] += 1;
  }
  for (auto& [name, sum] : means) sum /= counts[name];
  return means;
}

// Learned additive tables at the start and at every evaluation: their path in positional.json.
class LearnedPath {
 public:
  LearnedPath(Encoder& model, int64_t context) : model_(model), context_(context), path_(model->members().size()) {}
  void record(int64_t step) {
    torch::NoGradGuard no_grad;
    for (int64_t m = 0; m < static_cast<int64_t>(path_.size()); ++m)
      if (model_->scheme(m).learned_for(additive_hook()))
        path_[m].emplace_back(step,
                              model_->scheme(m).owner_of(additive_hook())->table(additive_hook(), context_).detach().cpu().clone());
  }
  const std::vector<std::pair<int64_t, torch::Tensor>>& of(int64_t m) const { return path_[m]; }

 private:
  Encoder& model_;
  int64_t context_;
  std::vector<std::vector<std::pair<int64_t, torch::Tensor>>> path_;
};

// The member's files but metrics.jsonl (written at every evaluation): model.pt,
// attention.json, positional.json, and result.json last (the member is then complete).
void member_outputs_write(const std::string& dir, Encoder& model, int64_t m, const StudyMember& member,
                          const TrainOutcome& outcome, const nlohmann::json& attention,
                          const nlohmann::json& positional, const StudyOptions& options) {
  const StudyArm& arm = *member.arm;
  const Config& config = arm.config;
  checkpoint_save(model, m, 1, (fs::path(dir) / "model.pt").string());
  json_write_atomic((fs::path(dir) / "attention.json").string(), attention);
  json_write_atomic((fs::path(dir) / "positional.json").string(), positional);
  RunRecord run = run_record_of(member.seed, outcome.final.train[m], outcome.final.test[m]);
  run.steps = outcome.steps;
  run.seconds = outcome.seconds;
  run.batch_members = static_cast<int64_t>(model->members().size());
  if (!outcome.final.lengths.empty())
    run.length_generalization = length_generalization_json(outcome.final.lengths[m], config.task.max_len, config.task.context);
  if (!outcome.final.rescaled.empty())
    run.length_generalization_rescaled =
        rescaled_member_json(outcome.final.rescaled, m, config.task.max_len, config.task.context);
  MemberResult result;
  result.run = run;
  result.training_step = outcome.training_step;
  result.arm = arm.name;
  result.positional = config.model.positional;
  result.causal = config.model.causal;
  result.overrides = arm.overrides;
  result.model = config_to_json(config)["model"];
  result.device = options.device.str();
  result.threads = options.threads;
  result.finished = utc_now_iso8601();
  json_write_atomic((fs::path(dir) / "result.json").string(), nlohmann::json(result));
}

}  // namespace

StudyInputs study_inputs_prepare(const Config& base, const std::vector<int64_t>& seeds, const c10::Device& device) {
  StudyInputs inputs;
  const CopyTask task = copy_task_generate(base.task);
  inputs.data = train_data_upload(task, device);
  log_info("task: {}{}, {} train / {} test examples, context {}, vocab {}", base.task.kind,
               base.task.kind == "selective" ? " (noise " + config_value_text(base.task.noise) + ")" : std::string(),
               task.train.count, task.test.count, task.context, task.vocab_size);
  // Length generalization: the same examples per length for every member (or every member
  // of a seed, eval.inputs = per-seed).
  inputs.data.lengths = length_data_make(base.task, base.eval, task.train, seeds, base.task.context, device);
  const LengthData& lengths = inputs.data.lengths;
  if (!lengths.empty())
    log_info("length generalization: lengths {}..{} at every evaluation, up to {} examples each{}, contexts {}..{}",
                 lengths.lengths.front(), lengths.lengths.back(), base.eval.per_length,
                 lengths.set_seeds.empty() ? "" : text_format(" for each of {} seeds", lengths.set_seeds.size()),
                 lengths.contexts.front(), lengths.contexts.back());
  inputs.context = base.task.context;
  inputs.probe_inputs = nlohmann::json::array();
  inputs.probe_targets = nlohmann::json::array();
  std::vector<int64_t> flat;
  for (const auto& probe : base.report.probes) {
    const Example example = probe_example(probe, base.task);
    auto input = example_input(base.task, example, base.task.context);
    inputs.probe_inputs.push_back(input);
    inputs.probe_targets.push_back(example_target(base.task, example, base.task.context));
    flat.insert(flat.end(), input.begin(), input.end());
  }
  inputs.probe_count = static_cast<int64_t>(base.report.probes.size());
  inputs.probe_tensor = torch::tensor(flat, torch::kLong).view({inputs.probe_count, inputs.context}).to(device);  // (P, T)
  return inputs;
}

BatchRecord study_batch_train(const std::vector<StudyMember>& batch, const BatchPosition& position,
                              const StudyInputs& inputs, const std::string& study_dir, const StudyOptions& options) {
  const Config& config = batch.front().arm->config;
  const std::vector<MemberSpec> specs = study_batch_specs(batch);
  const int64_t M = static_cast<int64_t>(specs.size());
  std::string names;
  for (size_t m = 0; m < specs.size(); ++m)
    if (m == 0 || specs[m].arm != specs[m - 1].arm) names += (names.empty() ? "" : ", ") + specs[m].arm;
  log_info("batch {}/{}: {} members ({}), {} steps, batch size {}", position.index + 1, position.count, M, names,
               config.train.steps,
               config.train.batch_size == 0 ? std::string("full") : std::to_string(config.train.batch_size));

  // A member that was not complete may have left files from an interrupted run.
  std::vector<std::string> dirs;
  for (const auto& member : batch) {
    dirs.push_back(member_dir(study_dir, member.arm->name, member.seed));
    fs::remove_all(dirs.back());
    fs::create_directories(dirs.back());
  }

  torch::manual_seed(0);  // nothing should draw from the global generator; pin it anyway
  Encoder model(encoder_shape_of(config), specs, options.device);
  LearnedPath learned_path(model, config.task.context);
  learned_path.record(0);

  auto on_evaluation = [&](const Evaluation& evaluation) {
    for (int64_t m = 0; m < M; ++m)
      jsonl_append((fs::path(dirs[m]) / "metrics.jsonl").string(), nlohmann::json(metrics_line(evaluation, m, specs[m])));
    learned_path.record(evaluation.step);
    if (options.progress.on_evaluation)
      options.progress.on_evaluation({position, evaluation.step, evaluation.seconds, test_exact_by_scheme(evaluation, specs)});
  };
  auto on_step = [&](int64_t step, const torch::Tensor& loss) {
    if (options.progress.on_step) options.progress.on_step({position, step, &loss});
  };
  BatchRecord record;
  for (const auto& member : batch) record.members.push_back(member.name());
  auto on_start = [&](const TrainingStep& step) {
    record.training_step = step.name();
    record.fallback_reason = step.fallback_reason();
    // Never silently slower: a batch off its device's fused step says why (the reason names
    // the step: the fused CPU step or the fused GPU step).
    if (!record.fallback_reason.empty())
      log_warn("batch {}/{}: training on the autograd step, several times slower than the fused step: {}",
                   position.index + 1, position.count, record.fallback_reason);
  };
  const TrainOutcome outcome = train_members(model, inputs.data, config.train, on_evaluation, on_step, on_start);
  if (outcome.training_step != record.training_step) {
    // A CUDA graph whose capture failed (after the warm-up steps): the batch went on uncaptured.
    record.training_step = outcome.training_step;
    record.fallback_reason = outcome.fallback_reason;
    log_warn("batch {}/{}: training went on uncaptured: {}", position.index + 1, position.count,
                 record.fallback_reason);
  }

  // Outputs and attention maps of every member on the probes.
  std::vector<torch::Tensor> probe_attention;
  const torch::Tensor probe_outputs = inputs.probe_count > 0
                                          ? predict_tokens(model, inputs.probe_tensor, &probe_attention).cpu()  // (M, P, T)
                                          : torch::zeros({M, 0, inputs.context}, torch::kLong);
  for (auto& layer : probe_attention) layer = layer.cpu();
  // The content terms on the first probe, for positional.json (members with a content hook).
  std::vector<torch::Tensor> probe_terms;
  if (inputs.probe_count > 0)
    for (auto& block : model->content_terms(inputs.probe_tensor.narrow(0, 0, 1).unsqueeze(0).expand({M, 1, inputs.context})))
      probe_terms.push_back(block.cpu());  // (M, 1, H, T, T)
  for (int64_t m = 0; m < M; ++m) {
    std::vector<torch::Tensor> member_terms;
    if (model->scheme(m).owner_of(content_hook()))
      for (const auto& block : probe_terms) member_terms.push_back(block[m][0]);  // (H, T, T)
    member_outputs_write(dirs[m], model, m, batch[m], outcome,
                         member_attention_json(probe_attention, probe_outputs, m, inputs, config.task.kind),
                         positional_member_json(model->scheme(m), specs[m].seed, config.task.context, learned_path.of(m),
                                                member_terms),
                         options);
  }
  return record;
}

}  // namespace copytask
