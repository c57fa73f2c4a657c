#pragma once
// The encoder's layers by hand on the CPU, one example at a time: one function per layer's
// forward and one per its backward (llm.c's layout). model/fused_cpu.cpp composes them
// into the training step and the evaluation forward pass; nothing else implements them.
// Everything is row-major float32; weights are (in, out), as the LibTorch model stores them.
// The functions are always inlined into their caller, so each of its compiled variants
// (x86-64-v4, x86-64-v3 and generic: on_cpu_variant below) gets them with its own
// instructions.
//
// Shapes of one example: T positions, D embed, H heads, Dh = D / H, F FF hidden, V vocab;
// q | k | v of a position are one row of 3D floats, head h at columns h*Dh of each third.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "model/cpu_variant.h"

#define COPYTASK_INLINE inline __attribute__((always_inline))
// Vec8 and Vec16 values are passed only between always-inlined functions, so the warning
// that their ABI differs between the compiled variants does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace copytask::cpu {

// ---- The compiled variants ------------------------------------------------------------
// The hot functions are compiled three times, for x86-64-v4 (AVX-512: 16-wide registers),
// x86-64-v3 (AVX2 and FMA: 8-wide) and the generic target, and cpu_variant_active()
// (model/cpu_variant.h) picks one at every call. A kernel writes its body once, as an
// always-inlined lambda of the register width's tag, and on_cpu_variant runs it:
//
//   return on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY { ...; matmul<decltype(lanes)>(...); });
//
// Each runner below has its target's instructions, and the body and every layer it calls
// (always inlined) are compiled into it with them. The tag tells the layers that are written
// for a width (the matrix products) which one to use.
struct Lanes8 {
  static constexpr int kWidth = 8;
};
struct Lanes16 {
  static constexpr int kWidth = 16;
};
#define COPYTASK_KERNEL_BODY __attribute__((always_inline))

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define COPYTASK_CPU_VARIANTS 1
// prefer-vector-width=512: GCC's x86-64-v4 otherwise vectorises the elementwise loops 8 wide.
template <class Body>
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) auto run_x86_64_v4(const Body& body) {
  return body(Lanes16{});
}
template <class Body>
__attribute__((noinline, target("arch=x86-64-v3"))) auto run_x86_64_v3(const Body& body) {
  return body(Lanes8{});
}
#else
#define COPYTASK_CPU_VARIANTS 0
#endif
template <class Body>
__attribute__((noinline)) auto run_generic(const Body& body) {
  return body(Lanes8{});
}

template <class Body>
COPYTASK_INLINE auto on_cpu_variant(const Body& body) {
#if COPYTASK_CPU_VARIANTS
  switch (cpu_variant_active()) {
    case CpuVariant::x86_64_v4: return run_x86_64_v4(body);
    case CpuVariant::x86_64_v3: return run_x86_64_v3(body);
    case CpuVariant::generic: break;
  }
#endif
  return run_generic(body);
}

// ---- Small matrix products ------------------------------------------------------------

// Eight and sixteen floats, loaded and stored unaligned: the vector types of the matrix
// products (one AVX register in the x86-64-v3 variant, two SSE registers in the generic
// one; one AVX-512 register in the x86-64-v4 variant).
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));
COPYTASK_INLINE Vec8 load8(const float* p) {
  Vec8 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
COPYTASK_INLINE Vec16 load16(const float* p) {
  Vec16 v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// The first `width` floats of a vector, the others 0 / stored: through a buffer, so that the
// vector is never indexed at a run-time lane (which would keep a whole tile of accumulators
// in memory instead of registers).
template <class Vec>
COPYTASK_INLINE Vec load_partial(const float* p, int64_t width) {
  float buffer[sizeof(Vec) / sizeof(float)] = {};
  for (int64_t l = 0; l < width; ++l) buffer[l] = p[l];
  Vec v;
  __builtin_memcpy(&v, buffer, sizeof v);
  return v;
}
template <class Vec>
COPYTASK_INLINE void store_partial(float* p, const Vec& v, int64_t width) {
  float buffer[sizeof(Vec) / sizeof(float)];
  __builtin_memcpy(buffer, &v, sizeof v);
  for (int64_t l = 0; l < width; ++l) p[l] = buffer[l];
}

// Every right-hand matrix (Bm below) is followed by this many readable floats: the
// products read 8 (or 16) columns at a time, so up to 15 past its end.
constexpr int64_t kSlack = 16;

// Rows r < R of C (R x O) = (or +=, or = bias +) sum over k < K of
// A[r * a_row + k * a_red] * Bm[k * O .. k * O + O). The R accumulators of one 8-column
// block stay in registers over the whole sum.
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

// The x86-64-v4 tile: rows r < R of C, columns o .. o + 16 NV (the last of the NV 16-column
// vectors may hold fewer: its lanes past O are computed from the next row's or the slack's
// floats and never stored). R x NV accumulators (up to 4 x 4 of the 32 AVX-512 registers)
// stay in registers over the whole sum, so each loaded row of Bm and each broadcast element
// of A serves several products. Every element is the same sum in the same order as in
// matmul_rows (the first term, then one fused multiply-add per k): the variants agree bit
// for bit.
template <int R, int NV>
COPYTASK_INLINE void matmul_tile16(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                   float* C, int64_t K, int64_t O, int64_t o, bool accumulate) {
  Vec16 acc[R][NV];
  const int64_t last_width = std::min<int64_t>(16, O - o - 16 * (NV - 1));
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t col = o + 16 * v;
      acc[r][v] = Vec16{};
      if (v < NV - 1 || last_width == 16) {
        if (accumulate) acc[r][v] = load16(C + r * O + col);
        else if (bias) acc[r][v] = load16(bias + col);
      } else {
        if (accumulate) acc[r][v] = load_partial<Vec16>(C + r * O + col, last_width);
        else if (bias) acc[r][v] = load_partial<Vec16>(bias + col, last_width);
      }
    }
  for (int64_t k = 0; k < K; ++k) {
    Vec16 b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load16(Bm + k * O + o + 16 * v);
    for (int r = 0; r < R; ++r) {
      const float a = A[r * a_row + k * a_red];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t col = o + 16 * v;
      if (v < NV - 1 || last_width == 16) __builtin_memcpy(C + r * O + col, &acc[r][v], sizeof(Vec16));
      else store_partial(C + r * O + col, acc[r][v], last_width);
    }
}

template <int R>
COPYTASK_INLINE void matmul_rows16(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                   float* C, int64_t K, int64_t O, bool accumulate) {
  for (int64_t o = 0; o < O; o += 64) {
    switch ((std::min<int64_t>(64, O - o) + 15) / 16) {
      case 4: matmul_tile16<R, 4>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); break;
      case 3: matmul_tile16<R, 3>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); break;
      case 2: matmul_tile16<R, 2>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); break;
      default: matmul_tile16<R, 1>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); break;
    }
  }
}

// R rows of C in the width of the variant: 8-column blocks (Lanes8) or 16-wide tiles (Lanes16).
template <class Lanes, int R>
COPYTASK_INLINE void matmul_rows_of(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                    float* C, int64_t K, int64_t O, bool accumulate) {
  if constexpr (Lanes::kWidth == 16) matmul_rows16<R>(A, a_row, a_red, Bm, bias, C, K, O, accumulate);
  else matmul_rows<R>(A, a_row, a_red, Bm, bias, C, K, O, accumulate);
}

// All `rows` rows of C, four at a time, in the width of the variant (Lanes8 or Lanes16).
template <class Lanes>
COPYTASK_INLINE void matmul(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias, float* C,
                            int64_t rows, int64_t K, int64_t O, bool accumulate) {
  int64_t r = 0;
  for (; r + 4 <= rows; r += 4)
    matmul_rows_of<Lanes, 4>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate);
  switch (rows - r) {
    case 3: matmul_rows_of<Lanes, 3>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    case 2: matmul_rows_of<Lanes, 2>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    case 1: matmul_rows_of<Lanes, 1>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    default: break;
  }
}

// ---- Linear -------------------------------------------------------------------------------

// out (T, O) = in (T, I) @ w (I, O) + bias (O); bias may be null.
template <class Lanes>
COPYTASK_INLINE void linear_forward(const float* in, const float* w, const float* bias, float* out, int64_t T,
                                    int64_t I, int64_t O) {
  matmul<Lanes>(in, I, 1, w, bias, out, T, I, O, false);
}

// grad_w (I, O) += in^T @ grad_out; grad_bias (O) += the column sums of grad_out (when
// given); grad_in (T, I) = grad_out @ w^T (when given), read from w_t = w^T (O, I).
template <class Lanes>
COPYTASK_INLINE void linear_backward(const float* in, const float* grad_out, const float* w_t, float* grad_w,
                                     float* grad_bias, float* grad_in, int64_t T, int64_t I, int64_t O) {
  if (grad_bias)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t o = 0; o < O; ++o) grad_bias[o] += grad_out[t * O + o];
  matmul<Lanes>(in, 1, I, grad_out, nullptr, grad_w, I, T, O, true);  // rows i, summed over t
  if (grad_in) matmul<Lanes>(grad_out, O, 1, w_t, nullptr, grad_in, T, O, I, false);
}

// ---- Layer norm ---------------------------------------------------------------------------

// Over D (eps 1e-5, biased variance, as torch::layer_norm); keeps the normalised rows and
// 1/std for the backward.
COPYTASK_INLINE void layernorm_forward(const float* x, const float* weight, const float* bias, float* normalized,
                                       float* rstd, float* out, int64_t T, int64_t D) {
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

// grad_x (T, D) += the gradient through the layer norm of grad_out; the weight and bias
// gradients accumulate.
COPYTASK_INLINE void layernorm_backward(const float* normalized, const float* rstd, const float* weight,
                                        const float* grad_out, float* grad_weight, float* grad_bias, float* grad_x,
                                        int64_t T, int64_t D) {
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

// ---- Embedding ----------------------------------------------------------------------------

// x (T, D) = tok_emb[tokens[t]]; tokens read with a stride. (The additive hook adds its
// rows next: model/hooks/additive.cpp.)
COPYTASK_INLINE void embedding_forward(const float* tok_emb, const int64_t* tokens, int64_t token_stride, float* x,
                                       int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    const float* row = tok_emb + tokens[t * token_stride] * D;
    for (int64_t d = 0; d < D; ++d) x[t * D + d] = row[d];
  }
}

// grad_tok_emb rows of the tokens += grad_x.
COPYTASK_INLINE void embedding_backward(const float* grad_x, const int64_t* tokens, int64_t token_stride,
                                        float* grad_tok_emb, int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    float* row = grad_tok_emb + tokens[t * token_stride] * D;
    for (int64_t d = 0; d < D; ++d) row[d] += grad_x[t * D + d];
  }
}

// ---- Attention ----------------------------------------------------------------------------

// weights[h, i, j] = softmax over j of (q_i . k_j / sqrt(Dh) + bias[h, i, j]), j <= i only
// when causal (the others 0); mixed (T, D) = the weights (times the dropout mask, when
// given) @ v, head by head. qkv: (T, 3D); bias, dropout, weights: (H, T, T).
COPYTASK_INLINE void attention_forward(const float* qkv, const float* bias, bool causal, const float* dropout,
                                       float* weights, float* mixed, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  for (int64_t t = 0; t < T * D; ++t) mixed[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;  // keys 0 .. seen-1
      const float* q_i = qkv + i * 3 * D + h * Dh;
      const float* bias_i = bias ? bias + (h * T + i) * T : nullptr;
      float* w_i = weights + (h * T + i) * T;
      float row_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j) {
        const float* k_j = qkv + j * 3 * D + D + h * Dh;
        float dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += q_i[d] * k_j[d];
        const float score = bias_i ? dot * scale + bias_i[j] : dot * scale;
        w_i[j] = score;
        row_max = std::max(row_max, score);
      }
      float total = 0;
      for (int64_t j = 0; j < seen; ++j) {
        w_i[j] = std::exp(w_i[j] - row_max);
        total += w_i[j];
      }
      const float inverse_total = 1.0f / total;
      float* out_i = mixed + i * D + h * Dh;
      const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
      for (int64_t j = 0; j < seen; ++j) {
        w_i[j] *= inverse_total;
        const float kept = drop_i ? w_i[j] * drop_i[j] : w_i[j];
        const float* v_j = qkv + j * 3 * D + 2 * D + h * Dh;
        for (int64_t d = 0; d < Dh; ++d) out_i[d] += kept * v_j[d];
      }
      for (int64_t j = seen; j < T; ++j) w_i[j] = 0.0f;
    }
  }
}

// From grad_mixed (T, D): grad_qkv (T, 3D) = the gradient at q | k | v (set, not added);
// grad_bias (H, T, T), when given, += the gradient at the scores before the scaling, which
// is the score bias's. scratch: T floats.
COPYTASK_INLINE void attention_backward(const float* qkv, const float* weights, bool causal, const float* dropout,
                                        const float* grad_mixed, float* grad_qkv, float* grad_bias, float* scratch,
                                        int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  for (int64_t t = 0; t < 3 * T * D; ++t) grad_qkv[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      const float* w_i = weights + (h * T + i) * T;
      const float* g_i = grad_mixed + i * D + h * Dh;
      const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
      // d(kept)_j = g_i . v_j; d(weights) = d(kept) * dropout; dv_j += kept_j g_i.
      float weighted = 0;  // sum_j w_j d(weights)_j, for the softmax backward
      for (int64_t j = 0; j < seen; ++j) {
        const float drop = drop_i ? drop_i[j] : 1.0f;
        const float* v_j = qkv + j * 3 * D + 2 * D + h * Dh;
        float* gv_j = grad_qkv + j * 3 * D + 2 * D + h * Dh;
        float dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += g_i[d] * v_j[d];
        scratch[j] = dot * drop;
        weighted += w_i[j] * scratch[j];
        const float kept = w_i[j] * drop;
        for (int64_t d = 0; d < Dh; ++d) gv_j[d] += kept * g_i[d];
      }
      // d(logit)_j = w_j (d(weights)_j - weighted): the bias's gradient; d(score) = it / sqrt(Dh)
      // by the scale: dq_i += d(score)_j k_j; dk_j += d(score)_j q_i.
      const float* q_i = qkv + i * 3 * D + h * Dh;
      float* gq_i = grad_qkv + i * 3 * D + h * Dh;
      float* grad_bias_i = grad_bias ? grad_bias + (h * T + i) * T : nullptr;
      for (int64_t j = 0; j < seen; ++j) {
        const float grad_logit = w_i[j] * (scratch[j] - weighted);
        if (grad_bias_i) grad_bias_i[j] += grad_logit;
        const float grad_score = grad_logit * scale;
        if (grad_score == 0.0f) continue;  // exact zeros add nothing
        const float* k_j = qkv + j * 3 * D + D + h * Dh;
        float* gk_j = grad_qkv + j * 3 * D + D + h * Dh;
        for (int64_t d = 0; d < Dh; ++d) {
          gq_i[d] += grad_score * k_j[d];
          gk_j[d] += grad_score * q_i[d];
        }
      }
    }
  }
}

// ---- Attention in stages ----------------------------------------------------------------------
// A member with hooks at the scores or softmax site (a content term, the length scale) runs
// its attention in stages, so that the hooks can read and change the logits between them:
// scores, then (the hooks), then softmax and the mix; backward the same way back. The same
// function as attention_forward / attention_backward, summed in another order.

// scores (H, T, T) = q_i . k_j / sqrt(Dh) for the seen keys (j <= i when causal), 0 beyond.
COPYTASK_INLINE void attention_scores(const float* qkv, bool causal, float* scores, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      const float* q_i = qkv + i * 3 * D + h * Dh;
      float* s_i = scores + (h * T + i) * T;
      for (int64_t j = 0; j < seen; ++j) {
        const float* k_j = qkv + j * 3 * D + D + h * Dh;
        float dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += q_i[d] * k_j[d];
        s_i[j] = dot * scale;
      }
      for (int64_t j = seen; j < T; ++j) s_i[j] = 0.0f;
    }
}

// weights (H, T, T): the logits in, their softmax over the seen keys out (0 beyond); mixed
// (T, D) = the weights (times the dropout mask, when given) @ v, head by head.
COPYTASK_INLINE void attention_softmax_mix(const float* qkv, bool causal, const float* dropout, float* weights,
                                           float* mixed, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  for (int64_t t = 0; t < T * D; ++t) mixed[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      float* w_i = weights + (h * T + i) * T;
      float row_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j) row_max = std::max(row_max, w_i[j]);
      float total = 0;
      for (int64_t j = 0; j < seen; ++j) {
        w_i[j] = std::exp(w_i[j] - row_max);
        total += w_i[j];
      }
      const float inverse_total = 1.0f / total;
      float* out_i = mixed + i * D + h * Dh;
      const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
      for (int64_t j = 0; j < seen; ++j) {
        w_i[j] *= inverse_total;
        const float kept = drop_i ? w_i[j] * drop_i[j] : w_i[j];
        const float* v_j = qkv + j * 3 * D + 2 * D + h * Dh;
        for (int64_t d = 0; d < Dh; ++d) out_i[d] += kept * v_j[d];
      }
      for (int64_t j = seen; j < T; ++j) w_i[j] = 0.0f;
    }
}

// From grad_mixed (T, D): grad_qkv (T, 3D) set, its v part the gradient at v and its q and k
// parts zero; grad_logits (H, T, T) = the gradient at the softmax's input (0 for unseen
// keys). scratch: T floats.
COPYTASK_INLINE void attention_softmax_backward(const float* qkv, const float* weights, bool causal,
                                                const float* dropout, const float* grad_mixed, float* grad_qkv,
                                                float* grad_logits, float* scratch, int64_t T, int64_t H,
                                                int64_t Dh) {
  const int64_t D = H * Dh;
  for (int64_t t = 0; t < 3 * T * D; ++t) grad_qkv[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      const float* w_i = weights + (h * T + i) * T;
      const float* g_i = grad_mixed + i * D + h * Dh;
      const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
      float weighted = 0;  // sum_j w_j d(weights)_j, for the softmax backward
      for (int64_t j = 0; j < seen; ++j) {
        const float drop = drop_i ? drop_i[j] : 1.0f;
        const float* v_j = qkv + j * 3 * D + 2 * D + h * Dh;
        float* gv_j = grad_qkv + j * 3 * D + 2 * D + h * Dh;
        float dot = 0;
        for (int64_t d = 0; d < Dh; ++d) dot += g_i[d] * v_j[d];
        scratch[j] = dot * drop;
        weighted += w_i[j] * scratch[j];
        const float kept = w_i[j] * drop;
        for (int64_t d = 0; d < Dh; ++d) gv_j[d] += kept * g_i[d];
      }
      float* gl_i = grad_logits + (h * T + i) * T;
      for (int64_t j = 0; j < seen; ++j) gl_i[j] = w_i[j] * (scratch[j] - weighted);
      for (int64_t j = seen; j < T; ++j) gl_i[j] = 0.0f;
    }
}

// grad_qkv's q and k parts += the gradient through q_i . k_j / sqrt(Dh) of grad_scores (H, T, T).
COPYTASK_INLINE void attention_scores_backward(const float* qkv, bool causal, const float* grad_scores,
                                               float* grad_qkv, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  for (int64_t h = 0; h < H; ++h)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      const float* q_i = qkv + i * 3 * D + h * Dh;
      float* gq_i = grad_qkv + i * 3 * D + h * Dh;
      const float* gs_i = grad_scores + (h * T + i) * T;
      for (int64_t j = 0; j < seen; ++j) {
        const float grad_score = gs_i[j] * scale;
        if (grad_score == 0.0f) continue;  // exact zeros add nothing
        const float* k_j = qkv + j * 3 * D + D + h * Dh;
        float* gk_j = grad_qkv + j * 3 * D + D + h * Dh;
        for (int64_t d = 0; d < Dh; ++d) {
          gq_i[d] += grad_score * k_j[d];
          gk_j[d] += grad_score * q_i[d];
        }
      }
    }
}

// ---- Residuals, ReLU, dropout ----------------------------------------------------------------
// The mask test is outside the loops: each loop is then one the compiler vectorises
// (measured: with the test inside, these four loops cost 7% of the step's instructions).

// x (n) += y * mask (mask may be null).
COPYTASK_INLINE void residual_forward(float* x, const float* y, const float* mask, int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) x[t] += y[t] * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) x[t] += y[t];
}

// grad_y (n) = grad_x * mask: the gradient at a residual branch's output.
COPYTASK_INLINE void residual_backward(const float* grad_x, const float* mask, float* grad_y, int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) grad_y[t] = grad_x[t] * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) grad_y[t] = grad_x[t];
}

// out (n) = relu(pre) * mask.
COPYTASK_INLINE void relu_forward(const float* pre, const float* mask, float* out, int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) out[t] = (pre[t] > 0.0f ? pre[t] : 0.0f) * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) out[t] = pre[t] > 0.0f ? pre[t] : 0.0f;
}

// grad_pre (n) = grad_out through the mask and the ReLU.
COPYTASK_INLINE void relu_backward(const float* pre, const float* mask, const float* grad_out, float* grad_pre,
                                   int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) grad_pre[t] = (pre[t] > 0.0f ? grad_out[t] : 0.0f) * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) grad_pre[t] = pre[t] > 0.0f ? grad_out[t] : 0.0f;
}

// ---- Cross-entropy -----------------------------------------------------------------------------

// logits (T, V) -> returns the summed cross-entropy of the targets over the T positions,
// and turns the logits into d(loss)/d(logits) for a loss that is the sum times `weight`
// (1 / (B T): the member's mean over its batch).
COPYTASK_INLINE double crossentropy_forward_backward(float* logits, const int64_t* targets, int64_t target_stride,
                                                     float weight, int64_t T, int64_t V) {
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    float* p_t = logits + t * V;
    float row_max = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) row_max = std::max(row_max, p_t[v]);
    float total = 0;
    for (int64_t v = 0; v < V; ++v) total += std::exp(p_t[v] - row_max);
    const float log_total = row_max + std::log(total);
    const int64_t target = targets[t * target_stride];
    loss += static_cast<double>(log_total - p_t[target]);
    for (int64_t v = 0; v < V; ++v) p_t[v] = std::exp(p_t[v] - log_total) * weight;
    p_t[target] -= weight;
  }
  return loss;
}

}  // namespace copytask::cpu
