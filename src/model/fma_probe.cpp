#include "model/fma_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

#include "model/cpu_layers.h"
#include "util/text_format.h"

namespace copytask {
namespace {

// Independent accumulators per thread: an FMA's latency (4 cycles) x 2 pipes = 8 in flight,
// and some to spare, all in registers (12 + 2 of the 16 xmm or ymm, of the 32 zmm).
constexpr int kChains = 12;

// One register of the variant: 16 floats (zmm), 8 (ymm), and 4 on the generic target (an
// xmm: the kernels' 8-float vectors there live in memory between uses, which would measure
// the stores, not the arithmetic).
typedef float Vec4 __attribute__((vector_size(16)));
template <class Lanes>
using RegisterOf = std::conditional_t<Lanes::kWidth == 16, cpu::Vec16,
                                      std::conditional_t<std::is_same_v<Lanes, cpu::LanesGeneric>, Vec4, cpu::Vec8>>;

// on_cpu_variant's dispatch (model/cpu_layers.h) for a given variant, not the active one.
template <class Body>
auto on_variant(CpuVariant variant, const Body& body) {
#if COPYTASK_CPU_VARIANTS
  switch (variant) {
    case CpuVariant::x86_64_v4: return cpu::run_x86_64_v4(body);
    case CpuVariant::x86_64_v3: return cpu::run_x86_64_v3(body);
    case CpuVariant::generic: break;
  }
#endif
  return cpu::run_generic(body);
}

// `iterations` rounds of the chains' multiply-adds in the variant's instructions; returns a
// value that depends on every one, so none is dropped. x = x * m + a with m just under 1
// keeps every chain bounded and away from denormals.
float fma_chains(CpuVariant variant, int64_t iterations, float seed) {
  return on_variant(variant, [&](auto lanes) COPYTASK_KERNEL_BODY {
    using Vec = RegisterOf<decltype(lanes)>;
    constexpr int chains = kChains;
    constexpr size_t width = sizeof(Vec) / sizeof(float);
    Vec chain[chains];
    Vec m, a;
    for (size_t l = 0; l < width; ++l) {
      m[l] = 0.999999f;
      a[l] = 1e-6f * seed;
    }
    for (int c = 0; c < chains; ++c)
      for (size_t l = 0; l < width; ++l) chain[c][l] = seed + static_cast<float>(c + l);
    for (int64_t i = 0; i < iterations; ++i)
#pragma GCC unroll 12
      for (int c = 0; c < chains; ++c) chain[c] = chain[c] * m + a;
    float sum = 0;
    for (int c = 0; c < chains; ++c)
      for (size_t l = 0; l < width; ++l) sum += chain[c][l];
    return sum;
  });
}

// The loop's shape in a variant: floats per chain (a register's) and chains.
std::pair<int, int> shape_of(CpuVariant variant) {
  return on_variant(variant, [&](auto lanes) COPYTASK_KERNEL_BODY {
    return std::make_pair(static_cast<int>(sizeof(RegisterOf<decltype(lanes)>) / sizeof(float)), kChains);
  });
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

FmaMeasurement cpu_fma_measure(int threads, CpuVariant variant) {
  threads = std::max(threads, 1);
  const auto [lanes, chains] = shape_of(variant);
  const double flop_per_iteration = 2.0 * chains * lanes;  // a multiply and an add per float
  // Calibrated on one thread: the iterations of about 40 ms.
  int64_t iterations = 1 << 16;
  for (;;) {
    const auto start = std::chrono::steady_clock::now();
    volatile float sink = fma_chains(variant, iterations, 1.0f);
    (void)sink;
    const double seconds = seconds_since(start);
    if (seconds > 0.01 || iterations > (int64_t{1} << 34)) {
      iterations = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iterations) * 0.04 / std::max(seconds, 1e-6)));
      break;
    }
    iterations *= 4;
  }
  constexpr int kTrials = 5;
  double best = 0, best_seconds = 0;
  for (int trial = 0; trial < kTrials; ++trial) {
    std::vector<float> sums(threads);
    std::vector<std::thread> workers;
    const auto start = std::chrono::steady_clock::now();
    for (int t = 0; t < threads; ++t)
      workers.emplace_back([&, t] { sums[t] = fma_chains(variant, iterations, 1.0f + static_cast<float>(t)); });
    for (auto& worker : workers) worker.join();
    const double seconds = seconds_since(start);
    volatile float sink = sums[0];
    (void)sink;
    const double rate = flop_per_iteration * static_cast<double>(iterations) * threads / seconds;
    if (rate > best) {
      best = rate;
      best_seconds = seconds;
    }
  }
  FmaMeasurement out;
  out.flops_per_second = best;
  out.threads = threads;
  out.variant = cpu_variant_name(variant);
  out.how = text_format("{} thread(s), each {} independent chains of {}-float multiply-adds in registers, "
                        "the best of {} trials of {:.0f} ms",
                        threads, chains, lanes, kTrials, 1000 * best_seconds);
  return out;
}

}  // namespace copytask
