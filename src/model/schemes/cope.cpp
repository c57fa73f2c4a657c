// cope (Golovneva et al. 2024, "Contextual Position Encoding"): positions counted by the
// content. Per block l and head h, for query i and a key j it sees:
//   g_it = sigmoid(S_it)                      S = q.k / sqrt(Dh) of this head, before any bias
//   p_ij = sum_{t=j..i} g_it      (j <= i)    the keys from j to the query that "count"
//        = sum_{t=i..j} g_it      (j > i)     bidirectional: the same, on the right
//   P = min(p_ij, n - 1), f = floor(P), c = ceil(P), w = P - f
//   C_ij = (1 - w) q_i . E[f] + w q_i . E[c],  E = E_left_l (j <= i) or E_right_l (j > i)
// added to the logits (q_i . E unscaled, as CoPE's code). The published form is causal (the
// gates of unseen keys are never summed). The bidirectional form here counts over the span
// between i and j on either side, with an embedding of its own for keys to the right
// (docs/schemes.md). n = model.cope_positions (0 = task.context); the embeddings are shared
// by the heads and start at zero (CoPE's code). floor and ceil are constants for the
// gradient, as autograd has them.
// Parameters: left_embedding (L, n, Dh), and right_embedding (L, n, Dh) when bidirectional.
#include <cmath>

#include <torch/torch.h>

#include "model/cpu_layers.h"
#include "model/hooks/content_score.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace cpu {
namespace {

class CpuCope : public CpuHook {
 public:
  CpuCope(const CpuHookMaking& making, int64_t rows)
      : s_(*making.shape), n_(rows), table_(making.table), causal_(making.causal), wants_grad_(making.wants_grad) {
    sides_ = causal_ ? 1 : 2;
  }
  // Per block: the gates (H, T, T), the counts p (H, T, T), q_i . E[k] per side (H, T, sides, n);
  // then the backward's d(counts) (T), d(q . E) (sides, n).
  int64_t workspace_floats() const override {
    return s_.L * block_floats() + s_.T + sides_ * n_;
  }
  int64_t grad_floats() const override { return wants_grad_ ? sides_ * s_.L * n_ * s_.Dh : 0; }
  bool stages_attention() const override { return true; }

  void scores_forward(const HookExample& e, int64_t l, const ScoresSite& site) const override { forward(e, l, site); }
  void scores_backward(const HookExample& e, int64_t l, const ScoresSite& site, const ScoresGrad& grad) const override {
    backward(e, l, site, grad);
  }

 private:
  int64_t block_floats() const { return 2 * s_.H * s_.T * s_.T + s_.H * s_.T * sides_ * n_; }
  // Block l's embedding of a side (0 left, 1 right): (n, Dh).
  const float* embedding(int64_t side, int64_t l) const { return table_ + (side * s_.L + l) * n_ * s_.Dh; }

  void forward(const HookExample& e, int64_t l, const ScoresSite& site) const {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, H = s_.H, Dh = s_.Dh, D = s_.D;
      float* gates = e.work + l * block_floats();
      float* counts = gates + H * T * T;
      float* dots = counts + H * T * T;  // (H, T, sides, n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t seen = causal_ ? i + 1 : T;
          const float* s_i = site.scores + (h * T + i) * T;
          float* g_i = gates + (h * T + i) * T;
          float* p_i = counts + (h * T + i) * T;
          for (int64_t t = 0; t < seen; ++t) g_i[t] = 1.0f / (1.0f + std::exp(-s_i[t]));
          float total = 0;
          for (int64_t j = i; j >= 0; --j) p_i[j] = total += g_i[j];  // keys at or left of the query
          total = 0;
          for (int64_t j = i; j < seen; ++j) {                          // right of it (bidirectional)
            total += g_i[j];
            if (j > i) p_i[j] = total;
          }
          const float* q_i = site.qkv + i * 3 * D + h * Dh;
          float* z_i = dots + (h * T + i) * sides_ * n_;
          for (int64_t side = 0; side < sides_; ++side)
            for (int64_t k = 0; k < n_; ++k) {
              const float* e_k = embedding(side, l) + k * Dh;
              float dot = 0;
              for (int64_t d = 0; d < Dh; ++d) dot += q_i[d] * e_k[d];
              z_i[side * n_ + k] = dot;
            }
          float* logits_i = site.logits + (h * T + i) * T;
          for (int64_t j = 0; j < seen; ++j) {
            const float* z = z_i + (j > i ? n_ : 0);
            const float p = std::min(p_i[j], static_cast<float>(n_ - 1));
            const float f = std::floor(p), c = std::ceil(p), w = p - f;
            logits_i[j] += (1 - w) * z[static_cast<int64_t>(f)] + w * z[static_cast<int64_t>(c)];
          }
        }
    });
  }

  void backward(const HookExample& e, int64_t l, const ScoresSite& site, const ScoresGrad& grad) const {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, H = s_.H, Dh = s_.Dh, D = s_.D;
      const float* gates = e.work + l * block_floats();
      const float* counts = gates + H * T * T;
      const float* dots = counts + H * T * T;
      float* d_counts = e.work + s_.L * block_floats();  // (T)
      float* d_dots = d_counts + T;                       // (sides, n)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < T; ++i) {
          const int64_t seen = causal_ ? i + 1 : T;
          const float* g_i = gates + (h * T + i) * T;
          const float* p_i = counts + (h * T + i) * T;
          const float* z_i = dots + (h * T + i) * sides_ * n_;
          const float* dl_i = grad.grad_logits + (h * T + i) * T;
          for (int64_t k = 0; k < sides_ * n_; ++k) d_dots[k] = 0.0f;
          // Through the interpolation: to q . E[f], q . E[c], and to the count.
          for (int64_t j = 0; j < seen; ++j) {
            const int64_t side = j > i ? 1 : 0;
            const float* z = z_i + side * n_;
            const bool clamped = p_i[j] > static_cast<float>(n_ - 1);
            const float p = clamped ? static_cast<float>(n_ - 1) : p_i[j];
            const float f = std::floor(p), c = std::ceil(p), w = p - f;
            const int64_t fi = static_cast<int64_t>(f), ci = static_cast<int64_t>(c);
            d_dots[side * n_ + fi] += (1 - w) * dl_i[j];
            d_dots[side * n_ + ci] += w * dl_i[j];
            d_counts[j] = clamped ? 0.0f : dl_i[j] * (z[ci] - z[fi]);
          }
          // q . E: to q_i and to the embeddings.
          const float* q_i = site.qkv + i * 3 * D + h * Dh;
          float* gq_i = grad.grad_qkv + i * 3 * D + h * Dh;
          for (int64_t side = 0; side < sides_; ++side)
            for (int64_t k = 0; k < n_; ++k) {
              const float dz = d_dots[side * n_ + k];
              if (dz == 0.0f) continue;
              const float* e_k = embedding(side, l) + k * Dh;
              for (int64_t d = 0; d < Dh; ++d) gq_i[d] += dz * e_k[d];
              if (e.grad) {
                float* ge_k = e.grad + ((side * s_.L + l) * n_ + k) * Dh;
                for (int64_t d = 0; d < Dh; ++d) ge_k[d] += dz * q_i[d];
              }
            }
          // The counts are sums of gates: gate t gets the counts that include it, then
          // sigmoid's derivative on to the score.
          float* gs_i = grad.grad_scores + (h * T + i) * T;
          float running = 0;
          for (int64_t t = 0; t <= i; ++t) {  // left: p_ij for j <= t <= i
            running += d_counts[t];
            gs_i[t] += running * g_i[t] * (1 - g_i[t]);
          }
          running = 0;
          for (int64_t t = seen - 1; t > i; --t) {  // right: p_ij for i <= t <= j, j > i
            running += d_counts[t];
            gs_i[t] += running * g_i[t] * (1 - g_i[t]);
          }
          if (seen > i + 1) gs_i[i] += running * g_i[i] * (1 - g_i[i]);  // the query's own gate, in every right count
        }
    });
  }

  Shape s_;
  int64_t n_, sides_;
  const float* table_;
  bool causal_, wants_grad_;
};

}  // namespace
}  // namespace cpu

namespace {

class Cope : public PositionalScheme, public ContentScore {
 public:
  Cope(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), rows_(options.cope_positions > 0 ? options.cope_positions : shape.positions) {
    left_ = register_parameter("left_embedding", torch::zeros({shape.blocks, rows_, shape.head_dim()}));
    if (!shape.causal)
      right_ = register_parameter("right_embedding", torch::zeros({shape.blocks, rows_, shape.head_dim()}));
  }
  const Hook* hook() const override { return &content_hook(); }
  torch::Tensor table(int64_t) override { return content_table(*this); }
  const ContentScore* content_score() const override { return this; }

  torch::Tensor term(const ContentInputs& in, const torch::Tensor& table) const override {
    auto p = content_pieces(const_cast<Cope&>(*this), table);  // left (L, n, Dh)[, right]
    const int64_t l = in.block, T = in.scores.size(-1);
    auto options = in.scores.options();
    auto left = torch::ones({T, T}, options.dtype(torch::kBool)).tril();  // (T, T) j <= i
    auto right = left.logical_not();                                      // (T, T) j > i
    // The gates of the keys the query sees.
    auto gates = torch::sigmoid(in.scores);                                                          // (B, H, T, T)
    if (in.causal) gates = gates * left;
    auto at_or_left = (gates * left).flip(-1).cumsum(-1).flip(-1);                 // sum_{t >= j, t <= i} g_it
    auto at_or_right = (gates * torch::ones({T, T}, options.dtype(torch::kBool)).triu()).cumsum(-1);  // sum_{i <= t <= j}
    auto count = torch::where(left, at_or_left, at_or_right).clamp_max(static_cast<double>(rows_ - 1));  // (B, H, T, T)
    auto floor = count.floor().detach(), ceil = count.ceil().detach();
    auto w = count - floor;
    auto dots_left = torch::matmul(in.q, p[0][l].t());                                  // (B, H, T, n)
    auto dots_right = p.size() > 1 ? torch::matmul(in.q, p[1][l].t()) : dots_left;       // (B, H, T, n)
    auto at = [&](const torch::Tensor& index) {
      auto i = index.to(torch::kLong);
      return torch::where(left, dots_left.gather(-1, i), dots_right.gather(-1, i));  // (B, H, T, T)
    };
    return (1 - w) * at(floor) + w * at(ceil);
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuCope>(making, rows_);
  }
  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    // The norm of each block's embedding rows: which counts the model learned to use.
    std::vector<std::pair<std::string, std::vector<double>>> out{
        {"left_embedding_norms", host_values(left_.norm(2, -1))}};  // (L, n)
    if (right_.defined()) out.emplace_back("right_embedding_norms", host_values(right_.norm(2, -1)));
    return out;
  }

 private:
  int64_t rows_;
  torch::Tensor left_, right_;
};

}  // namespace

SchemeEntry cope_scheme() {
  return {"cope", "CoPE: positions counted by sigmoid gates of q.k, a learned embedding per count (model.cope_positions)",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Cope>(options, shape);
          },
          kEveryStep,
          // the gates, counts, floor, ceil, weights and both gathers (B, H, T, T), the dots (B, H, T, n) x 2
          [](const ModelConfig& model, double T) {
            const double n = model.positional_options.cope_positions > 0 ? model.positional_options.cope_positions : T;
            return static_cast<double>(model.blocks * model.heads) * T * (10 * T + 2 * n);
          }};
}

}  // namespace copytask
