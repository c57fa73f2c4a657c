// scripts/mca_driver.cpp: the fused CPU step's hot loops, alone, for scripts/mca_model.sh.
// Not part of the build, the tests or CI. It includes src/model/cpu_layers.h unchanged and
// compiles its kernels the way the build does (-O3 -std=c++17, each variant through the same
// target attributes as the header's run_x86_64_v3 / run_x86_64_v4), one out-of-line function
// per distinct inner loop, so that each function's innermost loop is that kernel's hot loop:
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
// Zen 2/3/4; pass another with --add-latency). See scripts/mca_model.sh.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

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
  }
  return 0;
}
