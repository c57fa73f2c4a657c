#include "compat/torch_compat.h"

#include <dlfcn.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/core/Generator.h>
#include <ATen/Context.h>
#include <torch/cuda.h>
#include <torch/utils.h>
#include <torch/version.h>

#include "compat/cuda_device.h"
#include "config/config.h"
#include "util/splitmix.h"

namespace copytask {

at::Generator generator_make(const c10::Device& device, uint64_t seed) {
  if (device.is_cpu()) return at::detail::createCPUGenerator(seed);
  // Any other device: clone its default generator (no device headers needed here, and the
  // same call in 1.13 and 2.x), then reseed the clone.
  at::Generator generator = at::globalContext().defaultGenerator(device).clone();
  generator.set_current_seed(seed);
  return generator;
}

c10::Device device_resolve(const std::string& name) {
  if (name == "cpu") return c10::Device(c10::kCPU);
  const bool has_cuda = torch::cuda::is_available();
  if (name == "cuda") {
    if (!has_cuda)
      throw ConfigError("train.device = cuda: no CUDA device is visible to this LibTorch build (" +
                        torch_version_string() + "); use train.device=cpu or auto");
    return c10::Device(c10::kCUDA, 0);
  }
  if (name == "auto") return has_cuda ? c10::Device(c10::kCUDA, 0) : c10::Device(c10::kCPU);
  throw ConfigError("train.device = " + name + ": must be auto, cpu or cuda");
}

std::string torch_version_string() { return TORCH_VERSION; }

int threads_configure(int64_t requested) {
  int threads = static_cast<int>(requested);
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  torch::set_num_threads(threads);
  // LibTorch parallelises with OpenMP; a multi-threaded OpenBLAS underneath starts its own
  // threads for every small GEMM and the two pools fight over the cores (measured: a
  // B=256 training step 3x slower on 2 cores). One BLAS thread inside OpenMP's is best.
  using SetThreads = void (*)(int);
  if (auto set_blas_threads = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")))
    set_blas_threads(1);
  return torch::get_num_threads();
}

namespace {
// The first number in a file, or -1.
double number_in(const std::string& path) {
  std::ifstream file(path);
  double value = -1;
  if (!(file >> value)) return -1;
  return value;
}
}  // namespace

double host_memory_available_bytes() {
  double available = -1;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line))
    if (line.rfind("MemAvailable:", 0) == 0) {
      std::istringstream fields(line.substr(13));
      double kib = 0;
      if (fields >> kib) available = kib * 1024;
    }
  // A cgroup (v2) limit below that, as in a container or a Slurm job ("max" reads as none).
  const double limit = number_in("/sys/fs/cgroup/memory.max"), used = number_in("/sys/fs/cgroup/memory.current");
  if (limit > 0 && used >= 0 && (available < 0 || limit - used < available)) available = limit - used;
  return available;
}

double device_memory_available_bytes(const c10::Device& device) {
  if (!device.is_cuda()) return -1;
  // Looked up at run time, so this file needs no CUDA headers and builds everywhere.
  using MemGetInfo = int (*)(size_t*, size_t*);
  auto mem_get_info = reinterpret_cast<MemGetInfo>(dlsym(RTLD_DEFAULT, "cudaMemGetInfo"));
  size_t free = 0, total = 0;
  if (!mem_get_info || mem_get_info(&free, &total) != 0) return -1;
  return static_cast<double>(free);
}

std::string cpu_model() {
  std::ifstream cpuinfo("/proc/cpuinfo");
  std::string line;
  while (std::getline(cpuinfo, line))
    if (line.rfind("model name", 0) == 0) {
      const auto colon = line.find(':');
      if (colon == std::string::npos) break;
      const auto start = line.find_first_not_of(" \t", colon + 1);
      return start == std::string::npos ? "unknown" : line.substr(start);
    }
  return "unknown";
}

GpuInfo gpu_info(const c10::Device& device) {
  GpuInfo info;
  if (!device.is_cuda()) return info;
  // Looked up at run time in the CUDA libraries LibTorch has loaded (the runtime and the
  // driver API keep these signatures across versions), so no CUDA header is needed here.
  using VersionOf = int (*)(int*);
  auto text = [](int version) { return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10); };
  int version = 0;
  if (auto runtime = reinterpret_cast<VersionOf>(dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion")); runtime && runtime(&version) == 0)
    info.cuda_runtime = text(version);
  if (auto driver = reinterpret_cast<VersionOf>(dlsym(RTLD_DEFAULT, "cudaDriverGetVersion")); driver && driver(&version) == 0)
    info.cuda_driver = text(version);
  // The name and the peak's inputs through ATen's device properties: libcuda's own symbols
  // (cuDeviceGetName) are usually not global, so dlsym does not find them.
  const CudaDeviceProperties properties = cuda_device_properties(device.has_index() ? device.index() : 0);
  info.name = properties.name;
  info.sm_count = properties.sm_count;
  info.clock_mhz = properties.clock_mhz;
  if (properties.major > 0) info.compute_capability = std::to_string(properties.major) + "." + std::to_string(properties.minor);
  return info;
}

uint64_t stream_seed(uint64_t seed, uint64_t stream) {
  // splitmix64 of (seed, stream): well-mixed, so nearby seeds give unrelated streams.
  return splitmix64_mix(seed * kSplitMixGamma + stream * 0xD1B54A32D192ED03ull + 0x8CB92BA72F3D8DD7ull);
}

}  // namespace copytask
