#include "model/fused_cpu.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include <ATen/Parallel.h>

// The per-example kernel is compiled twice, for x86-64-v3 (AVX2 and FMA) and for the
// generic target, and the loader picks one for the CPU it runs on; the small helpers are
// inlined into each so they get the same instructions.
#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define COPYTASK_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define COPYTASK_CLONES
#endif
#define COPYTASK_INLINE inline __attribute__((always_inline))
// Vec8 values are passed only between always-inlined helpers of this file, so the
// warning that their ABI differs between the two targets does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace copytask {
namespace {

// ---- Parameters: one member's values and its flat gradient --------------------------------

// The parameters in a fixed order; a member's gradient is one flat buffer of P floats,
// parameter j at offset[j].
enum Global : int { kTok, kPos, kLnfW, kLnfB, kHeadW, kHeadB, kFirstBlock };
enum PerBlock : int { kLn1W, kLn1B, kQkv, kProjW, kProjB, kLn2W, kLn2B, kFc1W, kFc1B, kFc2W, kFc2B, kPerBlock };

struct ParameterTable {
  std::vector<torch::Tensor> tensors;  // (M, ...) each
  std::vector<const float*> base;      // data of member 0
  std::vector<int64_t> per_member;     // elements per member
  std::vector<int64_t> offset;         // start in a member's flat gradient
  int64_t total = 0;                   // P

  explicit ParameterTable(EncoderImpl& model) {
    tensors = {model.tok_emb, model.pos_emb, model.ln_f->weight, model.ln_f->bias, model.head->weight, model.head->bias};
    for (const auto& module : *model.blocks) {
      auto block = module->as<BlockImpl>();
      for (const torch::Tensor& t :
           {block->ln1->weight, block->ln1->bias, block->attn->qkv->weight, block->attn->proj->weight,
            block->attn->proj->bias, block->ln2->weight, block->ln2->bias, block->ff->fc1->weight, block->ff->fc1->bias,
            block->ff->fc2->weight, block->ff->fc2->bias})
        tensors.push_back(t);
    }
    for (const auto& t : tensors) {
      TORCH_CHECK(t.is_contiguous(), "fused_cpu: parameters must be contiguous");
      base.push_back(t.data_ptr<float>());
      per_member.push_back(t.numel() / t.size(0));
      offset.push_back(total);
      total += per_member.back();
    }
  }
  const float* value(int j, int64_t m) const { return base[j] + m * per_member[j]; }
};

inline int block_index(int64_t block, int which) { return kFirstBlock + static_cast<int>(block) * kPerBlock + which; }

// ---- Small dense kernels over one example (row-major, (in, out) weights) -----------------

// Eight floats, loaded and stored unaligned: the vector type of the small matrix
// products below (one AVX register in the x86-64-v3 clone, two SSE registers otherwise).
typedef float Vec8 __attribute__((vector_size(32)));
COPYTASK_INLINE Vec8 load8(const float* p) {
  Vec8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// Rows r < R of C (R x O, row-major) = (or +=, or = bias +) sum over k < K of
// A[r * a_row + k * a_red] * Bm[k * O .. k * O + O). The R accumulators of one 8-column
// block stay in registers over the whole sum. Bm is read 8 columns at a time, so up to 7
// floats past its end: every Bm carries that slack (kSlack).
template <int R>
COPYTASK_INLINE void matmul_rows(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                 float* C, int64_t K, int64_t O, bool accumulate) {
  for (int64_t o = 0; o < O; o += 8) {
    const int64_t width = std::min<int64_t>(8, O - o);
    Vec8 acc[R];
    for (int r = 0; r < R; ++r) {
      acc[r] = Vec8{};
      if (width == 8) {
        if (accumulate) acc[r] = load8(C + r * O + o);
        else if (bias) acc[r] = load8(bias + o);
      } else {
        for (int64_t l = 0; l < width; ++l) acc[r][l] = accumulate ? C[r * O + o + l] : (bias ? bias[o + l] : 0.0f);
      }
    }
    for (int64_t k = 0; k < K; ++k) {
      const Vec8 b = load8(Bm + k * O + o);
      for (int r = 0; r < R; ++r) acc[r] += A[r * a_row + k * a_red] * b;
    }
    for (int r = 0; r < R; ++r) {
      if (width == 8) __builtin_memcpy(C + r * O + o, &acc[r], sizeof(Vec8));
      else
        for (int64_t l = 0; l < width; ++l) C[r * O + o + l] = acc[r][l];
    }
  }
}

// All `rows` rows, four at a time.
COPYTASK_INLINE void matmul(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias, float* C,
                            int64_t rows, int64_t K, int64_t O, bool accumulate) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4) matmul_rows<4>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate);
  switch (rows - r) {
    case 3: matmul_rows<3>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    case 2: matmul_rows<2>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    case 1: matmul_rows<1>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    default: break;
  }
}

constexpr int64_t kSlack = 8;  // floats after every matmul right-hand side (see matmul_rows)

// out (T, O) = in (T, I) @ w (I, O) + bias (O); bias may be null.
COPYTASK_INLINE void linear_forward(const float* in, const float* w, const float* bias, float* out, int64_t T,
                                    int64_t I, int64_t O) {
  matmul(in, I, 1, w, bias, out, T, I, O, false);
}

// grad_w (I, O) += in^T @ grad_out; grad_bias (O) += column sums of grad_out (when given);
// grad_in (T, I) = grad_out @ w^T (when given), from w_t = w^T (O, I).
COPYTASK_INLINE void linear_backward(const float* in, const float* grad_out, const float* w_t, float* grad_w,
                                     float* grad_bias, float* grad_in, int64_t T, int64_t I, int64_t O) {
  if (grad_bias)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < O; ++o) grad_bias[o] += grad_out[t * O + o];
  matmul(in, 1, I, grad_out, nullptr, grad_w, I, T, O, true);  // rows i, summed over t
  if (grad_in) matmul(grad_out, O, 1, w_t, nullptr, grad_in, T, O, I, false);
}

// Layer norm over D (eps 1e-5, biased variance, as torch::layer_norm): keeps the
// normalised rows and 1/std for the backward.
COPYTASK_INLINE void layer_norm_forward(const float* x, const float* weight, const float* bias, float* normalized, float* rstd,
                               float* out, int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    const float* x_t = x + t * D;
    float mean = 0;
    for (int64_t d = 0; d < D; ++d) mean += x_t[d];
    mean /= static_cast<float>(D);
    float variance = 0;
    for (int64_t d = 0; d < D; ++d) variance += (x_t[d] - mean) * (x_t[d] - mean);
    variance /= static_cast<float>(D);
    const float r = 1.0f / std::sqrt(variance + 1e-5f);
    rstd[t] = r;
    for (int64_t d = 0; d < D; ++d) {
      const float n = (x_t[d] - mean) * r;
      normalized[t * D + d] = n;
      out[t * D + d] = n * weight[d] + bias[d];
    }
  }
}

// grad_x (T, D) += the gradient through the layer norm of grad_out; weight and bias
// gradients accumulated.
COPYTASK_INLINE void layer_norm_backward(const float* normalized, const float* rstd, const float* weight, const float* grad_out,
                                float* grad_weight, float* grad_bias, float* grad_x, int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    const float* n_t = normalized + t * D;
    const float* g_t = grad_out + t * D;
    float mean_g = 0, mean_gn = 0;  // means of d(normalized) and d(normalized) * normalized
    for (int64_t d = 0; d < D; ++d) {
      grad_weight[d] += g_t[d] * n_t[d];
      grad_bias[d] += g_t[d];
      const float gn = g_t[d] * weight[d];
      mean_g += gn;
      mean_gn += gn * n_t[d];
    }
    mean_g /= static_cast<float>(D);
    mean_gn /= static_cast<float>(D);
    float* gx_t = grad_x + t * D;
    for (int64_t d = 0; d < D; ++d) gx_t[d] += rstd[t] * (g_t[d] * weight[d] - mean_g - n_t[d] * mean_gn);
  }
}

// Turns the pairs (2i, 2i+1) of every head of x (T, 3D row stride, first D columns used)
// by angle[t, i] (sign = +1), or back (sign = -1, the backward of the rotation).
COPYTASK_INLINE void rotate_pairs(float* x, int64_t row_stride, const float* cos_table, const float* sin_table, float sign,
                         int64_t T, int64_t H, int64_t Dh) {
  const int64_t pairs = Dh / 2;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float* x_h = x + t * row_stride + h * Dh;
      for (int64_t i = 0; i < pairs; ++i) {
        const float c = cos_table[t * pairs + i], s = sign * sin_table[t * pairs + i];
        const float a = x_h[2 * i], b = x_h[2 * i + 1];
        x_h[2 * i] = a * c - b * s;
        x_h[2 * i + 1] = a * s + b * c;
      }
    }
}

// ---- One member's whole model, per example -----------------------------------------------

struct Shape {
  int64_t B, T, D, H, Dh, F, V, L;
};

// Where each dropout site of block l starts in a member's row of the mask buffer, and how
// many floats one example has there: sites in the order the forward pass takes them.
struct MaskLayout {
  int64_t attention, attention_out, hidden, ff_out;  // offsets of block 0's sites
  int64_t per_block;                                  // B * (all sites of one example)
  int64_t row;                                        // S: one member's row
};

MaskLayout mask_layout(const Shape& s) {
  const int64_t att = s.H * s.T * s.T, out = s.T * s.D, hid = s.T * s.F;
  MaskLayout layout;
  layout.attention = 0;
  layout.attention_out = s.B * att;
  layout.hidden = s.B * (att + out);
  layout.ff_out = s.B * (att + out + hid);
  layout.per_block = s.B * (att + out + hid + out);
  layout.row = s.L * layout.per_block;
  return layout;
}

// One member's constants for a step: its parameters, the transposed weights the backward
// reads, its positional tables.
struct MemberConstants {
  std::vector<const float*> value;               // per parameter index
  std::vector<std::vector<float>> weight;        // per parameter index (weights only): (I, O) + slack
  std::vector<std::vector<float>> transposed;    // per parameter index (weights only): (O, I) + slack
  const float* fixed_additive = nullptr;         // (T, D) or null
  bool learned = false;
  bool rotates = false;
  std::vector<float> cos_table, sin_table;       // (T, Dh/2)
  const float* score_offset = nullptr;           // (H, T, T) or null
  const DropoutStream* stream = nullptr;         // this step's dropout masks, or null
  int64_t member = 0;                            // the member's index in the stream
};

// Every activation of one example that the backward reads, per block, plus the final
// layer; and the scratch gradients. Sized once per partition, reused example by example.
class ExampleWorkspace {
 public:
  explicit ExampleWorkspace(const Shape& s) : s_(s) {
    const int64_t TD = s.T * s.D, TF = s.T * s.F;
    per_block_ = 5 * TD + 2 * s.T + 3 * TD + s.H * s.T * s.T + 2 * TF + (s.H * s.T * s.T + 2 * TD + TF);
    data_.resize(s.L * per_block_ + 3 * TD + s.T + s.T * s.V + 3 * TD + 3 * TD + 2 * TF + s.T + kSlack);  // the tail: see example_forward_backward
  }
  struct Block {
    float *normalized1, *rstd1, *attn_in, *qkv, *weights, *mixed, *normalized2, *rstd2, *ff_in, *pre_relu, *hidden;
    float *attention_mask, *attention_out_mask, *hidden_mask, *ff_out_mask;  // this example's dropout masks
  };
  Block block(int64_t l) {
    const int64_t TD = s_.T * s_.D, TF = s_.T * s_.F;
    float* p = data_.data() + l * per_block_;
    Block b;
    b.normalized1 = p; p += TD;
    b.rstd1 = p; p += s_.T;
    b.attn_in = p; p += TD;
    b.qkv = p; p += 3 * TD;
    b.weights = p; p += s_.H * s_.T * s_.T;
    b.mixed = p; p += TD;
    b.normalized2 = p; p += TD;
    b.rstd2 = p; p += s_.T;
    b.ff_in = p; p += TD;
    b.pre_relu = p; p += TF;
    b.hidden = p; p += TF;
    b.attention_mask = p; p += s_.H * s_.T * s_.T;
    b.attention_out_mask = p; p += TD;
    b.hidden_mask = p; p += TF;
    b.ff_out_mask = p;
    return b;
  }
  float* tail() { return data_.data() + s_.L * per_block_; }

 private:
  Shape s_;
  int64_t per_block_;
  std::vector<float> data_;
};

// Forward and backward of one example of one member; adds its parameter gradients to
// `grad` (P floats) and returns its summed cross-entropy over the T positions.
COPYTASK_CLONES double example_forward_backward(const Shape& s, const MemberConstants& c, const std::vector<int64_t>& offset,
                                const MaskLayout& masks_at, const int64_t* tokens, int64_t token_stride,
                                const int64_t* targets, int64_t target_stride, int64_t b, float inverse_positions,
                                ExampleWorkspace& work, float* grad) {
  const int64_t T = s.T, D = s.D, H = s.H, Dh = s.Dh, F = s.F, V = s.V, TD = T * D, TF = T * F;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  float* tail = work.tail();
  float* x = tail;            tail += TD;  // the residual stream (T, D)
  float* normalized_f = tail; tail += TD;
  float* final_in = tail;     tail += TD;
  float* rstd_f = tail;       tail += T;
  float* probs = tail;        tail += T * V;  // then d(logits)
  float* grad_x = tail;       tail += TD;
  float* grad_a = tail;       tail += TD;  // gradient at a layer's output, then its input
  float* grad_b = tail;       tail += TD;
  float* grad_qkv = tail;     tail += 3 * TD;
  float* grad_hidden = tail;  tail += TF;
  float* grad_pre = tail;     tail += TF;
  float* grad_scratch = tail;  // (T) one attention row's d(weights)

  // This example's dropout masks, drawn from the stream where the whole batch's buffer
  // would hold them: block l's sites start at l * per_block + site offset + b * site size.
  if (c.stream)
    for (int64_t l = 0; l < s.L; ++l) {
      auto a = work.block(l);
      const int64_t block_start = l * masks_at.per_block;
      c.stream->fill(c.member, block_start + masks_at.attention + b * H * T * T, H * T * T, a.attention_mask);
      c.stream->fill(c.member, block_start + masks_at.attention_out + b * TD, TD, a.attention_out_mask);
      c.stream->fill(c.member, block_start + masks_at.hidden + b * TF, TF, a.hidden_mask);
      c.stream->fill(c.member, block_start + masks_at.ff_out + b * TD, TD, a.ff_out_mask);
    }
  auto grad_of = [&](int index) { return grad + offset[index]; };

  // Embedding and additive positions.
  const float* tok = c.value[kTok];
  const float* pos = c.value[kPos];
  for (int64_t t = 0; t < T; ++t) {
    const float* row = tok + tokens[t * token_stride] * D;
    for (int64_t d = 0; d < D; ++d) {
      float v = row[d];
      if (c.fixed_additive) v += c.fixed_additive[t * D + d];
      if (c.learned) v += pos[t * D + d];
      x[t * D + d] = v;
    }
  }

  // Blocks, forward.
  for (int64_t l = 0; l < s.L; ++l) {
    auto a = work.block(l);
    const float* attn_mask = c.stream ? a.attention_mask : nullptr;
    const float* out_mask = c.stream ? a.attention_out_mask : nullptr;
    const float* hidden_mask = c.stream ? a.hidden_mask : nullptr;
    const float* ff_out_mask = c.stream ? a.ff_out_mask : nullptr;

    layer_norm_forward(x, c.value[block_index(l, kLn1W)], c.value[block_index(l, kLn1B)], a.normalized1, a.rstd1,
                       a.attn_in, T, D);
    linear_forward(a.attn_in, c.weight[block_index(l, kQkv)].data(), nullptr, a.qkv, T, D, 3 * D);  // (T, 3D): q | k | v
    if (c.rotates) {
      rotate_pairs(a.qkv, 3 * D, c.cos_table.data(), c.sin_table.data(), 1.0f, T, H, Dh);      // q
      rotate_pairs(a.qkv + D, 3 * D, c.cos_table.data(), c.sin_table.data(), 1.0f, T, H, Dh);  // k
    }
    for (int64_t t = 0; t < TD; ++t) a.mixed[t] = 0.0f;
    for (int64_t h = 0; h < H; ++h) {
      const float* offset_h = c.score_offset ? c.score_offset + h * T * T : nullptr;
      for (int64_t i = 0; i < T; ++i) {
        const float* q_i = a.qkv + i * 3 * D + h * Dh;
        float* w_i = a.weights + (h * T + i) * T;
        float row_max = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < T; ++j) {
          const float* k_j = a.qkv + j * 3 * D + D + h * Dh;
          float dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += q_i[d] * k_j[d];
          const float score = dot * scale + (offset_h ? offset_h[i * T + j] : 0.0f);
          w_i[j] = score;
          row_max = std::max(row_max, score);
        }
        float total = 0;
        for (int64_t j = 0; j < T; ++j) {
          w_i[j] = std::exp(w_i[j] - row_max);
          total += w_i[j];
        }
        const float inverse_total = 1.0f / total;
        float* out_i = a.mixed + i * D + h * Dh;
        for (int64_t j = 0; j < T; ++j) {
          w_i[j] *= inverse_total;
          const float kept = attn_mask ? w_i[j] * attn_mask[(h * T + i) * T + j] : w_i[j];
          const float* v_j = a.qkv + j * 3 * D + 2 * D + h * Dh;
          for (int64_t d = 0; d < Dh; ++d) out_i[d] += kept * v_j[d];
        }
      }
    }
    // x += dropout(proj(mixed)); grad_a holds the projection's output for the moment.
    linear_forward(a.mixed, c.weight[block_index(l, kProjW)].data(), c.value[block_index(l, kProjB)], grad_a, T, D, D);
    for (int64_t t = 0; t < TD; ++t) x[t] += out_mask ? grad_a[t] * out_mask[t] : grad_a[t];
    // x += dropout(fc2(dropout(relu(fc1(ln2(x)))))).
    layer_norm_forward(x, c.value[block_index(l, kLn2W)], c.value[block_index(l, kLn2B)], a.normalized2, a.rstd2,
                       a.ff_in, T, D);
    linear_forward(a.ff_in, c.weight[block_index(l, kFc1W)].data(), c.value[block_index(l, kFc1B)], a.pre_relu, T, D, F);
    for (int64_t t = 0; t < TF; ++t) {
      const float relu = a.pre_relu[t] > 0.0f ? a.pre_relu[t] : 0.0f;
      a.hidden[t] = hidden_mask ? relu * hidden_mask[t] : relu;
    }
    linear_forward(a.hidden, c.weight[block_index(l, kFc2W)].data(), c.value[block_index(l, kFc2B)], grad_a, T, F, D);
    for (int64_t t = 0; t < TD; ++t) x[t] += ff_out_mask ? grad_a[t] * ff_out_mask[t] : grad_a[t];
  }

  // Final layer norm, head, cross-entropy; probs becomes d(loss)/d(logits).
  layer_norm_forward(x, c.value[kLnfW], c.value[kLnfB], normalized_f, rstd_f, final_in, T, D);
  linear_forward(final_in, c.weight[kHeadW].data(), c.value[kHeadB], probs, T, D, V);
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    float* p_t = probs + t * V;
    float row_max = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) row_max = std::max(row_max, p_t[v]);
    float total = 0;
    for (int64_t v = 0; v < V; ++v) total += std::exp(p_t[v] - row_max);
    const float log_total = row_max + std::log(total);
    const int64_t target = targets[t * target_stride];
    loss += static_cast<double>(log_total - p_t[target]);
    for (int64_t v = 0; v < V; ++v) p_t[v] = std::exp(p_t[v] - log_total) * inverse_positions;
    p_t[target] -= inverse_positions;
  }

  // Backward: head, final layer norm.
  linear_backward(final_in, probs, c.transposed[kHeadW].data(), grad_of(kHeadW), grad_of(kHeadB), grad_a, T, D, V);
  for (int64_t t = 0; t < TD; ++t) grad_x[t] = 0.0f;
  layer_norm_backward(normalized_f, rstd_f, c.value[kLnfW], grad_a, grad_of(kLnfW), grad_of(kLnfB), grad_x, T, D);

  // Blocks, backward. grad_x is d(loss)/d(the block's output) on entry, d(its input) on exit.
  for (int64_t l = s.L - 1; l >= 0; --l) {
    auto a = work.block(l);
    const float* attn_mask = c.stream ? a.attention_mask : nullptr;
    const float* out_mask = c.stream ? a.attention_out_mask : nullptr;
    const float* hidden_mask = c.stream ? a.hidden_mask : nullptr;
    const float* ff_out_mask = c.stream ? a.ff_out_mask : nullptr;

    // Feed-forward: out = in + dropout(fc2(hidden)).
    for (int64_t t = 0; t < TD; ++t) grad_a[t] = ff_out_mask ? grad_x[t] * ff_out_mask[t] : grad_x[t];
    linear_backward(a.hidden, grad_a, c.transposed[block_index(l, kFc2W)].data(), grad_of(block_index(l, kFc2W)),
                    grad_of(block_index(l, kFc2B)), grad_hidden, T, F, D);
    for (int64_t t = 0; t < TF; ++t) {
      const float through_relu = a.pre_relu[t] > 0.0f ? grad_hidden[t] : 0.0f;
      grad_pre[t] = hidden_mask ? through_relu * hidden_mask[t] : through_relu;
    }
    linear_backward(a.ff_in, grad_pre, c.transposed[block_index(l, kFc1W)].data(), grad_of(block_index(l, kFc1W)),
                    grad_of(block_index(l, kFc1B)), grad_b, T, D, F);
    layer_norm_backward(a.normalized2, a.rstd2, c.value[block_index(l, kLn2W)], grad_b, grad_of(block_index(l, kLn2W)),
                        grad_of(block_index(l, kLn2B)), grad_x, T, D);

    // Attention: out = in + dropout(proj(mixed)).
    for (int64_t t = 0; t < TD; ++t) grad_a[t] = out_mask ? grad_x[t] * out_mask[t] : grad_x[t];
    linear_backward(a.mixed, grad_a, c.transposed[block_index(l, kProjW)].data(), grad_of(block_index(l, kProjW)),
                    grad_of(block_index(l, kProjB)), grad_b, T, D, D);  // grad_b: d(mixed) (T, D)
    for (int64_t t = 0; t < 3 * TD; ++t) grad_qkv[t] = 0.0f;
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        const float* w_i = a.weights + (h * T + i) * T;
        const float* g_i = grad_b + i * D + h * Dh;
        const float* drop_i = attn_mask ? attn_mask + (h * T + i) * T : nullptr;
        // d(kept)_j = g_i . v_j; d(weights) = d(kept) * dropout; dv_j += kept_j g_i.
        float weighted = 0;
        for (int64_t j = 0; j < T; ++j) {
          const float drop = drop_i ? drop_i[j] : 1.0f;
          const float* v_j = a.qkv + j * 3 * D + 2 * D + h * Dh;
          float* gv_j = grad_qkv + j * 3 * D + 2 * D + h * Dh;
          float dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += g_i[d] * v_j[d];
          grad_scratch[j] = dot * drop;
          weighted += w_i[j] * grad_scratch[j];
          const float kept = w_i[j] * drop;
          for (int64_t d = 0; d < Dh; ++d) gv_j[d] += kept * g_i[d];
        }
        // d(score)_j = w_j (d(weights)_j - weighted); dq_i += scale ds_j k_j; dk_j += scale ds_j q_i.
        const float* q_i = a.qkv + i * 3 * D + h * Dh;
        float* gq_i = grad_qkv + i * 3 * D + h * Dh;
        for (int64_t j = 0; j < T; ++j) {
          const float grad_score = w_i[j] * (grad_scratch[j] - weighted) * scale;
          if (grad_score == 0.0f) continue;  // masked positions
          const float* k_j = a.qkv + j * 3 * D + D + h * Dh;
          float* gk_j = grad_qkv + j * 3 * D + D + h * Dh;
          for (int64_t d = 0; d < Dh; ++d) {
            gq_i[d] += grad_score * k_j[d];
            gk_j[d] += grad_score * q_i[d];
          }
        }
      }
    }
    if (c.rotates) {
      rotate_pairs(grad_qkv, 3 * D, c.cos_table.data(), c.sin_table.data(), -1.0f, T, H, Dh);      // q
      rotate_pairs(grad_qkv + D, 3 * D, c.cos_table.data(), c.sin_table.data(), -1.0f, T, H, Dh);  // k
    }
    linear_backward(a.attn_in, grad_qkv, c.transposed[block_index(l, kQkv)].data(), grad_of(block_index(l, kQkv)),
                    nullptr, grad_b, T, D, 3 * D);
    layer_norm_backward(a.normalized1, a.rstd1, c.value[block_index(l, kLn1W)], grad_b, grad_of(block_index(l, kLn1W)),
                        grad_of(block_index(l, kLn1B)), grad_x, T, D);
  }

  // Embedding: the token rows and, for learned members, the position rows.
  float* grad_tok = grad_of(kTok);
  float* grad_pos = grad_of(kPos);
  for (int64_t t = 0; t < T; ++t) {
    float* row = grad_tok + tokens[t * token_stride] * D;
    for (int64_t d = 0; d < D; ++d) row[d] += grad_x[t * D + d];
    if (c.learned)
      for (int64_t d = 0; d < D; ++d) grad_pos[t * D + d] += grad_x[t * D + d];
  }
  return loss;
}

// Partitions of a member's B examples: fixed by B alone (about 64 examples each, at most
// 16), so the summation order never depends on the threads or the members.
int64_t partition_count(int64_t batch) { return std::clamp<int64_t>(batch / 64, 1, 16); }

}  // namespace

std::string fused_cpu_unsupported(const EncoderImpl& model) {
  if (!model.device().is_cpu()) return "the model is not on the CPU";
  if (model.tok_emb.scalar_type() != torch::kFloat32) return "the model is not float32";
  if (!model.hooks().pair_rotations_only()) return "a member's positional rotation is not a pair rotation";
  return "";
}

torch::Tensor fused_cpu_loss_backward(EncoderImpl& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                      const DropoutMasks* masks) {
  const std::string why = fused_cpu_unsupported(model);
  TORCH_CHECK(why.empty(), "fused_cpu_loss_backward: ", why);
  const EncoderShape& shape = model.shape();
  const int64_t M = model.member_count();
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(0) == M && inputs.size(2) == shape.context, "fused_cpu: inputs (M, B, T)");
  TORCH_CHECK(targets.sizes() == inputs.sizes(), "fused_cpu: targets must have the inputs' shape");
  TORCH_CHECK(inputs.scalar_type() == torch::kLong && targets.scalar_type() == torch::kLong, "fused_cpu: int64 tokens");
  Shape s{inputs.size(1), shape.context, shape.embed, shape.heads, shape.embed / shape.heads,
          shape.hidden,   shape.vocab,   shape.blocks};
  const MaskLayout masks_at = mask_layout(s);
  if (masks) {
    TORCH_CHECK(masks->whole_and_untaken() && masks->batch() == s.B, "fused_cpu: masks must be the whole batch's");
    TORCH_CHECK(masks->stream(), "fused_cpu: masks without a CPU stream");
    TORCH_CHECK(model.dropout_elements(s.B) == masks_at.row, "fused_cpu: the masks have another layout");
  }

  ParameterTable parameters(model);
  const int64_t P = parameters.total;
  const PositionalHooks& hooks = model.hooks();
  const torch::Tensor fixed = hooks.fixed_additive().defined() ? hooks.fixed_additive().contiguous() : torch::Tensor();
  const torch::Tensor learned = hooks.learned_mask().defined() ? hooks.learned_mask().contiguous() : torch::Tensor();
  const torch::Tensor angles = hooks.pair_rotation_angles();                                         // (M, T, Dh/2)
  const torch::Tensor offsets = model.score_offset().defined()
                                    ? model.score_offset().expand({M, 1, s.H, s.T, s.T}).contiguous()
                                    : torch::Tensor();                                               // (M, 1, H, T, T)

  // Each member's constants: parameter pointers, transposed weights, positional tables.
  const std::vector<int> weights = [&] {
    std::vector<int> out{kHeadW};
    for (int64_t l = 0; l < s.L; ++l)
      for (int which : {kQkv, kProjW, kFc1W, kFc2W}) out.push_back(block_index(l, which));
    return out;
  }();
  std::vector<MemberConstants> constants(M);
  for (int64_t m = 0; m < M; ++m) {
    MemberConstants& c = constants[m];
    for (size_t j = 0; j < parameters.tensors.size(); ++j) c.value.push_back(parameters.value(static_cast<int>(j), m));
    c.weight.resize(parameters.tensors.size());
    c.transposed.resize(parameters.tensors.size());
    for (int j : weights) {
      const auto& w = parameters.tensors[j];  // (M, I, O)
      const int64_t I = w.size(1), O = w.size(2);
      const float* value = c.value[j];
      c.weight[j].assign(I * O + kSlack, 0.0f);
      std::copy(value, value + I * O, c.weight[j].begin());
      c.transposed[j].assign(I * O + kSlack, 0.0f);
      for (int64_t i = 0; i < I; ++i)
        for (int64_t o = 0; o < O; ++o) c.transposed[j][o * I + i] = value[i * O + o];
    }
    if (fixed.defined()) c.fixed_additive = fixed.data_ptr<float>() + m * s.T * s.D;
    c.learned = learned.defined() && learned.data_ptr<float>()[m] != 0.0f;
    c.rotates = hooks.rotating_members()[m];
    if (c.rotates) {
      auto member_angles = angles[m].contiguous();  // (T, Dh/2)
      auto cos = member_angles.cos(), sin = member_angles.sin();
      c.cos_table.assign(cos.data_ptr<float>(), cos.data_ptr<float>() + cos.numel());
      c.sin_table.assign(sin.data_ptr<float>(), sin.data_ptr<float>() + sin.numel());
    }
    if (offsets.defined()) c.score_offset = offsets.data_ptr<float>() + m * s.H * s.T * s.T;
    if (masks) c.stream = masks->stream();
    c.member = m;
  }

  // Every (member, partition) task sums its examples' gradients into its own buffer.
  const int64_t K = partition_count(s.B);
  std::vector<float> partial(static_cast<size_t>(M * K * P + kSlack));  // slack: see matmul_rows
  std::vector<double> partial_loss(static_cast<size_t>(M * K), 0.0);
  const int64_t* input_data = inputs.data_ptr<int64_t>();
  const int64_t* target_data = targets.data_ptr<int64_t>();
  const float inverse_positions = 1.0f / static_cast<float>(s.B * s.T);
  at::parallel_for(0, M * K, 1, [&](int64_t begin, int64_t end) {
    ExampleWorkspace work(s);
    for (int64_t task = begin; task < end; ++task) {
      const int64_t m = task / K, k = task % K;
      float* grad = partial.data() + task * P;
      std::fill(grad, grad + P, 0.0f);
      const int64_t first = k * s.B / K, last = (k + 1) * s.B / K;
      double loss = 0;
      for (int64_t b = first; b < last; ++b) {
        const int64_t* tokens = input_data + m * inputs.stride(0) + b * inputs.stride(1);
        const int64_t* example_targets = target_data + m * targets.stride(0) + b * targets.stride(1);
        loss += example_forward_backward(s, constants[m], parameters.offset, masks_at, tokens, inputs.stride(2),
                                         example_targets, targets.stride(2), b, inverse_positions, work, grad);
      }
      partial_loss[task] = loss;
    }
  });

  // Partitions added in order into each parameter's gradient (M, ...).
  std::vector<torch::Tensor> grads;
  for (const auto& t : parameters.tensors) grads.push_back(torch::empty_like(t));
  at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
    for (int64_t m = begin; m < end; ++m)
      for (size_t j = 0; j < grads.size(); ++j) {
        const int64_t n = parameters.per_member[j];
        float* out = grads[j].data_ptr<float>() + m * n;
        const float* first = partial.data() + (m * K) * P + parameters.offset[j];
        std::copy(first, first + n, out);
        for (int64_t k = 1; k < K; ++k) {
          const float* part = partial.data() + (m * K + k) * P + parameters.offset[j];
          for (int64_t e = 0; e < n; ++e) out[e] += part[e];
        }
      }
  });
  for (size_t j = 0; j < grads.size(); ++j) parameters.tensors[j].mutable_grad() = grads[j];

  auto member_loss = torch::empty({M});  // (M)
  for (int64_t m = 0; m < M; ++m) {
    double total = 0;
    for (int64_t k = 0; k < K; ++k) total += partial_loss[m * K + k];
    member_loss[m] = total / static_cast<double>(s.B * s.T);
  }
  return member_loss;
}

}  // namespace copytask
