#include "train/evaluate.h"

#include <cmath>
#include <limits>

#include <torch/torch.h>

#include "model/fused_cpu.h"
#include "report/results.h"

namespace copytask {

torch::Tensor model_logits(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out,
                           int64_t first) {
  torch::NoGradGuard no_grad;
  const int64_t T = inputs.size(2);
  const torch::Tensor positions = model->evaluation_positions(first, inputs.size(1), T);  // (M, N, T) or undefined
  if (fused_cpu_unsupported(*model).empty())
    return fused_cpu_forward(*model, model->positional_tables(model->table_positions(T)), inputs, attention_out, positions);
  return model->forward(inputs, nullptr, attention_out, positions);
}

std::vector<SplitScores> evaluate_split(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                        int64_t chunk) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t M = model->member_count(), N = inputs.size(0), T = inputs.size(1);
  auto options = torch::TensorOptions().dtype(torch::kFloat64).device(inputs.device());
  auto loss_sum = torch::zeros({M}, options), exact_sum = torch::zeros({M}, options),
       token_sum = torch::zeros({M}, options);
  auto lengths = content_lengths(inputs, model->shape().vocab);                 // (N)
  auto exact_by_length = torch::zeros({M, T + 1}, options);                     // (M, T+1)
  auto count_by_length = torch::zeros({T + 1}, options).index_add_(0, lengths, torch::ones({N}, options));
  for (int64_t start = 0; start < N; start += chunk) {
    const int64_t n = std::min(chunk, N - start);
    auto x = inputs.narrow(0, start, n).unsqueeze(0).expand({M, n, T});   // (M, n, T)
    auto y = targets.narrow(0, start, n).unsqueeze(0).expand({M, n, T});  // (M, n, T)
    auto logits = model_logits(model, x, nullptr, start);                 // (M, n, T, V)
    loss_sum += member_losses(logits, y).to(torch::kFloat64) * static_cast<double>(n);
    auto correct = logits.argmax(-1).eq(y);                               // (M, n, T)
    token_sum += correct.sum({1, 2}).to(torch::kFloat64);
    auto exact = correct.all(-1).to(torch::kFloat64);                       // (M, n)
    exact_sum += exact.sum(1);
    exact_by_length.index_add_(1, lengths.narrow(0, start, n), exact);
  }
  // One host transfer for the whole evaluation.
  auto totals = torch::stack({loss_sum, exact_sum, token_sum}).cpu();  // (3, M)
  auto by_length = torch::cat({exact_by_length, count_by_length.unsqueeze(0)}).cpu();  // (M+1, T+1)
  auto a = totals.accessor<double, 2>();
  auto l = by_length.accessor<double, 2>();
  std::vector<SplitScores> scores(M);
  for (int64_t m = 0; m < M; ++m) {
    scores[m].loss = a[0][m] / static_cast<double>(N);
    scores[m].exact = a[1][m] / static_cast<double>(N);
    scores[m].token = a[2][m] / static_cast<double>(N * T);
    for (int64_t k = 0; k <= T; ++k) scores[m].exact_by_length.push_back(l[M][k] > 0 ? l[m][k] / l[M][k] : -1.0);
  }
  if (was_training) model->train();
  return scores;
}

LengthData length_data_upload(const std::vector<LengthSet>& sets, const torch::Device& device) {
  LengthData data;
  for (const auto& set : sets) {
    const int64_t N = set.examples.count, T = set.context;
    data.lengths.push_back(set.length);
    data.contexts.push_back(T);
    data.trained.push_back(set.trained);
    data.inputs.push_back(torch::tensor(set.examples.inputs, torch::kLong).view({N, T}).to(device));    // (N, T)
    data.targets.push_back(torch::tensor(set.examples.targets, torch::kLong).view({N, T}).to(device));  // (N, T)
  }
  return data;
}

std::vector<std::vector<LengthScores>> evaluate_lengths(Encoder& model, const LengthData& data, int64_t chunk) {
  torch::NoGradGuard no_grad;
  const bool was_training = model->is_training();
  model->eval();
  const int64_t M = model->member_count();
  std::vector<std::vector<LengthScores>> scores(M);
  for (size_t i = 0; i < data.lengths.size(); ++i) {
    const int64_t k = data.lengths[i], T = data.contexts[i], N = data.inputs[i].size(0);
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
    auto exact_sum = torch::zeros({M}, options), token_sum = torch::zeros({M}, options);
    // Long contexts in smaller chunks: the attention weights (M, n, H, T, T) stay near 2^25 floats.
    const int64_t attention_per_example = M * model->shape().heads * T * T;
    const int64_t length_chunk = std::max<int64_t>(1, std::min<int64_t>(chunk, (int64_t{1} << 25) / attention_per_example));
    for (int64_t start = 0; start < N; start += length_chunk) {
      const int64_t n = std::min(length_chunk, N - start);
      auto x = data.inputs[i].narrow(0, start, n).unsqueeze(0).expand({M, n, T});           // (M, n, T)
      auto y = data.targets[i].narrow(0, start, n).narrow(1, copy_begin(k), k).unsqueeze(0);  // (1, n, k) the copy
      auto copied = model_logits(model, x, nullptr, start).narrow(2, copy_begin(k), k).argmax(-1);  // (M, n, k)
      auto correct = copied.eq(y);                                                            // (M, n, k)
      token_sum += correct.sum({1, 2}).to(torch::kFloat64);
      exact_sum += correct.all(-1).sum(1).to(torch::kFloat64);
    }
    auto totals = torch::stack({exact_sum, token_sum}).cpu();  // (2, M)
    auto a = totals.accessor<double, 2>();
    for (int64_t m = 0; m < M; ++m) {
      LengthScores one = base;
      one.exact = a[0][m] / static_cast<double>(N);
      one.token = a[1][m] / static_cast<double>(N * k);
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
  one.trained_context = trained_context;
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

torch::Tensor content_lengths(const torch::Tensor& inputs, int64_t vocab_size) {
  return inputs.eq(vocab_size - 1).to(torch::kLong).argmax(1);  // (N) position of <copy>
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
