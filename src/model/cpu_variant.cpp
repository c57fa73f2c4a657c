#include "model/cpu_variant.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#define COPYTASK_X86 1
#else
#define COPYTASK_X86 0
#endif

namespace copytask {
namespace {

// -1: not chosen yet; else a CpuVariant.
std::atomic<int> active_variant{-1};

// The features each level needs that __builtin_cpu_supports names, for the message.
std::string missing_features(CpuVariant variant) {
#if COPYTASK_X86
  std::string missing;
  auto need = [&](bool has, const char* name) {
    if (!has) missing += std::string(missing.empty() ? "" : " ") + name;
  };
  if (variant == CpuVariant::x86_64_v4) {
    need(__builtin_cpu_supports("avx512f"), "avx512f");
    need(__builtin_cpu_supports("avx512bw"), "avx512bw");
    need(__builtin_cpu_supports("avx512dq"), "avx512dq");
    need(__builtin_cpu_supports("avx512vl"), "avx512vl");
    if (missing.empty() && !__builtin_cpu_supports("x86-64-v4")) missing = "x86-64-v4";
  }
  if (variant == CpuVariant::x86_64_v4 || variant == CpuVariant::x86_64_v3) {
    std::string v3;
    if (!__builtin_cpu_supports("avx2")) v3 += " avx2";
    if (!__builtin_cpu_supports("fma")) v3 += " fma";
    if (!__builtin_cpu_supports("bmi2")) v3 += " bmi2";
    if (v3.empty() && !__builtin_cpu_supports("x86-64-v3")) v3 = " x86-64-v3";
    if (!v3.empty()) missing += missing.empty() ? v3.substr(1) : v3;
  }
  return missing;
#else
  return variant == CpuVariant::generic ? "" : "an x86-64 CPU and a GCC build";
#endif
}

// The x86 family number (base + extended), or 0.
unsigned cpu_family() {
#if COPYTASK_X86
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  const unsigned base = (eax >> 8) & 0xf, extended = (eax >> 20) & 0xff;
  return base == 0xf ? base + extended : base;
#else
  return 0;
#endif
}

bool cpu_is_amd() {
#if COPYTASK_X86
  return __builtin_cpu_is("amd");
#else
  return false;
#endif
}

}  // namespace

const char* cpu_variant_name(CpuVariant variant) {
  switch (variant) {
    case CpuVariant::x86_64_v4: return "x86-64-v4";
    case CpuVariant::x86_64_v3: return "x86-64-v3";
    case CpuVariant::generic: break;
  }
  return "generic";
}

std::vector<CpuVariant> cpu_variants_all() {
  return {CpuVariant::x86_64_v4, CpuVariant::x86_64_v3, CpuVariant::generic};
}

std::string cpu_variant_missing(CpuVariant variant) {
  return variant == CpuVariant::generic ? "" : missing_features(variant);
}

CpuVariant cpu_variant_widest() {
  for (CpuVariant variant : cpu_variants_all())
    if (cpu_variant_missing(variant).empty()) return variant;
  return CpuVariant::generic;
}

CpuVariant cpu_variant_default() {
  // The widest: even on AMD family 19h (Zen 4), whose AVX-512 peak is AVX2's, x86-64-v4 is
  // the faster since its partial vectors are masked moves (vmaskmovps on x86-64-v3 is not
  // as cheap there): the reference study's step 20.5 against 17.8 member-steps/s
  // (docs/performance.md).
  return cpu_variant_widest();
}

CpuVariant cpu_variant_active() {
  int value = active_variant.load(std::memory_order_relaxed);
  if (value < 0) {
    // First call without a choice made: the environment's, or the default (a bad value was
    // reported by the CLI before; here it falls back to the default).
    if (!cpu_variant_from_environment().empty()) cpu_variant_set(cpu_variant_default());
    value = active_variant.load(std::memory_order_relaxed);
  }
  return static_cast<CpuVariant>(value);
}

std::string cpu_variant_set(CpuVariant variant) {
  const std::string missing = cpu_variant_missing(variant);
  if (!missing.empty())
    return std::string("this CPU cannot run the ") + cpu_variant_name(variant) + " kernels: it lacks " + missing;
  active_variant.store(static_cast<int>(variant), std::memory_order_relaxed);
  return "";
}

std::string cpu_variant_set(const std::string& name) {
  if (name == "auto") return cpu_variant_set(cpu_variant_default());
  for (CpuVariant variant : cpu_variants_all())
    if (name == cpu_variant_name(variant)) return cpu_variant_set(variant);
  return "'" + name + "' names no CPU kernel variant: use auto, x86-64-v4, x86-64-v3 or generic";
}

std::string cpu_variant_from_environment() {
  const char* value = std::getenv("COPYTASK_CPU_KERNEL");
  const std::string message = cpu_variant_set(value && *value ? std::string(value) : std::string("auto"));
  if (message.empty()) return "";
  return "COPYTASK_CPU_KERNEL: " + message + " (unset it, or set it to auto, for the default)";
}

// The ones this project has met or is likely to: AMD's and Intel's server and desktop cores
// since 2017.
std::string cpu_microarchitecture(const std::string& vendor, unsigned family, unsigned model, bool avx512) {
  if (vendor == "AuthenticAMD") {
    if (family == 0x17) return model >= 0x30 ? "Zen 2" : "Zen / Zen+";
    if (family == 0x19) return avx512 ? "Zen 4" : "Zen 3";  // AVX-512 came with Zen 4; VMs mask the model
    if (family == 0x1a) return "Zen 5";
  }
  if (vendor == "GenuineIntel" && family == 6) {
    switch (model) {
      case 0x55: return "Skylake-SP / Cascade Lake";
      case 0x6a: case 0x6c: return "Ice Lake-SP";
      case 0x8f: return "Sapphire Rapids";
      case 0xcf: return "Emerald Rapids";
      case 0xad: case 0xae: return "Granite Rapids";
      case 0x7d: case 0x7e: return "Ice Lake";
      case 0x8c: case 0x8d: return "Tiger Lake";
      case 0x97: case 0x9a: return "Alder Lake";
      case 0xb7: case 0xba: case 0xbf: return "Raptor Lake";
      default: break;
    }
  }
  return "";
}

std::string CpuCore::text() const {
  if (vendor.empty()) return "not an x86 CPU";
  const char* maker = vendor == "AuthenticAMD" ? "AMD" : vendor == "GenuineIntel" ? "Intel" : vendor.c_str();
  char numbers[64];
  std::snprintf(numbers, sizeof numbers, " family %xh model %xh", family, model);
  return std::string(maker) + numbers + (microarchitecture.empty() ? "" : " (" + microarchitecture + ")");
}

CpuCore cpu_core() {
  CpuCore core;
#if COPYTASK_X86
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(0, &eax, &ebx, &ecx, &edx)) return core;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  core.vendor = vendor;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return core;
  const unsigned base_family = (eax >> 8) & 0xf, base_model = (eax >> 4) & 0xf;
  core.family = base_family == 0xf ? base_family + ((eax >> 20) & 0xff) : base_family;
  core.model = base_family == 0xf || base_family == 6 ? (((eax >> 16) & 0xf) << 4) + base_model : base_model;
  core.microarchitecture = cpu_microarchitecture(core.vendor, core.family, core.model, __builtin_cpu_supports("avx512f"));
#endif
  return core;
}

bool cpu_avx512_on_256_bit_pipes() {
  static const bool half = cpu_is_amd() && cpu_family() == 0x19;
  return half;
}

FmaPeak cpu_fma_peak_per_cycle(CpuVariant variant) {
  switch (variant) {
    case CpuVariant::x86_64_v4:
      if (cpu_avx512_on_256_bit_pipes())
        return {32, "AVX-512 on AMD family 19h (Zen 4): 512-bit FMAs on two 256-bit pipes, 2 x 8 x 2"};
      return {64, "AVX-512: two 512-bit FMA pipes, 2 x 16 x 2"};
    case CpuVariant::x86_64_v3: return {32, "AVX2: two 256-bit FMA pipes, 2 x 8 x 2"};
    case CpuVariant::generic: break;
  }
  return {16, "SSE2 without FMA: 4 lanes, a multiply pipe and an add pipe, 2 x 4 x 2"};
}

CpuClock cpu_clock() {
  for (const char* path : {"/sys/devices/system/cpu/cpu0/cpufreq/base_frequency",
                           "/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"}) {
    std::ifstream in(path);
    double khz = 0;
    if (in >> khz && khz > 0) return {khz / 1e6, path};
  }
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line)) {
    if (line.rfind("cpu MHz", 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::istringstream value(line.substr(colon + 1));
    double mhz = 0;
    if (value >> mhz && mhz > 0) return {mhz / 1e3, "/proc/cpuinfo cpu MHz (no cpufreq: the clock the kernel saw)"};
  }
  return {0, "unknown"};
}

}  // namespace copytask
