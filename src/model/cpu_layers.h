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
// The tags: the register width and the variant (the out-of-line products below are called
// by the variant).
struct LanesV4 {
  static constexpr int kWidth = 16;
  static constexpr CpuVariant kVariant = CpuVariant::x86_64_v4;
};
struct LanesV3 {
  static constexpr int kWidth = 8;
  static constexpr CpuVariant kVariant = CpuVariant::x86_64_v3;
};
struct LanesGeneric {
  static constexpr int kWidth = 8;
  static constexpr CpuVariant kVariant = CpuVariant::generic;
};
#define COPYTASK_KERNEL_BODY __attribute__((always_inline))

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define COPYTASK_CPU_VARIANTS 1
// prefer-vector-width=512: GCC's x86-64-v4 otherwise vectorises the elementwise loops 8 wide.
template <class Body>
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) auto run_x86_64_v4(const Body& body) {
  return body(LanesV4{});
}
template <class Body>
__attribute__((noinline, target("arch=x86-64-v3"))) auto run_x86_64_v3(const Body& body) {
  return body(LanesV3{});
}
#else
#define COPYTASK_CPU_VARIANTS 0
#endif
template <class Body>
__attribute__((noinline)) auto run_generic(const Body& body) {
  return body(LanesGeneric{});
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

template <class Vec>
COPYTASK_INLINE Vec load_vec(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}

// The register tile: rows r < R of C (R x O), columns o .. o + W NV for vectors of W floats
// (the last of the NV vectors may hold fewer: its lanes past O are computed from the next
// row's or the slack's floats and never stored), = (or +=, or = bias +) the sum over k < K
// of A[r * a_row + k * a_red] * Bm[k * O + column]. The R x NV accumulators stay in registers
// over the whole sum, so each loaded row of Bm serves R products and each broadcast element
// of A serves NV. Every element is the same sum in the same order whatever the tile (the
// first term, then one fused multiply-add per k in order), so the tiles, the variants'
// widths and the examples stacked in a product's rows all give the same bits.
template <class Vec, int R, int NV>
COPYTASK_INLINE void matmul_tile(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                 float* C, int64_t K, int64_t O, int64_t o, bool accumulate) {
  constexpr int W = sizeof(Vec) / sizeof(float);
  Vec acc[R][NV];
  const int64_t last_width = std::min<int64_t>(W, O - o - W * (NV - 1));
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t col = o + W * v;
      acc[r][v] = Vec{};
      if (v < NV - 1 || last_width == W) {
        if (accumulate) acc[r][v] = load_vec<Vec>(C + r * O + col);
        else if (bias) acc[r][v] = load_vec<Vec>(bias + col);
      } else {
        if (accumulate) acc[r][v] = load_partial<Vec>(C + r * O + col, last_width);
        else if (bias) acc[r][v] = load_partial<Vec>(bias + col, last_width);
      }
    }
  for (int64_t k = 0; k < K; ++k) {
    Vec b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load_vec<Vec>(Bm + k * O + o + W * v);
    for (int r = 0; r < R; ++r) {
      const float a = A[r * a_row + k * a_red];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      const int64_t col = o + W * v;
      if (v < NV - 1 || last_width == W) __builtin_memcpy(C + r * O + col, &acc[r][v], sizeof(Vec));
      else store_partial(C + r * O + col, acc[r][v], last_width);
    }
}

// Rows r < R of C, in tiles of up to MaxNV vectors.
template <class Vec, int R, int MaxNV>
COPYTASK_INLINE void matmul_rows(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                 float* C, int64_t K, int64_t O, bool accumulate) {
  constexpr int W = sizeof(Vec) / sizeof(float);
  for (int64_t o = 0; o < O; o += W * MaxNV) {
    const int64_t vectors = (std::min<int64_t>(W * MaxNV, O - o) + W - 1) / W;
    if constexpr (MaxNV >= 4) if (vectors == 4) { matmul_tile<Vec, R, 4>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); continue; }
    if constexpr (MaxNV >= 3) if (vectors == 3) { matmul_tile<Vec, R, 3>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); continue; }
    if constexpr (MaxNV >= 2) if (vectors == 2) { matmul_tile<Vec, R, 2>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate); continue; }
    matmul_tile<Vec, R, 1>(A, a_row, a_red, Bm, bias, C, K, O, o, accumulate);
  }
}

// All `rows` rows of C in tiles of Vec: blocks of five rows where they divide the rows and
// four do not (10 positions: 5 + 5, not 4 + 4 + 2), else of four and the rest; up to MaxNV
// vectors a tile (x86-64-v3: R x 2 of the 16 AVX2 registers; x86-64-v4: R x 4 of the 32
// AVX-512 ones).
template <class Vec, int MaxNV>
COPYTASK_INLINE void matmul_blocks(const float* A, int64_t a_row, int64_t a_red, const float* Bm, const float* bias,
                                   float* C, int64_t rows, int64_t K, int64_t O, bool accumulate) {
  int64_t r = 0;
  if (rows % 5 == 0 && rows % 4 != 0) {
    for (; r < rows; r += 5) matmul_rows<Vec, 5, MaxNV>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate);
    return;
  }
  for (; r + 4 <= rows; r += 4)
    matmul_rows<Vec, 4, MaxNV>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate);
  switch (rows - r) {
    case 3: matmul_rows<Vec, 3, MaxNV>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    case 2: matmul_rows<Vec, 2, MaxNV>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    case 1: matmul_rows<Vec, 1, MaxNV>(A + r * a_row, a_row, a_red, Bm, bias, C + r * O, K, O, accumulate); break;
    default: break;
  }
}

// The products out of line, one function per variant. Inlined at each of the step's call
// sites, their tiles made the per-example function 190 KB of code (x86-64-v3) and 490 KB
// (x86-64-v4), many times the 32 KB instruction cache; a call costs far less than a product.
#define COPYTASK_MATMUL_PARAMETERS                                                                                 \
  const float *A, int64_t a_row, int64_t a_red, const float *Bm, const float *bias, float *C, int64_t rows, int64_t K, \
      int64_t O, bool accumulate
#if COPYTASK_CPU_VARIANTS
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) inline void matmul_x86_64_v4(
    COPYTASK_MATMUL_PARAMETERS) {
  matmul_blocks<Vec16, 4>(A, a_row, a_red, Bm, bias, C, rows, K, O, accumulate);
}
__attribute__((noinline, target("arch=x86-64-v3"))) inline void matmul_x86_64_v3(COPYTASK_MATMUL_PARAMETERS) {
  matmul_blocks<Vec8, 2>(A, a_row, a_red, Bm, bias, C, rows, K, O, accumulate);
}
#endif
__attribute__((noinline)) inline void matmul_generic(COPYTASK_MATMUL_PARAMETERS) {
  matmul_blocks<Vec8, 2>(A, a_row, a_red, Bm, bias, C, rows, K, O, accumulate);
}

// Rows r < rows of C (rows x O) = (or +=, or = bias +) A (rows x K, element (r, k) at
// r * a_row + k * a_red) @ Bm (K x O), in the variant of the tag Lanes.
template <class Lanes>
COPYTASK_INLINE void matmul(COPYTASK_MATMUL_PARAMETERS) {
#if COPYTASK_CPU_VARIANTS
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v4) return matmul_x86_64_v4(A, a_row, a_red, Bm, bias, C, rows, K, O, accumulate);
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v3) return matmul_x86_64_v3(A, a_row, a_red, Bm, bias, C, rows, K, O, accumulate);
#endif
  matmul_generic(A, a_row, a_red, Bm, bias, C, rows, K, O, accumulate);
}

// ---- Exponential -----------------------------------------------------------------------

// e^x for each lane, within 2 ulp of the exact value for x <= 88 (0 below -87: the softmax
// and the cross-entropy take it of x - max <= 0, where such terms are below float's
// precision of the largest, which is 1); NaN stays NaN. x = n ln 2 + r with |r| <= ln 2 / 2
// (ln 2 in two parts, so r is exact to float precision), e^r by its Taylor polynomial to
// r^7 (error below 6e-9 there), times 2^n built in the exponent bits. The library's
// expf, one call per element, was most of the attention's and the loss's time.
template <class Vec>
COPYTASK_INLINE Vec exp_lanes(Vec x) {
  typedef int32_t IntVec __attribute__((vector_size(sizeof(Vec))));
  const Vec high = x > 88.0f ? Vec{} + 88.0f : x;
  const Vec n = (high * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5 * 2^23
  const Vec r = (high - n * 0.693359375f) - n * -2.12194440e-4f;
  Vec p = Vec{} + (1.0f / 5040);
  p = p * r + (1.0f / 720);
  p = p * r + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const IntVec n_int = __builtin_convertvector(x < -87.0f ? Vec{} : n, IntVec);
  const IntVec scale_bits = (n_int + 127) << 23;
  Vec scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  return x < -87.0f ? Vec{} : p * scale;
}

// x[e] = e^x[e] for e < n, eight at a time (the last few through a buffer: call it on a
// whole block of rows, not row by row).
COPYTASK_INLINE void exp_in_place(float* x, int64_t n) {
  int64_t e = 0;
  for (; e + 8 <= n; e += 8) {
    const Vec8 value = exp_lanes(load_vec<Vec8>(x + e));
    __builtin_memcpy(x + e, &value, sizeof value);
  }
  if (e < n) store_partial(x + e, exp_lanes(load_partial<Vec8>(x + e, n - e)), n - e);
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
// The sums over a row are taken eight lanes at a time and the lanes added at the end (a
// chain of D dependent additions per sum had made the layer norms a tenth of the step).

// The sum of the lanes.
COPYTASK_INLINE float lanes_sum(const Vec8& v) {
  return ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
}

// sum over d < n of x[d]. (The tail is added element by element: a partial vector built in
// memory would cost a failed store-to-load forwarding on every row.)
COPYTASK_INLINE float row_sum(const float* x, int64_t n) {
  Vec8 acc{};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) acc += load_vec<Vec8>(x + d);
  float sum = lanes_sum(acc);
  for (; d < n; ++d) sum += x[d];
  return sum;
}

// sum over d < n of x[d] * y[d].
COPYTASK_INLINE float row_dot(const float* x, const float* y, int64_t n) {
  Vec8 acc{};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) acc += load_vec<Vec8>(x + d) * load_vec<Vec8>(y + d);
  float sum = lanes_sum(acc);
  for (; d < n; ++d) sum += x[d] * y[d];
  return sum;
}

// sum over d < n of (x[d] - mean)^2.
COPYTASK_INLINE float row_squared_deviation(const float* x, float mean, int64_t n) {
  Vec8 acc{};
  int64_t d = 0;
  for (; d + 8 <= n; d += 8) {
    const Vec8 deviation = load_vec<Vec8>(x + d) - mean;
    acc += deviation * deviation;
  }
  float sum = lanes_sum(acc);
  for (; d < n; ++d) sum += (x[d] - mean) * (x[d] - mean);
  return sum;
}

// Over D (eps 1e-5, biased variance, as torch::layer_norm); keeps the normalised rows and
// 1/std for the backward.
COPYTASK_INLINE void layernorm_forward(const float* x, const float* weight, const float* bias, float* normalized,
                                       float* rstd, float* out, int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    const float* x_t = x + t * D;
    const float mean = row_sum(x_t, D) / static_cast<float>(D);
    const float variance = row_squared_deviation(x_t, mean, D) / static_cast<float>(D);
    const float r = 1.0f / std::sqrt(variance + 1e-5f);
    rstd[t] = r;
    float* n_t = normalized + t * D;
    float* out_t = out + t * D;
    for (int64_t d = 0; d < D; ++d) {
      const float n = (x_t[d] - mean) * r;
      n_t[d] = n;
      out_t[d] = n * weight[d] + bias[d];
    }
  }
}

// grad_x (T, D) += the gradient through the layer norm of grad_out; the weight and bias
// gradients accumulate. scratch: D + 8 floats.
COPYTASK_INLINE void layernorm_backward(const float* normalized, const float* rstd, const float* weight,
                                        const float* grad_out, float* grad_weight, float* grad_bias, float* grad_x,
                                        int64_t T, int64_t D, float* scratch) {
  for (int64_t t = 0; t < T; ++t) {
    const float* n_t = normalized + t * D;
    const float* g_t = grad_out + t * D;
    float* gn = scratch;  // d(normalized) = grad_out * weight
    for (int64_t d = 0; d < D; ++d) {
      grad_weight[d] += g_t[d] * n_t[d];
      grad_bias[d] += g_t[d];
      gn[d] = g_t[d] * weight[d];
    }
    // The means of d(normalized) and of d(normalized) * normalized.
    const float mean_g = row_sum(gn, D) / static_cast<float>(D);
    const float mean_gn = row_dot(gn, n_t, D) / static_cast<float>(D);
    float* gx_t = grad_x + t * D;
    const float r = rstd[t];
    for (int64_t d = 0; d < D; ++d) gx_t[d] += r * (gn[d] - mean_g - n_t[d] * mean_gn);
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
// The dot products of a query with the keys (and of an output gradient with the values) are
// taken eight keys at a time, over the head's keys transposed: each key's sum still runs over
// the head's dimensions in order, but eight of them advance together in one register.

// Floats of the transposed head the attention functions below take as scratch (head_t): Dh
// rows of T, and the slack the eight-key reads run into.
COPYTASK_INLINE int64_t attention_scratch_floats(int64_t T, int64_t Dh) { return Dh * T + 8; }

// head_t (Dh, T) = part `part` (1: k, 2: v) of head h of every position, transposed.
COPYTASK_INLINE void head_transposed(const float* qkv, int64_t part, int64_t h, float* head_t, int64_t T, int64_t H,
                                     int64_t Dh) {
  const int64_t D = H * Dh;
  for (int64_t j = 0; j < T; ++j) {
    const float* row = qkv + j * 3 * D + part * D + h * Dh;
    for (int64_t d = 0; d < Dh; ++d) head_t[d * T + j] = row[d];
  }
}

// out[j] = x . (column j of head_t) for j < n: x (Dh), head_t (Dh, T).
COPYTASK_INLINE void dots_with_columns(const float* x, const float* head_t, float* out, int64_t n, int64_t T,
                                       int64_t Dh) {
  for (int64_t j = 0; j < n; j += 8) {
    Vec8 acc{};
    for (int64_t d = 0; d < Dh; ++d) acc += x[d] * load_vec<Vec8>(head_t + d * T + j);
    if (j + 8 <= n) __builtin_memcpy(out + j, &acc, sizeof acc);
    else store_partial(out + j, acc, n - j);
  }
}

// Head h's softmax and mix: its logits (T, T) in weights, less their row's maximum (-inf for
// unseen keys), become the softmax (0 for unseen keys); mixed's head h columns += the
// weights (times the dropout mask, when given) @ v.
COPYTASK_INLINE void softmax_mix_head(const float* qkv, bool causal, const float* dropout, float* weights,
                                      float* mixed, int64_t h, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  exp_in_place(weights + h * T * T, T * T);  // e^-inf = 0
  for (int64_t i = 0; i < T; ++i) {
    const int64_t seen = causal ? i + 1 : T;
    float* w_i = weights + (h * T + i) * T;
    float total = 0;
    for (int64_t j = 0; j < seen; ++j) total += w_i[j];
    const float inverse_total = 1.0f / total;
    float* out_i = mixed + i * D + h * Dh;
    const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
    for (int64_t j = 0; j < seen; ++j) {
      w_i[j] *= inverse_total;
      const float kept = drop_i ? w_i[j] * drop_i[j] : w_i[j];
      const float* v_j = qkv + j * 3 * D + 2 * D + h * Dh;
      for (int64_t d = 0; d < Dh; ++d) out_i[d] += kept * v_j[d];
    }
  }
}

// weights[h, i, j] = softmax over j of (q_i . k_j / sqrt(Dh) + bias[h, i, j]), j <= i only
// when causal (the others 0); mixed (T, D) = the weights (times the dropout mask, when
// given) @ v, head by head. qkv: (T, 3D); bias, dropout, weights: (H, T, T); head_t:
// attention_scratch_floats.
COPYTASK_INLINE void attention_forward(const float* qkv, const float* bias, bool causal, const float* dropout,
                                       float* weights, float* mixed, float* head_t, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  for (int64_t t = 0; t < T * D; ++t) mixed[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    head_transposed(qkv, 1, h, head_t, T, H, Dh);
    // The logits less their row's maximum (-inf for unseen keys), then e^ of the whole head's.
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;  // keys 0 .. seen-1
      const float* q_i = qkv + i * 3 * D + h * Dh;
      const float* bias_i = bias ? bias + (h * T + i) * T : nullptr;
      float* w_i = weights + (h * T + i) * T;
      dots_with_columns(q_i, head_t, w_i, seen, T, Dh);
      float row_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j) {
        const float score = bias_i ? w_i[j] * scale + bias_i[j] : w_i[j] * scale;
        w_i[j] = score;
        row_max = std::max(row_max, score);
      }
      for (int64_t j = 0; j < seen; ++j) w_i[j] -= row_max;
      for (int64_t j = seen; j < T; ++j) w_i[j] = -std::numeric_limits<float>::infinity();
    }
    softmax_mix_head(qkv, causal, dropout, weights, mixed, h, T, H, Dh);
  }
}

// The start of the backward of the weights @ v, for query i of head h: d(weights)_j
// (= (g_i . v_j) times the dropout mask, to grad_weights) for j < seen, dv_j += kept_j g_i;
// returns sum_j w_j d(weights)_j, for the softmax's backward. values_t: the head's values
// transposed (head_transposed).
COPYTASK_INLINE float mix_backward_row(const float* qkv, const float* w_i, const float* drop_i, const float* g_i,
                                       const float* values_t, float* grad_qkv, float* grad_weights, int64_t seen,
                                       int64_t T, int64_t D, int64_t h, int64_t Dh) {
  dots_with_columns(g_i, values_t, grad_weights, seen, T, Dh);
  float weighted = 0;
  for (int64_t j = 0; j < seen; ++j) {
    const float drop = drop_i ? drop_i[j] : 1.0f;
    float* gv_j = grad_qkv + j * 3 * D + 2 * D + h * Dh;
    grad_weights[j] *= drop;
    weighted += w_i[j] * grad_weights[j];
    const float kept = w_i[j] * drop;
    for (int64_t d = 0; d < Dh; ++d) gv_j[d] += kept * g_i[d];
  }
  return weighted;
}

// From grad_mixed (T, D): grad_qkv (T, 3D) = the gradient at q | k | v (set, not added);
// grad_bias (H, T, T), when given, += the gradient at the scores before the scaling, which
// is the score bias's. scratch: T + attention_scratch_floats floats.
COPYTASK_INLINE void attention_backward(const float* qkv, const float* weights, bool causal, const float* dropout,
                                        const float* grad_mixed, float* grad_qkv, float* grad_bias, float* scratch,
                                        int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  float* values_t = scratch + T;
  for (int64_t t = 0; t < 3 * T * D; ++t) grad_qkv[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    head_transposed(qkv, 2, h, values_t, T, H, Dh);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      const float* w_i = weights + (h * T + i) * T;
      const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
      const float weighted = mix_backward_row(qkv, w_i, drop_i, grad_mixed + i * D + h * Dh, values_t, grad_qkv,
                                              scratch, seen, T, D, h, Dh);
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
// head_t: attention_scratch_floats.
COPYTASK_INLINE void attention_scores(const float* qkv, bool causal, float* scores, float* head_t, int64_t T, int64_t H,
                                      int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  for (int64_t h = 0; h < H; ++h) {
    head_transposed(qkv, 1, h, head_t, T, H, Dh);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      float* s_i = scores + (h * T + i) * T;
      dots_with_columns(qkv + i * 3 * D + h * Dh, head_t, s_i, seen, T, Dh);
      for (int64_t j = 0; j < seen; ++j) s_i[j] *= scale;
      for (int64_t j = seen; j < T; ++j) s_i[j] = 0.0f;
    }
  }
}

// weights (H, T, T): the logits in, their softmax over the seen keys out (0 beyond); mixed
// (T, D) = the weights (times the dropout mask, when given) @ v, head by head.
COPYTASK_INLINE void attention_softmax_mix(const float* qkv, bool causal, const float* dropout, float* weights,
                                           float* mixed, int64_t T, int64_t H, int64_t Dh) {
  for (int64_t t = 0; t < T * H * Dh; ++t) mixed[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      float* w_i = weights + (h * T + i) * T;
      float row_max = -std::numeric_limits<float>::infinity();
      for (int64_t j = 0; j < seen; ++j) row_max = std::max(row_max, w_i[j]);
      for (int64_t j = 0; j < seen; ++j) w_i[j] -= row_max;
      for (int64_t j = seen; j < T; ++j) w_i[j] = -std::numeric_limits<float>::infinity();
    }
    softmax_mix_head(qkv, causal, dropout, weights, mixed, h, T, H, Dh);
  }
}

// From grad_mixed (T, D): grad_qkv (T, 3D) set, its v part the gradient at v and its q and k
// parts zero; grad_logits (H, T, T) = the gradient at the softmax's input (0 for unseen
// keys). scratch: T + attention_scratch_floats floats.
COPYTASK_INLINE void attention_softmax_backward(const float* qkv, const float* weights, bool causal,
                                                const float* dropout, const float* grad_mixed, float* grad_qkv,
                                                float* grad_logits, float* scratch, int64_t T, int64_t H,
                                                int64_t Dh) {
  const int64_t D = H * Dh;
  float* values_t = scratch + T;
  for (int64_t t = 0; t < 3 * T * D; ++t) grad_qkv[t] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    head_transposed(qkv, 2, h, values_t, T, H, Dh);
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      const float* w_i = weights + (h * T + i) * T;
      const float* drop_i = dropout ? dropout + (h * T + i) * T : nullptr;
      const float weighted = mix_backward_row(qkv, w_i, drop_i, grad_mixed + i * D + h * Dh, values_t, grad_qkv,
                                              scratch, seen, T, D, h, Dh);
      float* gl_i = grad_logits + (h * T + i) * T;
      for (int64_t j = 0; j < seen; ++j) gl_i[j] = w_i[j] * (scratch[j] - weighted);
      for (int64_t j = seen; j < T; ++j) gl_i[j] = 0.0f;
    }
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
// (1 / (B T): the member's mean over its batch). scratch: T floats.
COPYTASK_INLINE double crossentropy_forward_backward(float* logits, const int64_t* targets, int64_t target_stride,
                                                     float weight, int64_t T, int64_t V, float* scratch) {
  // The logits less their row's maximum, the target's kept in scratch (T floats), then e^ of all.
  for (int64_t t = 0; t < T; ++t) {
    float* p_t = logits + t * V;
    float row_max = -std::numeric_limits<float>::infinity();
    for (int64_t v = 0; v < V; ++v) row_max = std::max(row_max, p_t[v]);
    for (int64_t v = 0; v < V; ++v) p_t[v] -= row_max;
    scratch[t] = p_t[targets[t * target_stride]];
  }
  exp_in_place(logits, T * V);
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    float* p_t = logits + t * V;
    float total = 0;
    for (int64_t v = 0; v < V; ++v) total += p_t[v];
    loss += static_cast<double>(std::log(total) - scratch[t]);  // -log softmax of the target
    const float to_gradient = weight / total;                     // softmax = e^(logit - max) / total
    for (int64_t v = 0; v < V; ++v) p_t[v] *= to_gradient;
    p_t[targets[t * target_stride]] -= weight;
  }
  return loss;
}

}  // namespace copytask::cpu
