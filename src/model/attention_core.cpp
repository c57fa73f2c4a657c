#include "model/attention_core.h"

#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>
#include <torch/autograd.h>

namespace copytask {

AttentionOutput attention_core_matmul(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                      const torch::Tensor& offset, const torch::Tensor& dropout) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  auto scores = torch::matmul(q, k.transpose(-1, -2)) * scale;  // (M, B, H, T, T)
  if (offset.defined()) scores = scores + offset;
  auto weights = torch::softmax(scores, -1);                     // (M, B, H, T, T)
  auto kept = dropout.defined() ? weights * dropout : weights;
  return {torch::matmul(kept, v), weights.detach()};             // (M, B, H, T, Dh)
}

namespace {

// The inputs that take no gradient. Passed as one plain struct, not as tensors: LibTorch
// 1.13's custom functions reject undefined tensor arguments, and these may be undefined.
struct Constants {
  torch::Tensor offset, dropout;
};

class AttentionCoreCpu : public torch::autograd::Function<AttentionCoreCpu> {
 public:
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, torch::Tensor q,
                                                torch::Tensor k, torch::Tensor v, Constants constants) {
    torch::Tensor offset = constants.offset, dropout = constants.dropout;
    q = q.contiguous();
    k = k.contiguous();
    v = v.contiguous();
    const int64_t M = q.size(0), B = q.size(1), H = q.size(2), T = q.size(3), Dh = q.size(4);
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
    if (offset.defined()) offset = offset.expand({M, 1, H, T, T}).contiguous();
    if (dropout.defined()) dropout = dropout.contiguous();
    auto weights = torch::empty({M, B, H, T, T}, q.options());  // softmax, before dropout
    auto mixed = torch::empty({M, B, H, T, Dh}, q.options());
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
    const float* op = offset.defined() ? offset.data_ptr<float>() : nullptr;
    const float* dp = dropout.defined() ? dropout.data_ptr<float>() : nullptr;
    float *wp = weights.data_ptr<float>(), *mp = mixed.data_ptr<float>();

    at::parallel_for(0, M * B * H, 64, [&](int64_t begin, int64_t end) {
      std::vector<float> kept(T);
      for (int64_t r = begin; r < end; ++r) {
        const int64_t m = r / (B * H), h = r % H;
        const float* q_r = qp + r * T * Dh;
        const float* k_r = kp + r * T * Dh;
        const float* v_r = vp + r * T * Dh;
        const float* o_r = op ? op + (m * H + h) * T * T : nullptr;
        const float* d_r = dp ? dp + r * T * T : nullptr;
        float* w_r = wp + r * T * T;
        float* out_r = mp + r * T * Dh;
        for (int64_t i = 0; i < T; ++i) {
          float* w_i = w_r + i * T;
          float row_max = -std::numeric_limits<float>::infinity();
          for (int64_t j = 0; j < T; ++j) {
            float s = 0;
            for (int64_t d = 0; d < Dh; ++d) s += q_r[i * Dh + d] * k_r[j * Dh + d];
            s = s * scale + (o_r ? o_r[i * T + j] : 0.0f);
            w_i[j] = s;
            row_max = std::max(row_max, s);
          }
          float total = 0;
          for (int64_t j = 0; j < T; ++j) {
            w_i[j] = std::exp(w_i[j] - row_max);
            total += w_i[j];
          }
          for (int64_t j = 0; j < T; ++j) {
            w_i[j] /= total;
            kept[j] = d_r ? w_i[j] * d_r[i * T + j] : w_i[j];
          }
          float* out_i = out_r + i * Dh;
          for (int64_t d = 0; d < Dh; ++d) out_i[d] = 0;
          for (int64_t j = 0; j < T; ++j)
            for (int64_t d = 0; d < Dh; ++d) out_i[d] += kept[j] * v_r[j * Dh + d];
        }
      }
    });
    ctx->save_for_backward({q, k, v, weights});
    ctx->saved_data["dropout"] = dropout;  // may be undefined
    ctx->mark_non_differentiable({weights});
    return {mixed, weights};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &weights = saved[3];
    const torch::Tensor dropout = ctx->saved_data["dropout"].toTensor();
    const torch::Tensor grad_mixed = grads[0].contiguous();
    const int64_t M = q.size(0), B = q.size(1), H = q.size(2), T = q.size(3), Dh = q.size(4);
    const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
    auto grad_q = torch::empty_like(q), grad_k = torch::zeros_like(k), grad_v = torch::zeros_like(v);
    const float *qp = q.data_ptr<float>(), *kp = k.data_ptr<float>(), *vp = v.data_ptr<float>();
    const float *wp = weights.data_ptr<float>(), *gp = grad_mixed.data_ptr<float>();
    const float* dp = dropout.defined() ? dropout.data_ptr<float>() : nullptr;
    float *gqp = grad_q.data_ptr<float>(), *gkp = grad_k.data_ptr<float>(), *gvp = grad_v.data_ptr<float>();

    at::parallel_for(0, M * B * H, 64, [&](int64_t begin, int64_t end) {
      std::vector<float> grad_weights(T);
      for (int64_t r = begin; r < end; ++r) {
        const float *q_r = qp + r * T * Dh, *k_r = kp + r * T * Dh, *v_r = vp + r * T * Dh;
        const float *w_r = wp + r * T * T, *g_r = gp + r * T * Dh;
        const float* d_r = dp ? dp + r * T * T : nullptr;
        float *gq_r = gqp + r * T * Dh, *gk_r = gkp + r * T * Dh, *gv_r = gvp + r * T * Dh;
        for (int64_t i = 0; i < T; ++i) {
          const float* w_i = w_r + i * T;
          const float* g_i = g_r + i * Dh;
          // d(kept)[j] = g_i . v_j; d(weights) = d(kept) * dropout; dv_j += kept[j] g_i.
          float weighted = 0;  // sum_j w_ij d(weights)_ij, for the softmax backward
          for (int64_t j = 0; j < T; ++j) {
            const float drop = d_r ? d_r[i * T + j] : 1.0f;
            float dot = 0;
            for (int64_t d = 0; d < Dh; ++d) dot += g_i[d] * v_r[j * Dh + d];
            grad_weights[j] = dot * drop;
            weighted += w_i[j] * grad_weights[j];
            const float kept = w_i[j] * drop;
            for (int64_t d = 0; d < Dh; ++d) gv_r[j * Dh + d] += kept * g_i[d];
          }
          // d(scores)_ij = w_ij (d(weights)_ij - weighted); dq_i = scale sum_j ds_ij k_j; dk_j += scale ds_ij q_i.
          float* gq_i = gq_r + i * Dh;
          for (int64_t d = 0; d < Dh; ++d) gq_i[d] = 0;
          for (int64_t j = 0; j < T; ++j) {
            const float grad_score = w_i[j] * (grad_weights[j] - weighted) * scale;
            if (grad_score == 0.0f) continue;  // masked positions and exact zeros
            for (int64_t d = 0; d < Dh; ++d) {
              gq_i[d] += grad_score * k_r[j * Dh + d];
              gk_r[j * Dh + d] += grad_score * q_r[i * Dh + d];
            }
          }
        }
      }
    });
    return {grad_q, grad_k, grad_v, torch::Tensor()};
  }
};

}  // namespace

AttentionOutput attention_core_cpu(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                                   const torch::Tensor& offset, const torch::Tensor& dropout) {
  TORCH_CHECK(q.device().is_cpu() && q.scalar_type() == torch::kFloat32, "attention_core_cpu: float32 CPU tensors");
  auto outputs = AttentionCoreCpu::apply(q, k, v, Constants{offset, dropout});
  return {outputs[0], outputs[1].detach()};
}

}  // namespace copytask
