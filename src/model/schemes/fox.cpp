// fox (Lin et al. 2025, "Forgetting Transformer"; x-transformers' data-dependent ALiBi):
// the scores decay by forget gates computed from the tokens in between. Per block l and head
// h, from the attention's input a = ln1(x) (T, D):
//   f_left[t, h]  = ln sigmoid(a_t . W_l[:, h] + b_l[h])
//   f_right[t, h] = ln sigmoid(a_t . W_l[:, H + h] + b_l[H + h])      (bidirectional only)
//   C_ij = sum_{t=j+1..i} f_left[t, h]       (j <= i; 0 at j = i)
//        = sum_{t=i..j-1} f_right[t, h]      (j > i)
// added to the logits. The published form is causal (the left sums); the right sums are its
// mirror image (reversing the sequence and swapping the two gates' parameters mirrors C),
// with gates of their own. Each term is <= 0: a key is forgotten as far as the gates of the
// tokens between it and the query say. Like ALiBi, but the slope is read off the content.
// Parameters: gate_weight (L, D, sides H), gate_bias (L, sides H), sides = 1 causal, 2
// otherwise; the weight starts as nn.Linear, the bias at 5 (sigmoid(5) = 0.993: forget
// slowly; x-transformers' default).
#include <cmath>

#include <ATen/core/Generator.h>
#include <torch/torch.h>

#include "model/cpu_layers.h"
#include "model/hooks/content_score.h"
#include "model/hooks/registry.h"
#include "model/positional.h"
#include "model/schemes/scheme_util.h"

namespace copytask {
namespace cpu {
namespace {

class CpuFox : public CpuHook {
 public:
  explicit CpuFox(const CpuHookMaking& making)
      : s_(*making.shape), table_(making.table), causal_(making.causal), wants_grad_(making.wants_grad) {
    G_ = (causal_ ? 1 : 2) * s_.H;
  }
  // Per block the gates' sigmoids and their logs (T, G) each; then the running sums (T),
  // their gradient (T) and the gates' pre-activations' gradient (T, G).
  int64_t workspace_floats() const override { return 2 * s_.L * s_.T * G_ + 2 * s_.T + s_.T * G_; }
  int64_t grad_floats() const override { return wants_grad_ ? s_.L * (s_.D + 1) * G_ : 0; }
  bool stages_attention() const override { return true; }

  void scores_forward(const HookExample& e, int64_t l, const ScoresSite& site) const override { forward(e, l, site); }
  void scores_backward(const HookExample& e, int64_t l, const ScoresSite& site, const ScoresGrad& grad) const override {
    backward(e, l, site, grad);
  }

 private:
  const float* weight(int64_t l) const { return table_ + l * s_.D * G_; }                 // (D, G)
  const float* bias(int64_t l) const { return table_ + s_.L * s_.D * G_ + l * G_; }       // (G)

  void forward(const HookExample& e, int64_t l, const ScoresSite& site) const {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, D = s_.D, H = s_.H, G = G_;
      float* sig = e.work + l * T * G;
      float* log_sig = e.work + (s_.L + l) * T * G;
      float* sums = e.work + 2 * s_.L * T * G;  // (T)
      const float *w = weight(l), *b = bias(l);
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < G; ++k) {
          float z = b[k];
          for (int64_t d = 0; d < D; ++d) z += site.input[t * D + d] * w[d * G + k];
          sig[t * G + k] = 1.0f / (1.0f + std::exp(-z));
          log_sig[t * G + k] = std::min(z, 0.0f) - std::log1p(std::exp(-std::abs(z)));  // ln sigmoid(z), stable
        }
      for (int64_t h = 0; h < H; ++h) {
        // Left: inclusive running sums c_t of ln sigmoid; C_ij = c_i - c_j.
        float total = 0;
        for (int64_t t = 0; t < T; ++t) sums[t] = total += log_sig[t * G + h];
        for (int64_t i = 0; i < T; ++i) {
          float* logits_i = site.logits + (h * T + i) * T;
          for (int64_t j = 0; j <= i; ++j) logits_i[j] += sums[i] - sums[j];
        }
        if (causal_) continue;
        // Right: exclusive running sums r_t; C_ij = r_j - r_i.
        total = 0;
        for (int64_t t = 0; t < T; ++t) {
          sums[t] = total;
          total += log_sig[t * G + H + h];
        }
        for (int64_t i = 0; i < T; ++i) {
          float* logits_i = site.logits + (h * T + i) * T;
          for (int64_t j = i + 1; j < T; ++j) logits_i[j] += sums[j] - sums[i];
        }
      }
    });
  }

  void backward(const HookExample& e, int64_t l, const ScoresSite& site, const ScoresGrad& grad) const {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, D = s_.D, H = s_.H, G = G_;
      const float* sig = e.work + l * T * G;
      float* d_sums = e.work + 2 * s_.L * T * G + T;  // (T)
      float* d_pre = d_sums + T;                  // (T, G)
      for (int64_t side = 0; side < G / H; ++side)
        for (int64_t h = 0; h < H; ++h) {
          // The running sums' gradient from the logits they entered.
          for (int64_t t = 0; t < T; ++t) d_sums[t] = 0.0f;
          for (int64_t i = 0; i < T; ++i) {
            const float* g_i = grad.grad_logits + (h * T + i) * T;
            if (side == 0)
              for (int64_t j = 0; j <= i; ++j) {
                d_sums[i] += g_i[j];
                d_sums[j] -= g_i[j];
              }
            else
              for (int64_t j = i + 1; j < T; ++j) {
                d_sums[j] += g_i[j];
                d_sums[i] -= g_i[j];
              }
          }
          // Each ln sigmoid enters the sums from its own index on (left, inclusive) or after it
          // (right, exclusive); d ln sigmoid(z) / dz = 1 - sigmoid(z).
          const int64_t k = side * H + h;
          float running = 0;
          for (int64_t t = T - 1; t >= 0; --t) {
            if (side == 0) running += d_sums[t];
            d_pre[t * G + k] = running * (1.0f - sig[t * G + k]);
            if (side == 1) running += d_sums[t];
          }
        }
      // The gates' linear layer: to its weight and bias, and to the attention's input.
      const float* w = weight(l);
      for (int64_t t = 0; t < T; ++t) {
        const float* dz = d_pre + t * G;
        float* gx = grad.grad_input + t * D;
        for (int64_t d = 0; d < D; ++d) {
          float sum = 0;
          for (int64_t k = 0; k < G; ++k) sum += w[d * G + k] * dz[k];
          gx[d] += sum;
        }
        if (!e.grad) continue;
        float* gw = e.grad + l * D * G;
        float* gb = e.grad + s_.L * D * G + l * G;
        for (int64_t d = 0; d < D; ++d)
          for (int64_t k = 0; k < G; ++k) gw[d * G + k] += site.input[t * D + d] * dz[k];
        for (int64_t k = 0; k < G; ++k) gb[k] += dz[k];
      }
    });
  }

  Shape s_;
  int64_t G_;  // gates per position: H (causal) or 2H
  const float* table_;
  bool causal_, wants_grad_;
};

}  // namespace
}  // namespace cpu

namespace {

class Fox : public PositionalScheme, public ContentScore {
 public:
  explicit Fox(const PositionalShape& shape) : PositionalScheme(shape) {
    const int64_t gates = (shape.causal ? 1 : 2) * shape.heads;
    weight_ = register_parameter("gate_weight", torch::zeros({shape.blocks, shape.embed, gates}));  // (L, D, G)
    bias_ = register_parameter("gate_bias", torch::full({shape.blocks, gates}, 5.0));              // (L, G)
  }
  const Hook* hook() const override { return &content_hook(); }
  torch::Tensor table(int64_t) override { return content_table(*this); }
  const ContentScore* content_score() const override { return this; }
  void init(const torch::Tensor&, at::Generator& generator) override {
    torch::NoGradGuard no_grad;
    const double bound = 1.0 / std::sqrt(static_cast<double>(shape_.embed));
    weight_.uniform_(-bound, bound, generator);
  }

  torch::Tensor term(const ContentInputs& in, const torch::Tensor& table) const override {
    auto p = content_pieces(const_cast<Fox&>(*this), table);  // gate_weight (L, D, G), gate_bias (L, G)
    const int64_t l = in.block, H = in.scores.size(1), T = in.scores.size(-1);
    auto gates = torch::log_sigmoid(torch::matmul(in.input, p[0][l]) + p[1][l]).transpose(1, 2);  // (B, G, T)
    auto left = gates.narrow(1, 0, H).cumsum(-1);                                                  // (B, H, T) c_t
    auto term = left.unsqueeze(-1) - left.unsqueeze(-2);                                            // (B, H, T, T) c_i - c_j
    auto at_or_left = torch::ones({T, T}, in.scores.options().dtype(torch::kBool)).tril();          // (T, T) j <= i
    if (in.causal) return term * at_or_left;  // the keys on the right are masked: any finite value
    auto right_gates = gates.narrow(1, H, H);
    auto right = right_gates.cumsum(-1) - right_gates;                                              // (B, H, T) r_t exclusive
    return torch::where(at_or_left, term, right.unsqueeze(-2) - right.unsqueeze(-1));              // r_j - r_i on the right
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuFox>(making);
  }
  std::vector<std::pair<std::string, std::vector<double>>> reported_values() override {
    // sigmoid of each gate's bias: how much a token keeps when its input is zero.
    return {{"gate_bias_sigmoid", host_values(bias_.detach().sigmoid())}};
  }

 private:
  torch::Tensor weight_, bias_;
};

}  // namespace

SchemeEntry fox_scheme() {
  return {"fox", "forgetting gates: scores decay by ln sigmoid gates of the tokens in between (data-dependent ALiBi)",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions&, const PositionalShape& shape) { return std::make_shared<Fox>(shape); },
          kEveryStep,
          // the left and right differences and their selection (B, H, T, T)
          [](const ModelConfig& model, double T) { return 4.0 * static_cast<double>(model.blocks * model.heads) * T * T; }};
}

}  // namespace copytask
