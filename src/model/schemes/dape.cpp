// dape (option model.dape; Zheng et al. 2024, "DAPE: Data-Adaptive Positional Encoding for
// Length Extrapolation"): on a score-bias scheme, each block adds to its logits a small MLP
// across heads of the scores and the bias, per (query i, key j):
//   u      = [S_ij^(0..H-1), B_ij^(0..H-1)]                     (2H)  S = q.k / sqrt(Dh), B the bias
//   hidden = leaky_relu(u W1_l + b1_l, 0.01)                    (W)   W = model.dape_hidden
//   C_ij^h = (hidden W2_l + b2_l)_h
// so the logits are S + B + C: the bias adapts to the content. The content hook carries it
// (after the score bias, which it reads); its gradient reaches the bias's parameters too.
// Parameters (positional.dape.*): weight1 (L, 2H, W), bias1 (L, W), weight2 (L, W, H),
// bias2 (L, H), starting as nn.Linear. Refused with a scheme that has no score bias.
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

// The MLP of one block on the fused CPU step. Its parameters sit in the content table in
// the order weight1, bias1, weight2, bias2, each with its leading block axis.
class CpuDape : public CpuHook {
 public:
  CpuDape(const CpuHookMaking& making, int64_t width)
      : s_(*making.shape), W_(width), table_(making.table), causal_(making.causal), wants_grad_(making.wants_grad) {
    const int64_t H = s_.H, L = s_.L;
    b1_ = L * 2 * H * W_;
    w2_ = b1_ + L * W_;
    b2_ = w2_ + L * W_ * H;
    size_ = b2_ + L * H;
  }
  // Each block's hidden pre-activations (T, T, W), then u (2H), d(hidden) (W), d(u) (2H).
  int64_t workspace_floats() const override { return s_.L * s_.T * s_.T * W_ + 4 * s_.H + W_; }
  int64_t grad_floats() const override { return wants_grad_ ? size_ : 0; }
  bool stages_attention() const override { return true; }

  void scores_forward(const HookExample& e, int64_t l, const ScoresSite& site) const override {
    forward(e, l, site);
  }
  void scores_backward(const HookExample& e, int64_t l, const ScoresSite& site, const ScoresGrad& grad) const override {
    backward(e, l, site, grad);
  }

 private:
  void forward(const HookExample& e, int64_t l, const ScoresSite& site) const {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, H = s_.H, W = W_;
      const float *w1 = table_ + l * 2 * H * W, *b1 = table_ + b1_ + l * W;
      const float *w2 = table_ + w2_ + l * W * H, *b2 = table_ + b2_ + l * H;
      float* u = e.work + s_.L * T * T * W;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t seen = causal_ ? i + 1 : T;
        for (int64_t j = 0; j < seen; ++j) {
          for (int64_t h = 0; h < H; ++h) {
            u[h] = site.scores[(h * T + i) * T + j];
            u[H + h] = site.bias ? site.bias[(h * T + i) * T + j] : 0.0f;
          }
          float* pre = e.work + ((l * T + i) * T + j) * W;
          for (int64_t w = 0; w < W; ++w) pre[w] = b1[w];
          for (int64_t k = 0; k < 2 * H; ++k)
            for (int64_t w = 0; w < W; ++w) pre[w] += u[k] * w1[k * W + w];
          for (int64_t h = 0; h < H; ++h) {
            float out = b2[h];
            for (int64_t w = 0; w < W; ++w) out += (pre[w] > 0.0f ? pre[w] : 0.01f * pre[w]) * w2[w * H + h];
            site.logits[(h * T + i) * T + j] += out;
          }
        }
      }
    });
  }

  void backward(const HookExample& e, int64_t l, const ScoresSite& site, const ScoresGrad& grad) const {
    on_cpu_variant([&](auto) COPYTASK_KERNEL_BODY {
      const int64_t T = s_.T, H = s_.H, W = W_;
      const float *w1 = table_ + l * 2 * H * W, *w2 = table_ + w2_ + l * W * H;
      float* g = e.grad;  // the table's gradient, or null
      float* u = e.work + s_.L * T * T * W;
      float* d_hidden = u + 2 * H;
      float* d_u = d_hidden + W;
      for (int64_t i = 0; i < T; ++i) {
        const int64_t seen = causal_ ? i + 1 : T;
        for (int64_t j = 0; j < seen; ++j) {
          for (int64_t h = 0; h < H; ++h) {
            u[h] = site.scores[(h * T + i) * T + j];
            u[H + h] = site.bias ? site.bias[(h * T + i) * T + j] : 0.0f;
          }
          const float* pre = e.work + ((l * T + i) * T + j) * W;
          for (int64_t w = 0; w < W; ++w) d_hidden[w] = 0.0f;
          for (int64_t h = 0; h < H; ++h) {
            const float g_h = grad.grad_logits[(h * T + i) * T + j];
            if (g) g[b2_ + l * H + h] += g_h;
            for (int64_t w = 0; w < W; ++w) {
              d_hidden[w] += w2[w * H + h] * g_h;
              if (g) g[w2_ + (l * W + w) * H + h] += (pre[w] > 0.0f ? pre[w] : 0.01f * pre[w]) * g_h;
            }
          }
          for (int64_t w = 0; w < W; ++w) d_hidden[w] *= pre[w] > 0.0f ? 1.0f : 0.01f;  // now d(pre)
          for (int64_t k = 0; k < 2 * H; ++k) {
            float sum = 0;
            for (int64_t w = 0; w < W; ++w) {
              sum += w1[k * W + w] * d_hidden[w];
              if (g) g[(l * 2 * H + k) * W + w] += u[k] * d_hidden[w];
            }
            d_u[k] = sum;
          }
          if (g)
            for (int64_t w = 0; w < W; ++w) g[b1_ + l * W + w] += d_hidden[w];
          for (int64_t h = 0; h < H; ++h) {
            grad.grad_scores[(h * T + i) * T + j] += d_u[h];
            if (grad.grad_bias) grad.grad_bias[(h * T + i) * T + j] += d_u[H + h];
          }
        }
      }
    });
  }

  Shape s_;
  int64_t W_;
  const float* table_;
  bool causal_, wants_grad_;
  int64_t b1_, w2_, b2_, size_;  // offsets of bias1, weight2, bias2 in the table; its floats
};

}  // namespace
}  // namespace cpu

namespace {

class Dape : public PositionalScheme, public ContentScore {
 public:
  Dape(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), width_(options.dape_hidden) {
    const int64_t L = shape.blocks, H = shape.heads, W = width_;
    weight1_ = register_parameter("weight1", torch::zeros({L, 2 * H, W}));
    bias1_ = register_parameter("bias1", torch::zeros({L, W}));
    weight2_ = register_parameter("weight2", torch::zeros({L, W, H}));
    bias2_ = register_parameter("bias2", torch::zeros({L, H}));
  }
  const Hook* hook() const override { return &content_hook(); }
  torch::Tensor table(int64_t) override { return content_table(*this); }
  const ContentScore* content_score() const override { return this; }
  void init(const torch::Tensor&, at::Generator& generator) override {
    for (int64_t l = 0; l < shape_.blocks; ++l) {
      auto w1 = weight1_[l], b1 = bias1_[l], w2 = weight2_[l], b2 = bias2_[l];
      linear_init(w1, b1, generator);
      linear_init(w2, b2, generator);
    }
  }

  torch::Tensor term(const ContentInputs& in, const torch::Tensor& table) const override {
    auto p = content_pieces(const_cast<Dape&>(*this), table);  // weight1, bias1, weight2, bias2
    const int64_t l = in.block;
    auto bias = in.bias.defined() ? in.bias.expand_as(in.scores) : torch::zeros_like(in.scores);  // (B, H, T, T)
    auto u = torch::cat({in.scores, bias}, 1).permute({0, 2, 3, 1});                           // (B, T, T, 2H)
    auto hidden = torch::leaky_relu(torch::matmul(u, p[0][l]) + p[1][l], 0.01);                 // (B, T, T, W)
    return (torch::matmul(hidden, p[2][l]) + p[3][l]).permute({0, 3, 1, 2});                   // (B, H, T, T)
  }
  std::unique_ptr<cpu::CpuHook> cpu(const CpuHookMaking& making) const override {
    return std::make_unique<cpu::CpuDape>(making, width_);
  }

 private:
  int64_t width_;
  torch::Tensor weight1_, bias1_, weight2_, bias2_;
};

// The schemes whose positional has a score bias, in the registry's order.
std::string score_bias_schemes() {
  std::string out;
  for (const auto& entry : positional_registry()) {
    auto scheme = entry.make(PositionalOptions{}, PositionalShape{});
    if (scheme->owner_of(score_bias_hook())) out += (out.empty() ? "" : ", ") + entry.name;
  }
  return out;
}

}  // namespace

OptionEntry dape_option() {
  return {"dape", "DAPE: each block adds an MLP of [scores; bias] across heads to its scores (model.dape_hidden)",
          [](const PositionalOptions& options) { return options.dape; },
          [](const ModelConfig& model) {
            PositionalOptions plain = model.positional_options;
            plain.dape = plain.length_scale = false;
            const PositionalShape shape{10, model.embed, model.heads, model.blocks, model.causal};
            auto scheme = positional_scheme_make(model.positional, plain, shape);
            if (scheme->owner_of(score_bias_hook())) return std::string();
            return "DAPE adapts a score bias, and model.positional = " + model.positional +
                   " has none; use it with a score-bias scheme (" + score_bias_schemes() + "), or set model.dape=false";
          },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<Dape>(options, shape);
          },
          kEveryStep,
          // the MLP's input (B, T, T, 2H), its hidden layer before and after the activation (B, T, T, W) and output
          [](const ModelConfig& model, double T) {
            return static_cast<double>(model.blocks) * T * T *
                   static_cast<double>(3 * model.heads + 2 * model.positional_options.dape_hidden);
          }};
}

}  // namespace copytask
