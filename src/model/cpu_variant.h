#pragma once
// Which compiled variant of the CPU kernels runs: the fused step (model/fused_cpu.cpp) and
// the positional hooks' kernels (model/hooks, model/schemes) are each compiled for
// x86-64-v4 (AVX-512 F, BW, DQ, VL: 16-wide registers), x86-64-v3 (AVX2, FMA: 8-wide)
// and the generic x86-64 target, in one binary. By default the kernels run the widest
// variant this CPU can run: x86-64-v4 where the CPU has AVX-512 (on AMD family 19h, Zen 4,
// too, whose AVX-512 runs on 256-bit pipes: measured faster there, docs/performance.md),
// x86-64-v3 where it has AVX2, else generic. COPYTASK_CPU_KERNEL (or cpu_variant_set, for
// the tests) forces one. A variant is bit-identical across thread counts, like each was
// before; the variants agree within float rounding.
#include <string>
#include <vector>

namespace copytask {

enum class CpuVariant { generic, x86_64_v3, x86_64_v4 };

// "generic", "x86-64-v3", "x86-64-v4".
const char* cpu_variant_name(CpuVariant variant);

// Every variant, the widest first.
std::vector<CpuVariant> cpu_variants_all();

// "" when this CPU can run the variant; else what it lacks ("avx512bw avx512vl").
std::string cpu_variant_missing(CpuVariant variant);

// The widest variant this CPU can run.
CpuVariant cpu_variant_widest();

// What runs unless a variant is forced ("auto"): the widest this CPU can run.
CpuVariant cpu_variant_default();

// The variant the kernels run: set by cpu_variant_set, else COPYTASK_CPU_KERNEL, else the
// default. Read at every kernel call (one relaxed atomic load).
CpuVariant cpu_variant_active();

// Forces a variant; returns "" or why it cannot (this CPU lacks it, or an unknown name).
std::string cpu_variant_set(CpuVariant variant);
std::string cpu_variant_set(const std::string& name);

// Reads COPYTASK_CPU_KERNEL ("auto" or unset: the default) and sets the variant; returns ""
// or the message for a value this CPU cannot run or that names no variant. The CLI calls
// it before any work, and stops with exit 2 on a message.
std::string cpu_variant_from_environment();

// The variant's FMA throughput on one core, in FLOP per cycle, and why that number:
// two FMA pipes of the register width (x86-64-v3: 2 x 8 x 2 = 32; x86-64-v4: 64, or 32 on
// AMD family 19h, Zen 3 and Zen 4, whose 512-bit operations run on 256-bit pipes); the
// generic target has no FMA (2 x 4 lanes, a multiply and an add: 16).
struct FmaPeak {
  double flop_per_cycle = 0;
  std::string why;
};
FmaPeak cpu_fma_peak_per_cycle(CpuVariant variant);

// The core the CPU kernels run on, as CPUID names it: the vendor, the family and model
// (base and extended, as the vendors' manuals number them), and the microarchitecture they
// stand for where a small table knows it ("Zen 4", "Sapphire Rapids", ...; "" otherwise).
// What bench records beside the share of the peak, since the share depends on the core.
struct CpuCore {
  std::string vendor;  // "AuthenticAMD", "GenuineIntel", ...; "" off x86
  unsigned family = 0, model = 0;
  std::string microarchitecture;
  // "AMD family 19h model 11h (Zen 4)"
  std::string text() const;
};
CpuCore cpu_core();
// The microarchitecture of a vendor's x86 family and model (cpu_core's table); "" unknown.
// avx512: whether the core runs AVX-512, which tells Zen 4 from Zen 3 in family 19h where a
// virtual machine reports another model number (this project's VM: model 1, Milan's, with
// AVX-512, which Milan lacks).
std::string cpu_microarchitecture(const std::string& vendor, unsigned family, unsigned model, bool avx512);

// Whether this CPU's 512-bit FMAs run on 256-bit pipes (AMD family 19h, Zen 4): a 16-lane
// FMA then costs two 8-lane ones, and the x86-64-v4 products take 8-lane tiles where 16
// lanes would compute more of them. Read once.
bool cpu_avx512_on_256_bit_pipes();

// The clock in GHz and where it was read: cpufreq's base or maximum frequency, else
// /proc/cpuinfo's "cpu MHz" (the clock the kernel last saw; in a VM usually the base).
// 0 and "unknown" when none can be read.
struct CpuClock {
  double ghz = 0;
  std::string source;
};
CpuClock cpu_clock();

}  // namespace copytask
