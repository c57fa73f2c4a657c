#pragma once
// The attention of a group of 16 examples with the examples across a vector's lanes: each
// element (a key's score from a query, a row's column of q) of the 16 examples side by side,
// lane e example e's. One example at a time (cpu_layers.h), T = 10 positions fill 10 of a
// 16-lane product's lanes and every multiply-add of a ten-row tile needs its own broadcast
// load: on an AVX-512 core the attention's products ran at about a quarter of the FMA peak,
// where across the lanes every multiply-add fills the vector whatever T and Dh, and loads a
// vector for several (scripts/mca_driver.cpp --products, docs/performance.md).
//
// Every number is the one the example-at-a-time attention gives, bit for bit: each lane runs
// the operations of attention_forward / attention_backward in their order (the products'
// sums from 0 over k in order, one multiply-add a k; the softmax's as softmax_key_major's and
// softmax_backward_key_major's). model/fused_cpu.cpp transposes the examples' q | k | v and
// upstream gradients into lanes before and the results out after (to_lanes, from_lanes).
//
// Layout "lanes": an array of n elements of the 16 examples is n x 16 floats, element i's at
// 16 i .. 16 i + 15, lane e example e's; in a partial group the lanes past its examples hold
// zeros (their numbers are computed and never read back). Shapes as in cpu_layers.h: T
// positions, H heads of Dh, D = H Dh; the weights key-major (H, T keys, T queries).
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>

#include "model/cpu_layers.h"

namespace copytask::cpu {

// The examples a lanes array holds side by side.
constexpr int64_t kExampleLanes = 16;

// The register a variant computes lanes in: all 16 with AVX-512, eight at a time otherwise.
template <class Lanes>
using LanesChunk = std::conditional_t<Lanes::kWidth == 16, Vec16, Vec8>;

// ---- Into and out of the lanes --------------------------------------------------------

namespace lanes_detail {
// One round of an N x N transposition (N = 8 or 16, vectors of N floats): for rows i and i +
// B (bit B of i clear), the B x B blocks off the diagonal swapped, which swaps bit B of the
// row with bit B of the column; the rounds B = 1, 2, 4 (, 8) swap every bit: a[i][j] becomes
// a[j][i].
template <class Vec, int N, int B, size_t... K>
COPYTASK_INLINE Vec low_half(Vec x, Vec y, std::index_sequence<K...>) {
  return __builtin_shufflevector(x, y, ((K & B) == 0 ? static_cast<int>(K) : static_cast<int>(N + K - B))...);
}
template <class Vec, int N, int B, size_t... K>
COPYTASK_INLINE Vec high_half(Vec x, Vec y, std::index_sequence<K...>) {
  return __builtin_shufflevector(x, y, ((K & B) == 0 ? static_cast<int>(K + B) : static_cast<int>(N + K))...);
}
template <class Vec, int N, int B>
COPYTASK_INLINE void transpose_round(Vec (&a)[N]) {
  for (int i = 0; i < N; ++i)
    if ((i & B) == 0) {
      const Vec x = a[i], y = a[i + B];
      a[i] = low_half<Vec, N, B>(x, y, std::make_index_sequence<N>{});
      a[i + B] = high_half<Vec, N, B>(x, y, std::make_index_sequence<N>{});
    }
}
}  // namespace lanes_detail

// a[i][j] becomes a[j][i], for N vectors of N floats (Vec8 or Vec16): N log2(N) two-source
// shuffles, each within the registers of the variant that picks that N.
template <class Vec, int N>
COPYTASK_INLINE void transpose_square(Vec (&a)[N]) {
  lanes_detail::transpose_round<Vec, N, 1>(a);
  lanes_detail::transpose_round<Vec, N, 2>(a);
  lanes_detail::transpose_round<Vec, N, 4>(a);
  if constexpr (N == 16) lanes_detail::transpose_round<Vec, N, 8>(a);
}

// out (n elements, lanes) = element i of example e at in[e * stride + i] for the first
// `count` examples, 0 in the other lanes. In blocks of W elements x W examples, W the
// variant's width (16 x 16 with AVX-512; 8 x 8 with AVX2, whose registers a 16-wide shuffle
// does not fit: compiled for AVX2 it had taken seven times as long).
template <class Lanes>
COPYTASK_INLINE void to_lanes(const float* in, int64_t stride, int64_t count, int64_t n, float* out) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  int64_t i = 0;
  for (; i + W <= n; i += W)
    for (int64_t e0 = 0; e0 < kExampleLanes; e0 += W) {
      Vec a[W];
      for (int e = 0; e < W; ++e) a[e] = e0 + e < count ? load_vec<Vec>(in + (e0 + e) * stride + i) : Vec{};
      transpose_square<Vec, W>(a);
      for (int c = 0; c < W; ++c) store_vec(out + (i + c) * kExampleLanes + e0, a[c]);
    }
  for (; i < n; ++i)
    for (int64_t e = 0; e < kExampleLanes; ++e) out[i * kExampleLanes + e] = e < count ? in[e * stride + i] : 0.0f;
}

// out[e * stride + i] = element i's lane e of in (n elements, lanes), for the first `count`
// examples; in blocks as to_lanes.
template <class Lanes>
COPYTASK_INLINE void from_lanes(const float* in, int64_t n, int64_t count, float* out, int64_t stride) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  // Each row in stores of eight floats: rows T 3D or T D floats long start 32 bytes into a
  // cache line as often as not, and a 64-byte store across two lines cost twice a
  // transposition (fused_cpu.cpp aligns the workspace to 64 bytes).
  auto store_row = [&](int64_t e, int64_t i, Vec row) COPYTASK_KERNEL_BODY {
    if constexpr (W == 16) {
      store_vec(out + e * stride + i, __builtin_shufflevector(row, row, 0, 1, 2, 3, 4, 5, 6, 7));
      store_vec(out + e * stride + i + 8, __builtin_shufflevector(row, row, 8, 9, 10, 11, 12, 13, 14, 15));
    } else {
      store_vec(out + e * stride + i, row);
    }
  };
  int64_t i = 0;
  for (; i + W <= n; i += W)
    for (int64_t e0 = 0; e0 < count; e0 += W) {
      Vec a[W];
      for (int c = 0; c < W; ++c) a[c] = load_vec<Vec>(in + (i + c) * kExampleLanes + e0);
      transpose_square<Vec, W>(a);
      // A whole block's stores unrolled: a[] indexed at a run-time e would live on the stack.
      if (e0 + W <= count)
        for (int e = 0; e < W; ++e) store_row(e0 + e, i, a[e]);
      else
        for (int64_t e = 0; e0 + e < count; ++e) store_row(e0 + e, i, a[e]);
    }
  for (; i < n; ++i)
    for (int64_t e = 0; e < count; ++e) out[e * stride + i] = in[i * kExampleLanes + e];
}

// ---- Products across the lanes --------------------------------------------------------

// C(r, o) = (or +=) sum over k < K of A(r, k) B(k, o) for r < rows, o < O, every element a
// lanes vector: A(r, k) at A + 16 (r a_row + k a_red), B(k, o) at B + 16 (k b_row + o b_col),
// C(r, o) at C + 16 (r c_row + o c_col). Each lane's sum from 0 (or C's value) over k in order,
// one multiply-add a k (fused where the variant has FMA), as matmul_tile's.
struct LanesProduct {
  const float* A;
  int64_t a_row, a_red;
  const float* B;
  int64_t b_row, b_col;
  float* C;
  int64_t c_row, c_col;
  int64_t rows, K, O;
  bool accumulate = false;  // C += A B
};

// The tile: rows r0 .. r0 + R - 1 and columns o0 .. o0 + NO - 1 of C, lanes lane .. lane + W
// - 1: R x NO accumulators, and each k loads R vectors of A and NO of B for R NO
// multiply-adds.
template <class Vec, int R, int NO, bool Accumulate>
COPYTASK_INLINE void lanes_tile(const LanesProduct& p, int64_t r0, int64_t o0, int64_t lane) {
  Vec acc[R][NO];
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < NO; ++o)
      acc[r][o] = Accumulate ? load_vec<Vec>(p.C + lane + kExampleLanes * ((r0 + r) * p.c_row + (o0 + o) * p.c_col))
                             : Vec{};
  const float* a_k = p.A + lane + kExampleLanes * r0 * p.a_row;
  const float* b_k = p.B + lane + kExampleLanes * o0 * p.b_col;
  for (int64_t k = 0; k < p.K; ++k, a_k += kExampleLanes * p.a_red, b_k += kExampleLanes * p.b_row) {
    Vec a[R];
    for (int r = 0; r < R; ++r) a[r] = load_vec<Vec>(a_k + kExampleLanes * r * p.a_row);
    for (int o = 0; o < NO; ++o) {
      const Vec b = load_vec<Vec>(b_k + kExampleLanes * o * p.b_col);
      for (int r = 0; r < R; ++r) acc[r][o] += a[r] * b;
    }
  }
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < NO; ++o)
      store_vec(p.C + lane + kExampleLanes * ((r0 + r) * p.c_row + (o0 + o) * p.c_col), acc[r][o]);
}

// The tile a variant's registers hold (accumulators, R vectors of A and one of B): 5 x 4 of
// AVX-512's 32, 2 x 5 of AVX2's 16, 2 x 2 vectors of eight (two SSE registers each) of the
// generic target's 16.
template <class Lanes>
struct LanesTileShape {
  static constexpr int R = Lanes::kVariant == CpuVariant::x86_64_v4 ? 5 : 2;
  static constexpr int NO = Lanes::kVariant == CpuVariant::x86_64_v4   ? 4
                            : Lanes::kVariant == CpuVariant::x86_64_v3 ? 5
                                                                       : 2;
};

// Rows r0 .. r0 + R - 1, columns o .. O - 1 of a product across the lanes: NO columns a tile,
// the last few in one tile of fewer; tile.template run<Vec, R, NO>(r0, o, lane) computes one.
template <class Vec, int R, int NO, class Tile>
COPYTASK_INLINE void lanes_tile_row(const Tile& tile, int64_t r0, int64_t o, int64_t O, int64_t lane) {
  for (; o + NO <= O; o += NO) tile.template run<Vec, R, NO>(r0, o, lane);
  if constexpr (NO > 1)
    if (o < O) lanes_tile_row<Vec, R, NO - 1>(tile, r0, o, O, lane);
}

// Every tile of a product across the lanes, C (rows, O): the variant's LanesTileShape, then
// single rows, W lanes at a time. Shared by the products of two lanes operands (lanes_product)
// and of lanes by broadcast weights (cpu_lanes_layers.h, lanes_linear).
template <class Lanes, class Tile>
COPYTASK_INLINE void lanes_tiles(const Tile& tile, int64_t rows, int64_t O) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float), R = LanesTileShape<Lanes>::R, NO = LanesTileShape<Lanes>::NO;
  // The lanes innermost: where a vector is half the 16 lanes (AVX2's), a row's two halves are
  // then written one after the other, each cache line whole while it is in L1.
  int64_t r = 0;
  for (; r + R <= rows; r += R)
    for (int64_t lane = 0; lane < kExampleLanes; lane += W) lanes_tile_row<Vec, R, NO>(tile, r, 0, O, lane);
  for (; r < rows; ++r)
    for (int64_t lane = 0; lane < kExampleLanes; lane += W) lanes_tile_row<Vec, 1, NO>(tile, r, 0, O, lane);
}

// lanes_tile as lanes_tiles calls it, its start (0 or C) chosen once, outside the tiles.
template <bool Accumulate>
struct LanesProductTile {
  const LanesProduct& p;
  template <class Vec, int R, int NO>
  COPYTASK_INLINE void run(int64_t r0, int64_t o0, int64_t lane) const {
    lanes_tile<Vec, R, NO, Accumulate>(p, r0, o0, lane);
  }
};

template <class Lanes>
COPYTASK_INLINE void lanes_product_tiles(const LanesProduct& p) {
  if (p.accumulate) lanes_tiles<Lanes>(LanesProductTile<true>{p}, p.rows, p.O);
  else lanes_tiles<Lanes>(LanesProductTile<false>{p}, p.rows, p.O);
}

// The product out of line, one function per variant, as matmul's (cpu_layers.h): inlined at
// the attention's six call sites, its tiles had grown the step's function by a third.
#if COPYTASK_CPU_VARIANTS
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) inline void lanes_product_x86_64_v4(
    const LanesProduct& p) {
  lanes_product_tiles<LanesV4>(p);
}
__attribute__((noinline, target("arch=x86-64-v3"))) inline void lanes_product_x86_64_v3(const LanesProduct& p) {
  lanes_product_tiles<LanesV3>(p);
}
#endif
__attribute__((noinline)) inline void lanes_product_generic(const LanesProduct& p) {
  lanes_product_tiles<LanesGeneric>(p);
}

// The product in the variant of the tag Lanes.
template <class Lanes>
COPYTASK_INLINE void lanes_product(const LanesProduct& p) {
#if COPYTASK_CPU_VARIANTS
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v4) return lanes_product_x86_64_v4(p);
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v3) return lanes_product_x86_64_v3(p);
#endif
  lanes_product_generic(p);
}

// ---- The attention across the lanes ----------------------------------------------------

// A head's softmax, key-major in lanes: softmax_key_major's operations lane by lane, with the
// examples across the lanes where it had the queries. w_l (T keys, T queries) = the softmax
// over each query's seen keys of logit(Vec{}, e, lane) for element e = j T + i (0 for the
// unseen keys); kept_l = w_l times dropout_l where that is given. logit reads nothing this
// writes.
template <class Lanes, class Logit>
COPYTASK_INLINE void softmax_lanes(const Logit& logit, bool causal, const float* dropout_l, float* w_l, float* kept_l,
                                   int64_t T) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  const float infinity = std::numeric_limits<float>::infinity();
  for (int64_t lane = 0; lane < kExampleLanes; lane += W)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;  // the keys j < seen
      auto at = [&](int64_t j) COPYTASK_KERNEL_BODY { return kExampleLanes * (j * T + i) + lane; };
      Vec row_max = Vec{} - infinity;
      for (int64_t j = 0; j < T; ++j) {
        const Vec x = rounded<Lanes>(logit(Vec{}, j * T + i, lane));
        store_vec(w_l + at(j), x);
        if (j < seen) row_max = row_max < x ? x : row_max;  // std::max
      }
      Vec total = Vec{};
      for (int64_t j = 0; j < T; ++j) {
        const Vec e = j < seen ? rounded<Lanes>(exp_lanes(load_vec<Vec>(w_l + at(j)) - row_max)) : Vec{};
        store_vec(w_l + at(j), e);
        total = total + e;
      }
      const Vec inverse_total = 1.0f / total;
      for (int64_t j = 0; j < T; ++j) {
        const Vec w = load_vec<Vec>(w_l + at(j)) * inverse_total;
        store_vec(w_l + at(j), w);
        if (dropout_l) store_vec(kept_l + at(j), w * load_vec<Vec>(dropout_l + at(j)));
      }
    }
}

// Its backward, softmax_backward_key_major's lane by lane: grad_logits_l (when given) = w
// (d(weights) - sum over the seen keys of w d(weights), in the keys' order) for the seen
// keys, 0 for the others, where d(weights) = grad_kept_l times the dropout mask (when given,
// rounded); grad_scores_l = that times scale.
template <class Lanes>
COPYTASK_INLINE void softmax_backward_lanes(const float* w_l, bool causal, const float* dropout_l,
                                            const float* grad_kept_l, float* grad_logits_l, float* grad_scores_l,
                                            float scale, int64_t T) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  for (int64_t lane = 0; lane < kExampleLanes; lane += W)
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      auto at = [&](int64_t j) COPYTASK_KERNEL_BODY { return kExampleLanes * (j * T + i) + lane; };
      auto grad_weights = [&](int64_t j) COPYTASK_KERNEL_BODY {
        const Vec g = load_vec<Vec>(grad_kept_l + at(j));
        return dropout_l ? rounded<Lanes>(g * load_vec<Vec>(dropout_l + at(j))) : g;
      };
      Vec weighted = Vec{};
      for (int64_t j = 0; j < seen; ++j) weighted = weighted + load_vec<Vec>(w_l + at(j)) * grad_weights(j);
      for (int64_t j = 0; j < T; ++j) {
        const Vec g = j < seen ? load_vec<Vec>(w_l + at(j)) * (grad_weights(j) - weighted) : Vec{};
        if (grad_logits_l) store_vec(grad_logits_l + at(j), g);
        store_vec(grad_scores_l + at(j), g * scale);
      }
    }
}

// The scratch the two functions below take: three (T, T) matrices in lanes.
COPYTASK_INLINE int64_t attention_lanes_scratch_floats(int64_t T) { return 3 * T * T * kExampleLanes; }

// attention_forward of the group's examples across the lanes: weights_l (H, T keys, T queries)
// = the softmax of q_i . k_j / sqrt(Dh) + bias (j <= i only when causal), mixed_l (T, D) = the
// weights (times the dropout mask when given) @ v, head by head. qkv_l (T, 3D); bias_l (H, T
// keys, T queries) or null; dropout_l (H, T keys, T queries) or null; all in lanes.
template <class Lanes>
COPYTASK_INLINE void attention_forward_lanes(const float* qkv_l, const float* bias_l, bool causal,
                                             const float* dropout_l, float* weights_l, float* mixed_l, float* scratch_l,
                                             int64_t T, int64_t H, int64_t Dh) {
  using Vec = LanesChunk<Lanes>;
  const int64_t D = H * Dh, TT = T * T, L = kExampleLanes;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  float* scores = scratch_l;          // (T keys, T queries)
  float* kept = scratch_l + L * TT;   // the weights times the mask
  for (int64_t h = 0; h < H; ++h) {
    const float* q = qkv_l + L * h * Dh;
    const float* k = qkv_l + L * (D + h * Dh);
    const float* v = qkv_l + L * (2 * D + h * Dh);
    // scores (j, i) = sum over d of k(j, d) q(i, d).
    lanes_product<Lanes>(LanesProduct{k, 3 * D, 1, q, 1, 3 * D, scores, T, 1, T, Dh, T});
    float* w = weights_l + L * h * TT;
    const float* drop = dropout_l ? dropout_l + L * h * TT : nullptr;
    // Two functions, as in attention_forward: the biased logit is one fused multiply-add.
    if (bias_l) {
      const float* bias = bias_l + L * h * TT;
      softmax_lanes<Lanes>([&](Vec, int64_t e, int64_t lane) COPYTASK_KERNEL_BODY {
        return load_vec<Vec>(scores + L * e + lane) * scale + load_vec<Vec>(bias + L * e + lane);
      }, causal, drop, w, kept, T);
    } else {
      softmax_lanes<Lanes>([&](Vec, int64_t e, int64_t lane) COPYTASK_KERNEL_BODY {
        return load_vec<Vec>(scores + L * e + lane) * scale;
      }, causal, drop, w, kept, T);
    }
    // mixed (i, d) = sum over j of kept(j, i) v(j, d).
    lanes_product<Lanes>(LanesProduct{drop ? kept : w, 1, T, v, 3 * D, 1, mixed_l + L * h * Dh, D, 1, T, T, Dh});
  }
}

// attention_backward of the group's examples across the lanes, from grad_mixed_l (T, D):
// grad_qkv_l (T, 3D) = the gradient at q | k | v (set); grad_logits_l (H, T keys, T
// queries), when given, = the gradient at the logits (the score bias's). weights_l and
// dropout_l as attention_forward_lanes left and read them.
template <class Lanes>
COPYTASK_INLINE void attention_backward_lanes(const float* qkv_l, const float* weights_l, bool causal,
                                              const float* dropout_l, const float* grad_mixed_l, float* grad_qkv_l,
                                              float* grad_logits_l, float* scratch_l, int64_t T, int64_t H,
                                              int64_t Dh) {
  const int64_t D = H * Dh, TT = T * T, L = kExampleLanes;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  float* grad_kept = scratch_l;              // d(loss)/d(kept weights) (T keys, T queries)
  float* kept = scratch_l + L * TT;          // the weights times the mask
  float* grad_scores = scratch_l + 2 * L * TT;
  for (int64_t h = 0; h < H; ++h) {
    const float* q = qkv_l + L * h * Dh;
    const float* k = qkv_l + L * (D + h * Dh);
    const float* v = qkv_l + L * (2 * D + h * Dh);
    const float* g = grad_mixed_l + L * h * Dh;
    const float* w = weights_l + L * h * TT;
    const float* drop = dropout_l ? dropout_l + L * h * TT : nullptr;
    // d(kept) (j, i) = sum over d of v(j, d) g(i, d).
    lanes_product<Lanes>(LanesProduct{v, 3 * D, 1, g, 1, D, grad_kept, T, 1, T, Dh, T});
    if (drop)
      for (int64_t e = 0; e < L * TT; ++e) kept[e] = w[e] * drop[e];
    // dv (j, d) = sum over i of kept(j, i) g(i, d).
    float* grad_q = grad_qkv_l + L * h * Dh;
    float* grad_k = grad_qkv_l + L * (D + h * Dh);
    float* grad_v = grad_qkv_l + L * (2 * D + h * Dh);
    lanes_product<Lanes>(LanesProduct{drop ? kept : w, T, 1, g, D, 1, grad_v, 3 * D, 1, T, T, Dh});
    softmax_backward_lanes<Lanes>(w, causal, drop, grad_kept, grad_logits_l ? grad_logits_l + L * h * TT : nullptr,
                                  grad_scores, scale, T);
    // dq (i, d) = sum over j of d(scores)(j, i) k(j, d); dk (j, d) = sum over i of d(scores)(j, i) q(i, d).
    lanes_product<Lanes>(LanesProduct{grad_scores, 1, T, k, 3 * D, 1, grad_q, 3 * D, 1, T, T, Dh});
    lanes_product<Lanes>(LanesProduct{grad_scores, T, 1, q, 3 * D, 1, grad_k, 3 * D, 1, T, T, Dh});
  }
}

}  // namespace copytask::cpu
