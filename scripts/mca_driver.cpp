// scripts/mca_driver.cpp: the fused CPU step's hot loops, alone, for scripts/mca_model.sh.
// Not part of the build, the tests or CI. It includes src/model/cpu_layers.h unchanged and
// compiles its kernels the way the build does (-O3 -std=c++17 -fno-math-errno, each variant
// through the same target attributes as the header's run_x86_64_v3 / run_x86_64_v4), one
// out-of-line function per distinct inner loop, so that each function's innermost loop is
// that kernel's hot loop:
//
//   tile_v3_w8_r<R>_nv<NV>: matmul_tile's k-loop (R rows x NV vectors of accumulators, one
//     FMA each per k), the only loop of every matrix product, alone, to be timed;
//   softmax_<variant>: attention_forward of one head with its products taken out (the
//     scaled logits, the maxima, e^x, the sums and the normalisation, key-major);
//   softmax_backward_<variant>: softmax_backward_key_major (the sums of w d(weights) and the
//     gradient);
//   crossentropy_<variant>: crossentropy_forward_backward (T = 10 rows of V = 11).
//
// matmul_x86_64_v3 / matmul_x86_64_v4 themselves are also emitted (kept through a pointer):
// their loops are the ones the script models, and it checks that their instructions are the
// build's (build/.../fused_cpu.cpp.o).
//
// Run with arguments, it times the x86-64-v3 tiles on this CPU (one thread) in cycles per
// k iteration, calibrated by a chain of dependent vaddps whose latency is given (3 cycles on
// Zen 2/3/4; pass another with --add-latency). See scripts/mca_model.sh. With AVX-512 it also
// times the reference study's products of a group through matmul_x86_64_v4, and the same
// products of 16 examples with the examples across the lanes (a prototype of that layout for
// the whole step, timed only: the attention's form of it is src/model/cpu_attention_lanes.h);
// --products prints them product by product, side by side. Last, a group of 16 examples'
// products through the build's lanes_linear and lanes_product functions (the step's products
// since its blocks went across the lanes), x86-64-v4 where the CPU has AVX-512, and x86-64-v3.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "model/cpu_attention_lanes.h"
#include "model/cpu_lanes_layers.h"
#include "model/cpu_layers.h"

namespace copytask {
// The product functions ask this at run time; the driver times only the v3 tiles. noipa: so
// that the compiler keeps both branches of matmul_x86_64_v4, as in the build.
__attribute__((noipa)) bool cpu_avx512_on_256_bit_pipes() { return false; }
}  // namespace copytask

using namespace copytask::cpu;

#define V3 "arch=x86-64-v3"
#define V4 "arch=x86-64-v4,prefer-vector-width=512"

// The tile with its sums started from 0: the k-loop is the same for every start (0, C, the
// bias) and for a partial last vector (it changes only the loads before and the stores after).
#define TILE(name, isa, Vec, Partials, R, NV)                                      \
  extern "C" __attribute__((noinline, target(isa))) void name(const Product& p) {  \
    matmul_tile<Vec, Partials, R, NV, false, TileStart::zero>(p, p.A, p.C, 0);        \
  }

// x86-64-v3: 8 lanes, up to 3 vectors (R x 3 of the 16 ymm registers).
TILE(tile_v3_w8_r4_nv1, V3, Vec8, PartialsMaskedAvx, 4, 1)
TILE(tile_v3_w8_r4_nv2, V3, Vec8, PartialsMaskedAvx, 4, 2)
TILE(tile_v3_w8_r4_nv3, V3, Vec8, PartialsMaskedAvx, 4, 3)
TILE(tile_v3_w8_r5_nv1, V3, Vec8, PartialsMaskedAvx, 5, 1)
TILE(tile_v3_w8_r5_nv2, V3, Vec8, PartialsMaskedAvx, 5, 2)
TILE(tile_v3_w8_r5_nv3, V3, Vec8, PartialsMaskedAvx, 5, 3)

// The softmax of one head (T x T, key-major) as attention_forward runs it, less its two
// products: the scaled logits, their maxima, e^x, the sums and the normalisation
// (softmax_key_major with attention_forward's logits without a bias), and its backward.
#define SOFTMAX(name, isa, Lanes)                                                                       \
  extern "C" __attribute__((noinline, target(isa))) void name(const float* scores, float* w_t, int64_t T, \
                                                                 float scale) {                            \
    auto scaled = [&](auto lane, int64_t j, int64_t i0) {                                                 \
      return load_vec<decltype(lane)>(scores + j * T + i0) * scale;                                       \
    };                                                                                                    \
    softmax_key_major<Lanes>(scaled, false, nullptr, w_t, nullptr, T);                                   \
  }
SOFTMAX(softmax_v3, V3, LanesV3)
SOFTMAX(softmax_v4, V4, LanesV4)

#define SOFTMAX_BACKWARD(name, isa, Lanes)                                                              \
  extern "C" __attribute__((noinline, target(isa))) void name(const float* w_t, const float* gw_t,      \
                                                                 float* gl_t, float* gs_t, int64_t T) {    \
    softmax_backward_key_major<Lanes>(w_t, false, nullptr, gw_t, gl_t, gs_t, 0.5f, T);                   \
  }
SOFTMAX_BACKWARD(softmax_backward_v3, V3, LanesV3)
SOFTMAX_BACKWARD(softmax_backward_v4, V4, LanesV4)

#define CROSSENTROPY(name, isa)                                                              \
  extern "C" __attribute__((noinline, target(isa))) double name(                             \
      float* logits, const int64_t* targets, float weight, int64_t T, int64_t V, float* scratch) { \
    return crossentropy_forward_backward(logits, targets, 1, weight, T, V, scratch);            \
  }
CROSSENTROPY(crossentropy_v3, V3)
CROSSENTROPY(crossentropy_v4, V4)

// The build's product functions, kept in the assembly for the script's check.
void (*volatile keep_v3)(const Product&) = matmul_x86_64_v3;
void (*volatile keep_v4)(const Product&) = matmul_x86_64_v4;
// The step's products since the blocks went across the lanes: a linear layer's (a lanes
// operand by a broadcast weight) and the attention's and the weight gradients' (two lanes
// operands), kept for the script's model of their loops, and timed below.
void (*volatile keep_lanes_linear_v3)(const LanesLinear&) = lanes_linear_x86_64_v3;
void (*volatile keep_lanes_linear_v4)(const LanesLinear&) = lanes_linear_x86_64_v4;
void (*volatile keep_lanes_product_v3)(const LanesProduct&) = lanes_product_x86_64_v3;
void (*volatile keep_lanes_product_v4)(const LanesProduct&) = lanes_product_x86_64_v4;

// ---- Timing (x86-64-v3 tiles only: they run on every AVX2 machine) --------------------------

namespace {

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Seconds per dependent vaddps: 100 of them a round, the fastest of many short runs.
__attribute__((target(V3), noinline)) double add_chain_seconds() {
  double best = 1e9;
  for (int run = 0; run < 200; ++run) {
    const int rounds = 2000;
    const double start = seconds_now();
    for (int i = 0; i < rounds; ++i) {
      asm volatile(
          ".rept 100\n\t"
          "vaddps %%ymm0, %%ymm0, %%ymm0\n\t"
          ".endr" ::
              : "xmm0");
    }
    best = std::min(best, (seconds_now() - start) / (rounds * 100.0));
  }
  return best;
}

// The reference study's products for one group of 4 examples (T = 10, D = 20, F = 32, V = 11,
// two blocks; the list of scripts/mca_model.sh), each through the build's matmul_x86_64_v3
// with its own shape: (rows, K, O, A read contiguously, times a group).
struct GroupProduct {
  int64_t rows, K, O;
  bool contiguous;
  int times;
};
constexpr int64_t kT = 10, kD = 20, kF = 32, kV = 11, kG = 4, kL = 2, kRows = kG * kT;
constexpr GroupProduct kGroupProducts[] = {
    {kRows, kD, 3 * kD, true, kL}, {kT, kD, kT, true, kL * kG},   {kT, kT, kD, true, kL * kG},
    {kRows, kD, kD, true, kL},     {kRows, kD, kF, true, kL},     {kRows, kF, kD, true, kL},
    {kRows, kD, kV, true, 1},      {kD, kRows, kV, false, 1},     {kRows, kV, kD, true, 1},
    {kF, kRows, kD, false, kL},    {kRows, kD, kF, true, kL},     {kD, kRows, kF, false, kL},
    {kRows, kF, kD, true, kL},     {kD, kRows, kD, false, kL},    {kRows, kD, kD, true, kL},
    {kT, kD, kT, true, kL * kG},   {kT, kT, kD, false, kL * kG},  {kT, kT, kD, true, kL * kG},
    {kT, kT, kD, false, kL * kG},  {kD, kRows, 3 * kD, false, kL}, {kRows, 3 * kD, kD, true, kL}};

// Seconds for one group's products through `matmul` (the build's matmul_x86_64_v3 or _v4),
// the fastest of many runs; their flops to `flops`.
__attribute__((noinline)) double group_products_seconds(void (*matmul)(const Product&), double& flops) {
  constexpr int64_t kMax = 64 * 64;
  std::vector<float> A(kMax, 0.5f), B(kMax + kSlack, 0.25f), C(kMax, 0.0f);
  flops = 0;
  for (const GroupProduct& g : kGroupProducts) flops += 2.0 * g.rows * g.K * g.O * g.times;
  double best = 1e9;
  for (int run = 0; run < 400; ++run) {
    const double start = seconds_now();
    for (const GroupProduct& g : kGroupProducts) {
      // A (rows, K) row-major, or read transposed from (K, rows) as a weight gradient reads it.
      const Product p{A.data(), g.contiguous ? g.K : 1, g.contiguous ? 1 : g.rows, B.data(), g.O, nullptr, C.data(),
                      g.O, g.rows, g.K, g.O, false};
      for (int t = 0; t < g.times; ++t) matmul(p);
    }
    best = std::min(best, seconds_now() - start);
  }
  return best;
}

}  // namespace

// ---- The same products with the examples across the lanes (a prototype, timed only) -------
//
// A group of 16 examples, each activation (rows, K) stored as rows x K vectors of 16 floats,
// lane e = example e's value: every product's multiply-add fills all 16 lanes whatever T, D,
// F or V. Three forms, one tile: C(r, o) (+)= sum_k A(r, k) B(k, o), A(r, k) a vector at
// A + 16 (r a_row + k a_red); B(k, o) either one float broadcast to the lanes (a weight:
// B[k b_row + o]) or a vector (another example-wise activation: B + 16 (k b_row + o b_col)).
// A weight's gradient, summed over the rows and the examples, is a product of the second form
// whose sums stay per lane (C += over the group's rows, started from what the earlier groups
// left), the 16 lanes added once a step. R x NO accumulators; each k loads R vectors of A and
// NO of B (or NO floats), so with R = 5 and NO = 4, 20 independent chains and 9 loads a k.
struct PrototypeProduct {
  const float* A;
  int64_t a_row, a_red;  // in vectors
  const float* B;
  int64_t b_row, b_col;  // in floats (broadcast B) or vectors
  float* C;
  int64_t c_row;         // in vectors
  int64_t rows, K, O;
  bool accumulate;
};

template <bool BroadcastB, int R, int NO>
__attribute__((always_inline)) inline void prototype_tile(const PrototypeProduct& p, int64_t r0, int64_t o0) {
  Vec16 acc[R][NO];
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < NO; ++o)
      acc[r][o] = p.accumulate ? load_vec<Vec16>(p.C + 16 * ((r0 + r) * p.c_row + o0 + o)) : Vec16{};
  for (int64_t k = 0; k < p.K; ++k) {
    Vec16 a[R];
    for (int r = 0; r < R; ++r) a[r] = load_vec<Vec16>(p.A + 16 * ((r0 + r) * p.a_row + k * p.a_red));
    for (int o = 0; o < NO; ++o) {
      if constexpr (BroadcastB) {
        const float b = p.B[k * p.b_row + (o0 + o) * p.b_col];  // broadcast by the multiply
        for (int r = 0; r < R; ++r) acc[r][o] += a[r] * b;
      } else {
        const Vec16 b = load_vec<Vec16>(p.B + 16 * (k * p.b_row + (o0 + o) * p.b_col));
        for (int r = 0; r < R; ++r) acc[r][o] += a[r] * b;
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < NO; ++o) store_vec(p.C + 16 * ((r0 + r) * p.c_row + o0 + o), acc[r][o]);
}

template <bool BroadcastB, int R>
__attribute__((always_inline)) inline void prototype_rows(const PrototypeProduct& p, int64_t r0) {
  int64_t o = 0;
  for (; o + 4 <= p.O; o += 4) prototype_tile<BroadcastB, R, 4>(p, r0, o);
  switch (p.O - o) {
    case 3: prototype_tile<BroadcastB, R, 3>(p, r0, o); break;
    case 2: prototype_tile<BroadcastB, R, 2>(p, r0, o); break;
    case 1: prototype_tile<BroadcastB, R, 1>(p, r0, o); break;
  }
}

template <bool BroadcastB>
__attribute__((always_inline)) inline void prototype_product(const PrototypeProduct& p) {
  int64_t r = 0;
  if (p.rows % 5 == 0)
    for (; r < p.rows; r += 5) prototype_rows<BroadcastB, 5>(p, r);
  for (; r + 4 <= p.rows; r += 4) prototype_rows<BroadcastB, 4>(p, r);
  for (; r < p.rows; ++r) prototype_rows<BroadcastB, 1>(p, r);
}

extern "C" __attribute__((noinline, target(V4))) void lanes_product_weights(const PrototypeProduct& p) {
  prototype_product<true>(p);
}
extern "C" __attribute__((noinline, target(V4))) void lanes_product_examples(const PrototypeProduct& p) {
  prototype_product<false>(p);
}

namespace {
// The group products above for 16 examples across the lanes: (rows, K, O, B broadcast (a
// weight) or per example, A transposed, times a group of 16). A weight's gradient: rows = its
// inputs, K = T (the sum over the rows; the examples' sum stays in the lanes), O its outputs.
struct LanesGroupProduct {
  int64_t rows, K, O;
  bool weights, a_transposed;
  int times;
};
// In kGroupProducts' order: qkv, scores, mix; proj, fc1, fc2; the head, its weight and input
// gradients; fc2's weight and input gradients, fc1's weight gradient; fc1's input gradient,
// proj's weight and input gradients; d(weights), dv, dq; dk, qkv's weight and input gradients.
constexpr LanesGroupProduct kLanesGroupProducts[] = {
    {kT, kD, 3 * kD, true, false, kL}, {kT, kD, kT, false, false, kL},  {kT, kT, kD, false, false, kL},
    {kT, kD, kD, true, false, kL},     {kT, kD, kF, true, false, kL},    {kT, kF, kD, true, false, kL},
    {kT, kD, kV, true, false, 1},      {kD, kT, kV, false, true, 1},     {kT, kV, kD, true, false, 1},
    {kF, kT, kD, false, true, kL},     {kT, kD, kF, true, false, kL},    {kD, kT, kF, false, true, kL},
    {kT, kF, kD, true, false, kL},     {kD, kT, kD, false, true, kL},    {kT, kD, kD, true, false, kL},
    {kT, kD, kT, false, false, kL},    {kT, kT, kD, false, true, kL},    {kT, kT, kD, false, false, kL},
    {kT, kT, kD, false, true, kL},     {kD, kT, 3 * kD, false, true, kL}, {kT, 3 * kD, kD, true, false, kL}};

// Seconds for one group of 16 examples' products, call(g) running product g of the list, the
// fastest of 400 runs; their flops (all 16 lanes') to `flops`.
template <class Call>
double lanes_group_fastest(double& flops, const Call& call) {
  flops = 0;
  for (const LanesGroupProduct& g : kLanesGroupProducts) flops += 2.0 * g.rows * g.K * g.O * g.times * 16;
  double best = 1e9;
  for (int run = 0; run < 400; ++run) {
    const double start = seconds_now();
    for (const LanesGroupProduct& g : kLanesGroupProducts) call(g);
    best = std::min(best, seconds_now() - start);
  }
  return best;
}

// The group's products through the prototype's tiles.
__attribute__((noinline)) double lanes_group_products_seconds(double& flops) {
  constexpr int64_t kMax = 64 * 64 * 16;
  std::vector<float> A(kMax, 0.5f), B(kMax, 0.25f), C(kMax, 0.0f);
  return lanes_group_fastest(flops, [&](const LanesGroupProduct& g) {
    // A (rows, K) vectors, or read transposed from (K, rows) as a weight gradient reads it;
    // B (K, O); a weight gradient accumulates.
    const PrototypeProduct p{A.data(), g.a_transposed ? 1 : g.K, g.a_transposed ? g.rows : 1, B.data(), g.O, 1,
                             C.data(), g.O, g.rows, g.K, g.O, g.a_transposed};
    for (int t = 0; t < g.times; ++t) (g.weights ? lanes_product_weights : lanes_product_examples)(p);
  });
}

// The same group through the build's functions (the step's calls: lanes_linear for a layer's
// forward and input gradient, W broadcast; lanes_product for the attention's and,
// accumulating, the weight gradients), the operands 64-byte aligned, as the step's workspace is.
__attribute__((noinline)) double build_lanes_group_seconds(void (*linear)(const LanesLinear&),
                                                            void (*product)(const LanesProduct&), double& flops) {
  constexpr int64_t kMax = 64 * 64 * 16;
  auto aligned = [](float value) {
    float* p = static_cast<float*>(std::aligned_alloc(64, kMax * sizeof(float)));
    for (int64_t i = 0; i < kMax; ++i) p[i] = value;
    return p;
  };
  float *A = aligned(0.5f), *B = aligned(0.25f), *C = aligned(0.0f);
  const double best = lanes_group_fastest(flops, [&](const LanesGroupProduct& g) {
    // A (rows, K) in lanes, or read transposed from (K, rows) as a weight gradient reads it;
    // B (K, O), a weight (floats) or in lanes; a weight gradient accumulates.
    if (g.weights) {
      const LanesLinear p{A, g.K, B, g.O, nullptr, C, g.O, g.rows, g.K, g.O};
      for (int t = 0; t < g.times; ++t) linear(p);
    } else {
      const LanesProduct p{A, g.a_transposed ? 1 : g.K, g.a_transposed ? g.rows : 1, B, g.O, 1, C, g.O, 1,
                           g.rows, g.K, g.O, g.a_transposed};
      for (int t = 0; t < g.times; ++t) product(p);
    }
  });
  for (float* p : {A, B, C}) std::free(p);
  return best;
}

// Product by product, the fastest of many calls alone (in L1): each of the group's products
// through matmul_x86_64_v4, and the same product of 16 examples across the lanes, both in
// cycles for 4 examples (the lanes' call times its count over 4) and as a share of 64 flop a
// cycle. The two lists are in the same order.
__attribute__((noinline)) void products_side_by_side(double hz) {
  constexpr int64_t kMax = 64 * 64 * 16;
  std::vector<float> A(kMax, 0.5f), B(kMax + kSlack, 0.25f), C(kMax, 0.0f);
  auto fastest = [](auto&& call) {
    double best = 1e9;
    for (int run = 0; run < 2000; ++run) {
      const double start = seconds_now();
      call();
      best = std::min(best, seconds_now() - start);
    }
    return best;
  };
  std::printf("| product (rows x K x O, times a group of 4) | flop | rows in vectors (x86-64-v4) "
              "| examples across the lanes |\n");
  std::printf("|---|---|---|---|\n");
  double total_rows = 0, total_lanes = 0, total_flops = 0;
  for (size_t i = 0; i < sizeof(kGroupProducts) / sizeof(kGroupProducts[0]); ++i) {
    const GroupProduct& g = kGroupProducts[i];
    const LanesGroupProduct& l = kLanesGroupProducts[i];
    const Product p{A.data(), g.contiguous ? g.K : 1, g.contiguous ? 1 : g.rows, B.data(), g.O, nullptr, C.data(),
                    g.O, g.rows, g.K, g.O, false};
    const PrototypeProduct q{A.data(), l.a_transposed ? 1 : l.K, l.a_transposed ? l.rows : 1, B.data(), l.O, 1,
                         C.data(), l.O, l.rows, l.K, l.O, l.a_transposed};
    const double rows_cycles = fastest([&] { matmul_x86_64_v4(p); }) * hz * g.times;
    const double lanes_cycles =
        fastest([&] { (l.weights ? lanes_product_weights : lanes_product_examples)(q); }) * hz * l.times / 4;
    const double flops = 2.0 * g.rows * g.K * g.O * g.times;
    total_rows += rows_cycles;
    total_lanes += lanes_cycles;
    total_flops += flops;
    std::printf("| %lld x %lld x %lld%s (x%d) | %.0f | %.0f cycles, %.0f%% | %.0f cycles, %.0f%% |\n",
                static_cast<long long>(g.rows), static_cast<long long>(g.K), static_cast<long long>(g.O),
                g.contiguous ? "" : " (A transposed)", g.times, flops, rows_cycles, 100 * flops / (rows_cycles * 64),
                lanes_cycles, 100 * flops / (lanes_cycles * 64));
  }
  std::printf("| all (each alone) | %.0f | %.0f cycles, %.0f%% | %.0f cycles, %.0f%% |\n", total_flops, total_rows,
              100 * total_flops / (total_rows * 64), total_lanes, 100 * total_flops / (total_lanes * 64));
}

// The reference study's attention (T = 10, one head of Dh = 20, with dropout) of 16 examples,
// forward and backward, on the x86-64-v4, -v3 and generic kernels, the fastest of many runs
// in cycles: example at a time
// (attention_forward / attention_backward, as the step had run it), and across the lanes
// (cpu_attention_lanes.h) without and with the transpositions the step makes (the forward's
// q | k | v in and mixed out; the backward's upstream gradient in and grad_qkv out), the
// rows 64-byte aligned as the step's workspace is.
template <class Lanes>
COPYTASK_INLINE void attention_timed(double hz, const char* variant) {
  constexpr int64_t T = kT, H = 1, Dh = kD, D = kD, HTT = H * T * T, L = kExampleLanes;
  auto aligned = [](int64_t n) {
    float* p = static_cast<float*>(std::aligned_alloc(64, static_cast<size_t>((n + 16) * 4 + 63) / 64 * 64));
    for (int64_t i = 0; i < n + 16; ++i) p[i] = 0.25f + static_cast<float>(i % 7) * 0.125f;
    return p;
  };
  float *qkv = aligned(L * T * 3 * D), *up = aligned(L * T * D), *mask = aligned(L * HTT), *w = aligned(L * HTT);
  float *mixed = aligned(L * T * D), *gq = aligned(L * T * 3 * D), *scratch = aligned(attention_scratch_floats(T, Dh));
  float *qkv_l = aligned(L * T * 3 * D), *up_l = aligned(L * T * D), *w_l = aligned(L * HTT), *mask_l = aligned(L * HTT);
  float *mixed_l = aligned(L * T * D), *gq_l = aligned(L * T * 3 * D), *scratch_l = aligned(attention_lanes_scratch_floats(T));
  auto fastest = [&](auto&& call) COPYTASK_KERNEL_BODY {
    double best = 1e9;
    for (int run = 0; run < 3000; ++run) {
      const double start = seconds_now();
      call();
      best = std::min(best, seconds_now() - start);
    }
    return best * hz;
  };
  const double example_forward = fastest([&]() COPYTASK_KERNEL_BODY {
    for (int64_t e = 0; e < L; ++e)
      attention_forward<Lanes>(qkv + e * T * 3 * D, nullptr, false, mask + e * HTT, w + e * HTT, mixed + e * T * D,
                                 scratch, T, H, Dh);
  });
  const double example_backward = fastest([&]() COPYTASK_KERNEL_BODY {
    for (int64_t e = 0; e < L; ++e)
      attention_backward<Lanes>(qkv + e * T * 3 * D, w + e * HTT, false, mask + e * HTT, up + e * T * D,
                                  gq + e * T * 3 * D, nullptr, scratch, T, H, Dh);
  });
  auto lanes_forward = [&](bool transposed) COPYTASK_KERNEL_BODY {
    if (transposed) to_lanes<Lanes>(qkv, T * 3 * D, L, T * 3 * D, qkv_l);
    attention_forward_lanes<Lanes>(qkv_l, nullptr, false, mask_l, w_l, mixed_l, scratch_l, T, H, Dh);
    if (transposed) from_lanes<Lanes>(mixed_l, T * D, L, mixed, T * D);
  };
  auto lanes_backward = [&](bool transposed) COPYTASK_KERNEL_BODY {
    if (transposed) to_lanes<Lanes>(up, T * D, L, T * D, up_l);
    attention_backward_lanes<Lanes>(qkv_l, w_l, false, mask_l, up_l, gq_l, nullptr, scratch_l, T, H, Dh);
    if (transposed) from_lanes<Lanes>(gq_l, T * 3 * D, L, gq, T * 3 * D);
  };
  std::printf("the attention of 16 examples (T = 10, Dh = 20, dropout), %s, cycles: example at a time forward %.0f, "
              "backward %.0f; across the lanes forward %.0f (%.0f with the transpositions), backward %.0f (%.0f)\n",
              variant, example_forward, example_backward, fastest([&]() COPYTASK_KERNEL_BODY { lanes_forward(false); }),
              fastest([&]() COPYTASK_KERNEL_BODY { lanes_forward(true); }), fastest([&]() COPYTASK_KERNEL_BODY { lanes_backward(false); }),
              fastest([&]() COPYTASK_KERNEL_BODY { lanes_backward(true); }));
  for (float* p : {qkv, up, mask, w, mixed, gq, scratch, qkv_l, up_l, w_l, mask_l, mixed_l, gq_l, scratch_l}) std::free(p);
}
__attribute__((noinline, target(V4))) void attention_side_by_side_v4(double hz) { attention_timed<LanesV4>(hz, "x86-64-v4"); }
__attribute__((noinline, target(V3))) void attention_side_by_side_v3(double hz) { attention_timed<LanesV3>(hz, "x86-64-v3"); }
__attribute__((noinline)) void attention_side_by_side_generic(double hz) { attention_timed<LanesGeneric>(hz, "generic"); }
}  // namespace

namespace {

struct Timed {
  const char* name;
  void (*tile)(const Product&);
  int R, NV;
};

}  // namespace

int main(int argc, char** argv) {
  double add_latency = 3;  // cycles: vaddps ymm on Zen 2/3/4 (uops.info)
  int64_t K = 256;         // k iterations a call: B is K rows of 24 floats, 24 KiB, in L1
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--add-latency")) add_latency = std::atof(argv[i + 1]);
    if (!std::strcmp(argv[i], "--k")) K = std::atoll(argv[i + 1]);
  }
  bool products = false;  // --products: the group's products one by one, both layouts (x86-64-v4)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--products")) products = true;
  }
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::printf("no AVX2 and FMA: nothing to time\n");
    return 0;
  }
  const double add_s = add_chain_seconds();
  const double hz = add_latency / add_s;
  std::printf("clock from the vaddps chain: %.3f GHz (%.3f ns a dependent vaddps, taken as %.0f cycles)\n",
              hz / 1e9, add_s * 1e9, add_latency);
  const Timed tiles[] = {{"tile_v3_w8_r4_nv1", tile_v3_w8_r4_nv1, 4, 1}, {"tile_v3_w8_r4_nv2", tile_v3_w8_r4_nv2, 4, 2},
                         {"tile_v3_w8_r4_nv3", tile_v3_w8_r4_nv3, 4, 3}, {"tile_v3_w8_r5_nv1", tile_v3_w8_r5_nv1, 5, 1},
                         {"tile_v3_w8_r5_nv2", tile_v3_w8_r5_nv2, 5, 2}, {"tile_v3_w8_r5_nv3", tile_v3_w8_r5_nv3, 5, 3}};
  constexpr int kTiles = sizeof(tiles) / sizeof(tiles[0]);
  std::vector<float> A(5 * K, 0.5f), B(K * 24 + kSlack, 0.25f), C(5 * 24, 0.0f);
  // Five rounds over the tiles, the fastest of each: on a shared machine a neighbour's FMAs
  // slow a round now and then (seen here: 6.4 and 7.2 cycles a k in one round for 4.2 and 5.1).
  std::vector<double> best(kTiles, 1e9);
  for (int round = 0; round < 5; ++round)
    for (int i = 0; i < kTiles; ++i) {
      const Timed& t = tiles[i];
      // A (5, K) row-major, B (K, 24): a_row = K, a_red = 1, as the forward's products read A.
      const Product p{A.data(), K, 1, B.data(), 24, nullptr, C.data(), 24, t.R, K, 8 * t.NV, false};
      for (int run = 0; run < 60; ++run) {
        const int calls = 200;
        const double start = seconds_now();
        for (int c = 0; c < calls; ++c) t.tile(p);
        best[i] = std::min(best[i], (seconds_now() - start) / calls);
      }
    }
  for (int i = 0; i < kTiles; ++i)
    std::printf("measured %s %.2f cycles per k (K = %lld, the call's loads and stores included)\n", tiles[i].name,
                best[i] * hz / K, static_cast<long long>(K));
  double flops = 0;
  const double group_s = group_products_seconds(matmul_x86_64_v3, flops);
  std::printf("measured the reference study's products of one group through matmul_x86_64_v3: %.0f cycles, %.1f us "
              "(%.0f flop, %.0f%% of 32 flop a cycle)\n",
              group_s * hz, group_s * 1e6, flops, 100 * flops / (group_s * hz * 32));
  if (__builtin_cpu_supports("avx512f")) {
    const double group_v4_s = group_products_seconds(matmul_x86_64_v4, flops);
    std::printf("measured the reference study's products of one group through matmul_x86_64_v4: %.0f cycles, %.1f us "
                "(%.0f flop, %.0f%% of 64 flop a cycle, two 512-bit FMA pipes)\n",
                group_v4_s * hz, group_v4_s * 1e6, flops, 100 * flops / (group_v4_s * hz * 64));
    const double lanes_s = lanes_group_products_seconds(flops);
    if (products) {
      products_side_by_side(hz);
      attention_side_by_side_v4(hz);
      attention_side_by_side_v3(hz);
      attention_side_by_side_generic(hz);
    }
    std::printf("measured the same products of 16 examples across the lanes (a prototype): %.0f cycles, %.1f us, "
                "%.1f us for 4 examples (%.0f flop, %.0f%% of 64 flop a cycle)\n",
                lanes_s * hz, lanes_s * 1e6, lanes_s * 1e6 / 4, flops, 100 * flops / (lanes_s * hz * 64));
    const double build_v4_s = build_lanes_group_seconds(lanes_linear_x86_64_v4, lanes_product_x86_64_v4, flops);
    std::printf("measured the step's products of a group of 16 examples through the build's lanes_linear_x86_64_v4 "
                "and lanes_product_x86_64_v4: %.0f cycles, %.1f us (%.0f flop; %.0f%% of 32 flop a cycle, %.0f%% of "
                "64)\n",
                build_v4_s * hz, build_v4_s * 1e6, flops, 100 * flops / (build_v4_s * hz * 32),
                100 * flops / (build_v4_s * hz * 64));
  }
  const double build_v3_s = build_lanes_group_seconds(lanes_linear_x86_64_v3, lanes_product_x86_64_v3, flops);
  std::printf("measured the step's products of a group of 16 examples through the build's lanes_linear_x86_64_v3 "
              "and lanes_product_x86_64_v3: %.0f cycles, %.1f us (%.0f flop; %.0f%% of 32 flop a cycle)\n",
              build_v3_s * hz, build_v3_s * 1e6, flops, 100 * flops / (build_v3_s * hz * 32));
  return 0;
}
