#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <torch/torch.h>

#include "model/fused_cpu.h"
#include "report/results.h"
#include "task/output_errors.h"
#include "task/task_kind.h"

namespace copytask {

namespace {
// One forward pass without dropout: the fused CPU kernel's where it runs, LibTorch's elsewhere.
torch::Tensor forward_logits(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out,
                             int64_t first) {
  const int64_t T = inputs.size(2);
  const torch::Tensor positions = model->evaluation_positions(inputs, first);  // (M, N, T) or undefined
  if (fused_cpu_unsupported(*model).empty())
    return fused_cpu_forward(*model, model->positional_tables(model->table_positions(T)), inputs, attention_out, positions);
  return model->forward(inputs, nullptr, attention_out, positions);
}

// Greedy generation (task.format = next-token): the outputs after <copy> are blanked, then
// generated one at a time, each fed back in, for k steps where k is the row's count of
// content tokens; the logits of the generated sequence come back. The causal mask makes
// the logits at position t depend on the tokens up to t only, so the last pass's logits at
// every output position are those the generation read. inputs (M, N, T).
torch::Tensor generated_logits(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out,
                               int64_t first) {
  const TaskConfig task = model->shape().task();
  const int64_t T = inputs.size(2);
  auto place = torch::arange(T, inputs.options()).view({1, 1, T});                        // (1, 1, T)
  auto copy_at = inputs.eq(task.vocab_size - 1).to(torch::kLong).argmax(-1, true);       // (M, N, 1) first <copy>
  auto before = place.lt(copy_at);                                                        // (M, N, T)
  auto noise = inputs.eq(noise_token(task)).logical_and(before).sum(-1, true);           // (M, N, 1)
  auto outputs = copy_at - noise;                                                         // (M, N, 1) k
  auto sequence = inputs.masked_fill(place.gt(copy_at), 0).contiguous();                 // (M, N, T) the answer blanked
  const int64_t longest = outputs.max().item<int64_t>();
  for (int64_t j = 0; j < longest; ++j) {
    // Output j, predicted at copy_at + j, goes to copy_at + 1 + j (where the row has one).
    auto predicted = forward_logits(model, sequence, nullptr, first).argmax(-1);         // (M, N, T)
    auto at = (copy_at + j).clamp_max(T - 1);                                             // (M, N, 1)
    auto into = (at + 1).clamp_max(T - 1);                                                // (M, N, 1)
    auto fill = outputs.gt(j).logical_and(copy_at + 1 + j < T);                           // (M, N, 1)
    auto value = torch::where(fill, predicted.gather(-1, at), sequence.gather(-1, into)); // (M, N, 1)
    sequence.scatter_(-1, into, value);
  }
  return forward_logits(model, sequence, attention_out, first);
}
}  // namespace

torch::Tensor model_logits(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out,
                           int64_t first) {
  torch::NoGradGuard no_grad;
  if (next_token(model->shape().task())) return generated_logits(model, inputs, attention_out, first);
  return forward_logits(model, inputs, attention_out, first);
}

std::vector<SplitScores> evaluate_split(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                        int64_t noise_token, int64_t chunk) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t M = model->member_count(), N = inputs.size(0), T = inputs.size(1);
  auto options = torch::TensorOptions().dtype(torch::kFloat64).device(inputs.device());
  auto loss_sum = torch::zeros({M}, options), exact_sum = torch::zeros({M}, options),
       token_sum = torch::zeros({M}, options), scored_sum = torch::zeros({M}, options);
  auto lengths = content_lengths(inputs, model->shape().vocab, noise_token);                 // (N)
  auto exact_by_length = torch::zeros({M, T + 1}, options);                     // (M, T+1)
  auto count_by_length = torch::zeros({T + 1}, options).index_add_(0, lengths, torch::ones({N}, options));
  for (int64_t start = 0; start < N; start += chunk) {
    const int64_t n = std::min(chunk, N - start);
    auto x = inputs.narrow(0, start, n).unsqueeze(0).expand({M, n, T});   // (M, n, T)
    auto y = targets.narrow(0, start, n).unsqueeze(0).expand({M, n, T});  // (M, n, T)
    auto logits = model_logits(model, x, nullptr, start);                 // (M, n, T, V)
    loss_sum += member_losses(logits, y).to(torch::kFloat64) * static_cast<double>(n);
    // A position out of the loss (task.convention = cho) is not scored: it counts as right
    // for exact match and not at all for the token accuracy.
    auto scored = y.ge(0);                                                 // (M, n, T)
    auto correct = logits.argmax(-1).eq(y);                               // (M, n, T)
    token_sum += correct.sum({1, 2}).to(torch::kFloat64);
    scored_sum += scored.sum({1, 2}).to(torch::kFloat64);
    auto exact = correct.logical_or(scored.logical_not()).all(-1).to(torch::kFloat64);  // (M, n)
    exact_sum += exact.sum(1);
    exact_by_length.index_add_(1, lengths.narrow(0, start, n), exact);
  }
  // One host transfer for the whole evaluation.
  auto totals = torch::stack({loss_sum, exact_sum, token_sum, scored_sum}).cpu();  // (4, M)
  auto by_length = torch::cat({exact_by_length, count_by_length.unsqueeze(0)}).cpu();  // (M+1, T+1)
  auto a = totals.accessor<double, 2>();
  auto l = by_length.accessor<double, 2>();
  std::vector<SplitScores> scores(M);
  for (int64_t m = 0; m < M; ++m) {
    scores[m].loss = a[0][m] / static_cast<double>(N);
    scores[m].exact = a[1][m] / static_cast<double>(N);
    scores[m].token = a[2][m] / a[3][m];  // N x T, but for the positions out of the loss
    scores[m].examples = N;
    for (int64_t k = 0; k <= T; ++k) scores[m].exact_by_length.push_back(l[M][k] > 0 ? l[m][k] / l[M][k] : -1.0);
  }
  if (was_training) model->train();
  return scores;
}

LengthData length_data_upload(const std::vector<std::vector<LengthSet>>& by_set, const std::vector<int64_t>& set_seeds,
                              const TaskConfig& task, const torch::Device& device) {
  LengthData data;
  data.task = task;
  data.set_seeds = set_seeds;
  const size_t S = by_set.size();
  if (S == 0) return data;
  for (size_t i = 0; i < by_set.front().size(); ++i) {
    const LengthSet& first = by_set.front()[i];
    const int64_t N = first.examples.count, T = first.context, k = first.length;
    data.lengths.push_back(k);
    data.contexts.push_back(T);
    data.trained.push_back(first.trained);
    std::vector<int64_t> inputs, targets, output_at, source_at;
    auto& host_inputs = data.host_inputs.emplace_back();
    auto& host_sources = data.host_sources.emplace_back();
    for (const auto& sets : by_set) {
      const LengthSet& set = sets[i];
      if (set.length != k || set.context != T || set.examples.count != N)
        throw std::logic_error("length_data_upload: the sets of length " + std::to_string(k) + " differ in shape");
      inputs.insert(inputs.end(), set.examples.inputs.begin(), set.examples.inputs.end());
      targets.insert(targets.end(), set.examples.targets.begin(), set.examples.targets.end());
      std::vector<OutputSources> all_sources;
      for (int64_t n = 0; n < N; ++n) {
        const OutputSources& sources =
            all_sources.emplace_back(output_sources(task, set.examples.inputs.data() + n * T, T));
        for (int64_t j = 0; j < k; ++j) {
          output_at.push_back(sources.output_begin() + j);
          source_at.push_back(sources.sources[j]);
        }
      }
      host_inputs.push_back(set.examples.inputs);
      host_sources.push_back(std::move(all_sources));
    }
    const int64_t sets = static_cast<int64_t>(S);
    data.inputs.push_back(torch::tensor(inputs, torch::kLong).view({sets, N, T}).to(device));       // (S, N, T)
    data.targets.push_back(torch::tensor(targets, torch::kLong).view({sets, N, T}).to(device));     // (S, N, T)
    data.output_at.push_back(torch::tensor(output_at, torch::kLong).view({sets, N, k}).to(device));  // (S, N, k)
    data.source_at.push_back(torch::tensor(source_at, torch::kLong).view({sets, N, k}).to(device));  // (S, N, k)
  }
  return data;
}

LengthData length_data_upload(const std::vector<LengthSet>& sets, const TaskConfig& task, const torch::Device& device) {
  return length_data_upload(std::vector<std::vector<LengthSet>>{sets}, {}, task, device);
}

LengthData length_data_make(const TaskConfig& task, const EvalConfig& eval, const CopySplit& train,
                            const std::vector<int64_t>& seeds, int64_t trained_context, const torch::Device& device) {
  std::vector<std::vector<LengthSet>> by_set;
  std::vector<int64_t> set_seeds;
  if (eval.inputs == "per-seed") {
    for (const int64_t seed : seeds)
      if (std::find(set_seeds.begin(), set_seeds.end(), seed) == set_seeds.end()) set_seeds.push_back(seed);
    by_set = length_sets_generate_per_seed(task, eval, train, set_seeds);
  } else {
    by_set.push_back(length_sets_generate(task, eval, train));
  }
  LengthData data = length_data_upload(by_set, set_seeds, task, device);
  data.rope_rescaling = eval.rope_rescaling;
  data.rope_factor = eval.rope_factor;
  data.position_start = evaluation_start(eval.position_start);
  data.trained_context = trained_context;
  return data;
}

int64_t LengthData::set_of(int64_t seed) const {
  if (set_seeds.empty()) return 0;
  const auto at = std::find(set_seeds.begin(), set_seeds.end(), seed);
  if (at == set_seeds.end())
    throw std::logic_error("the length sets hold no inputs drawn for seed " + std::to_string(seed));
  return at - set_seeds.begin();
}

namespace {

// Sums over the examples of one length, per member, in double: the scores and the
// measurements of why, divided by the counts at the end.
struct LengthSums {
  torch::Tensor exact, token, by_output, source_attention, entropy;  // (M), (M), (M, k), (M, B, H), (M, B, H)
  std::vector<std::vector<double>> errors;                           // [member][kind] counts
};

// Adds one chunk of n examples (rows `start`..) of length index i to sums; member m reads
// set set_of[m].
void length_chunk_add(Encoder& model, const LengthData& data, size_t i, const torch::Tensor& set_of, int64_t start,
                      int64_t n, LengthSums& sums) {
  const int64_t M = model->member_count(), T = data.contexts[i], k = data.lengths[i];
  // Each member's rows of its set: (S, N, .) -> (M, n, .); one shared set as a view with
  // stride 0 over the members, which the position IDs read once.
  auto of_members = [&](const torch::Tensor& sets) {
    auto rows = sets.narrow(1, start, n);  // (S, n, .)
    return rows.size(0) == 1 ? rows.expand({M, n, rows.size(2)}) : rows.index_select(0, set_of);
  };
  auto x = of_members(data.inputs[i]);                    // (M, n, T)
  const auto output_at = of_members(data.output_at[i]);   // (M, n, k)
  const auto source_at = of_members(data.source_at[i]);   // (M, n, k)
  std::vector<torch::Tensor> attention;                   // per block (M, n, H, T, T)
  auto predicted = model_logits(model, x, &attention, start).argmax(-1).gather(2, output_at);  // (M, n, k)
  auto wanted = of_members(data.targets[i]).gather(2, output_at);                               // (M, n, k)
  auto correct = predicted.eq(wanted);                                                              // (M, n, k)
  sums.token += correct.sum({1, 2}).to(torch::kFloat64);
  sums.exact += correct.all(-1).sum(1).to(torch::kFloat64);
  sums.by_output += correct.sum(1).to(torch::kFloat64);
  // Each output row's weights (row output_at, column source_at), as flat indices into each
  // member's (n, T, T) and (n, T).
  const auto example = torch::arange(n, output_at.options()).view({1, n, 1});  // (1, n, 1)
  const auto cell = ((example * T + output_at) * T + source_at).view({M, 1, n * k});  // (M, 1, n k)
  const auto row = (example * T + output_at).view({M, 1, n * k, 1});               // (M, 1, n k, 1)
  std::vector<torch::Tensor> on_source, entropy;
  for (const auto& weights : attention) {
    const int64_t H = weights.size(2);
    auto by_head = weights.transpose(1, 2);                                                        // (M, H, n, T, T)
    on_source.push_back(by_head.reshape({M, H, n * T * T}).gather(2, cell.expand({M, H, n * k})).sum(2));  // (M, H)
    auto rows = by_head.reshape({M, H, n * T, T}).gather(2, row.expand({M, H, n * k, T}));         // (M, H, n k, T)
    entropy.push_back(-torch::xlogy(rows, rows).sum({2, 3}));                                      // (M, H)
  }
  sums.source_attention += torch::stack(on_source, 1).to(torch::kFloat64);  // (M, B, H)
  sums.entropy += torch::stack(entropy, 1).to(torch::kFloat64);             // (M, B, H)
  // The wrong outputs by kind, on the host.
  const auto host_predicted = predicted.cpu().contiguous();  // (M, n, k)
  const auto host_correct = correct.cpu().contiguous();      // (M, n, k)
  const auto host_set_of = set_of.cpu().contiguous();        // (M)
  const int64_t* p = host_predicted.data_ptr<int64_t>();
  const bool* ok = host_correct.data_ptr<bool>();
  const int64_t* set = host_set_of.data_ptr<int64_t>();
  for (int64_t m = 0; m < M; ++m)
    for (int64_t e = 0; e < n; ++e) {
      const int64_t* input = data.host_inputs[i][set[m]].data() + (start + e) * T;
      const OutputSources& sources = data.host_sources[i][set[m]][start + e];
      for (int64_t j = 0; j < k; ++j) {
        const int64_t at = (m * n + e) * k + j;
        if (!ok[at]) sums.errors[m][static_cast<int>(output_error(data.task, input, sources, j, p[at]))] += 1;
      }
    }
}

// The lengths' start of offset and coupled IDs, set for a scope and put back after it.
class EvaluationStartScope {
 public:
  EvaluationStartScope(Encoder& model, EvaluationStart start) : model_(model), was_(model->evaluation_start()) {
    model_->evaluation_start_set(start);
  }
  ~EvaluationStartScope() { model_->evaluation_start_set(was_); }

 private:
  Encoder& model_;
  EvaluationStart was_;
};

}  // namespace

std::vector<std::vector<LengthScores>> evaluate_lengths(Encoder& model, const LengthData& data, int64_t chunk) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t M = model->member_count(), B = model->shape().blocks, H = model->shape().heads;
  const EvaluationStartScope start(model, data.position_start);
  std::vector<int64_t> member_sets;
  for (const auto& member : model->members()) member_sets.push_back(data.set_of(member.seed));
  std::vector<std::vector<LengthScores>> scores(M);
  for (size_t i = 0; i < data.lengths.size(); ++i) {
    const int64_t k = data.lengths[i], T = data.contexts[i], N = data.inputs[i].size(1);
    LengthScores base;
    base.length = k;
    base.context = T;
    base.count = N;
    base.trained = data.trained[i];
    if (N == 0 || T > model->position_limit()) {
      base.exact = base.token = std::numeric_limits<double>::quiet_NaN();
      base.skipped = N == 0 ? "no input of this length outside the training split"
                            : "context " + std::to_string(T) + " is beyond the learned table's " +
                                  std::to_string(model->position_limit()) + " rows (model.learned_positions)";
      for (int64_t m = 0; m < M; ++m) scores[m].push_back(base);
      continue;
    }
    auto options = torch::TensorOptions().dtype(torch::kFloat64).device(data.inputs[i].device());
    LengthSums sums{torch::zeros({M}, options), torch::zeros({M}, options), torch::zeros({M, k}, options),
                    torch::zeros({M, B, H}, options), torch::zeros({M, B, H}, options),
                    std::vector<std::vector<double>>(M, std::vector<double>(kOutputErrorKinds, 0.0))};
    // Long contexts in smaller chunks: the attention weights (M, n, H, T, T) of all blocks stay near 2^25 floats.
    const int64_t attention_per_example = M * B * H * T * T;
    const int64_t length_chunk = std::max<int64_t>(1, std::min<int64_t>(chunk, (int64_t{1} << 25) / attention_per_example));
    const auto set_of = torch::tensor(member_sets, torch::kLong).to(data.inputs[i].device());  // (M)
    for (int64_t start = 0; start < N; start += length_chunk)
      length_chunk_add(model, data, i, set_of, start, std::min(length_chunk, N - start), sums);
    const double outputs = static_cast<double>(N * k);
    auto totals = torch::cat({sums.exact.unsqueeze(1), sums.token.unsqueeze(1), sums.by_output / static_cast<double>(N),
                              sums.source_attention.view({M, B * H}) / outputs, sums.entropy.view({M, B * H}) / outputs},
                             1)
                      .cpu()
                      .contiguous();  // (M, 2 + k + 2 B H)
    auto a = totals.accessor<double, 2>();
    for (int64_t m = 0; m < M; ++m) {
      LengthScores one = base;
      one.exact = a[m][0] / static_cast<double>(N);
      one.token = a[m][1] / outputs;
      for (int64_t j = 0; j < k; ++j) one.token_by_output.push_back(measurement_rounded(a[m][2 + j]));
      one.source_attention.assign(B, std::vector<double>(H));
      one.entropy.assign(B, std::vector<double>(H));
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h) {
          one.source_attention[b][h] = measurement_rounded(a[m][2 + k + b * H + h]);
          one.entropy[b][h] = measurement_rounded(a[m][2 + k + B * H + b * H + h]);
        }
      for (int kind = 0; kind < kOutputErrorKinds; ++kind)
        one.errors.emplace_back(output_error_names()[kind], measurement_rounded(sums.errors[m][kind] / outputs));
      scores[m].push_back(one);
    }
  }
  if (was_training) model->train();
  return scores;
}

LengthData LengthData::only(size_t i) const {
  LengthData one;
  one.lengths = {lengths[i]};
  one.contexts = {contexts[i]};
  one.trained = {trained[i]};
  one.inputs = {inputs[i]};
  one.targets = {targets[i]};
  one.output_at = {output_at[i]};
  one.source_at = {source_at[i]};
  one.host_inputs = {host_inputs[i]};
  one.host_sources = {host_sources[i]};
  one.set_seeds = set_seeds;
  one.task = task;
  one.trained_context = trained_context;
  one.position_start = position_start;
  return one;
}

namespace {
const char* const kDoesNotRotate = "does not rotate q and k";
}  // namespace

std::vector<RescaledLengths> evaluate_rope_rescalings(Encoder& model, const LengthData& data, int64_t chunk) {
  const int64_t M = model->member_count();
  std::vector<RescaledLengths> out;
  for (const auto& method : data.rope_rescaling) {
    RescaledLengths result;
    result.method = method;
    result.factor = data.rope_factor;
    result.lengths.resize(static_cast<size_t>(M));
    result.skipped.resize(static_cast<size_t>(M));
    bool any = false;
    for (int64_t m = 0; m < M; ++m) {
      const RopeRescaling probe{method, 2.0, data.trained_context};
      if (!model->rotates(m)) result.skipped[m] = kDoesNotRotate;
      else result.skipped[m] = model->scheme(m).rescaling_problem(probe);
      any = any || result.skipped[m].empty();
    }
    if (any)
      for (size_t i = 0; i < data.lengths.size(); ++i) {
        // The factor: given, or per length the evaluated context over the trained one.
        const double factor = data.rope_factor > 0 ? data.rope_factor
                                                   : std::max(1.0, static_cast<double>(data.contexts[i]) /
                                                                       static_cast<double>(data.trained_context));
        model->rope_rescaling_set({method, factor, data.trained_context});
        const auto scores = evaluate_lengths(model, data.only(i), chunk);  // [member][1]
        for (int64_t m = 0; m < M; ++m)
          if (result.skipped[m].empty()) result.lengths[m].push_back(scores[m].front());
      }
    model->rope_rescaling_set({});
    out.push_back(std::move(result));
  }
  return out;
}

nlohmann::json rescaled_member_json(const std::vector<RescaledLengths>& rescaled, int64_t m, int64_t train_max_len,
                                    int64_t positions_trained) {
  nlohmann::json out;
  for (const auto& r : rescaled) {
    if (r.skipped[m] == kDoesNotRotate) continue;
    out[r.method] = r.skipped[m].empty() ? rescaled_length_json(r.lengths[m], r.factor, train_max_len, positions_trained)
                                         : nlohmann::json{{"skipped", r.skipped[m]}};
  }
  return out;
}

torch::Tensor content_lengths(const torch::Tensor& inputs, int64_t vocab_size, int64_t noise_token) {
  auto copy_at = inputs.eq(vocab_size - 1).to(torch::kLong).argmax(1);  // (N) position of <copy>
  if (noise_token < 0) return copy_at;
  auto before_copy = torch::arange(inputs.size(1), inputs.options()).unsqueeze(0).lt(copy_at.unsqueeze(1));  // (N, T)
  return before_copy.logical_and(inputs.ne(noise_token)).sum(1);  // (N) content tokens before <copy>
}

torch::Tensor predict_tokens(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t M = model->member_count();
  auto x = inputs.unsqueeze(0).expand({M, inputs.size(0), inputs.size(1)});  // (M, N, T)
  auto tokens = model_logits(model, x, attention_out).argmax(-1);             // (M, N, T)
  if (was_training) model->train();
  return tokens;
}

}  // namespace copytask
