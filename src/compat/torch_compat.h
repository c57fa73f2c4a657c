#pragma once
// The one place where LibTorch versions (Debian's 1.13 CPU build, a PyTorch 2.x wheel's
// CUDA build) and devices differ. Everything else calls these.
#include <cstdint>
#include <string>

#include <c10/core/Device.h>

namespace at {
struct Generator;  // ATen/core/Generator.h, kept out of the command line's translation units
}

namespace copytask {

// A fresh random generator on `device`, seeded: one per member, so a member's random
// numbers never depend on which members train beside it.
at::Generator generator_make(const c10::Device& device, uint64_t seed);

// "auto" -> cuda when available, else cpu; "cuda" without a GPU is a ConfigError.
c10::Device device_resolve(const std::string& name);

// "1.13.1", "2.4.0+cu121", ...
std::string torch_version_string();

// Sets LibTorch's CPU threads (0 = one per core); returns the count in use.
int threads_configure(int64_t requested);

// Memory this process could still take on the host: MemAvailable, or the cgroup's limit
// less its usage when that is lower; a negative number when unknown.
double host_memory_available_bytes();
// Free memory of a CUDA device (cudaMemGetInfo, when the CUDA runtime is loaded); a
// negative number on the CPU or when unknown.
double device_memory_available_bytes(const c10::Device& device);

// What run.json and bench.json record of a GPU: its name, the inputs of its peak (SMs,
// clock, compute capability; compat/cuda_device.h) and the CUDA runtime and driver
// versions ("13.0"); empty on the CPU or when unknown.
struct GpuInfo {
  std::string name, cuda_runtime, cuda_driver, compute_capability;
  int sm_count = 0;
  double clock_mhz = 0;
};
GpuInfo gpu_info(const c10::Device& device);

// The host's CPU model ("AMD EPYC 7B13"), from /proc/cpuinfo's first "model name"; "unknown"
// where there is none. run.json records it so that timings name the machine they came from.
std::string cpu_model();

// Splits a 64-bit seed into independent streams: stream_seed(seed, 1), (seed, 2), ...
uint64_t stream_seed(uint64_t seed, uint64_t stream);

}  // namespace copytask
