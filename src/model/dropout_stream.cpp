#include "model/dropout_stream.h"

#include <cmath>

#include <torch/torch.h>

#include "kernels/cuda_switch.h"
#if COPYTASK_CUDA_KERNELS()
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "kernels/dropout_stream_kernel.h"
#endif

namespace copytask {

DropoutStream::DropoutStream(const std::vector<uint64_t>& member_keys, uint64_t step, double rate)
    : threshold(static_cast<uint32_t>(std::llround(rate * 65536.0))),
      kept_value(static_cast<float>(65536.0 / static_cast<double>(65536 - static_cast<int64_t>(threshold)))) {
  // Each step's key: the member's key and the step number mixed, so steps do not overlap.
  for (uint64_t key : member_keys) step_keys.push_back(splitmix64_mix(key ^ splitmix64_mix((step + 1) * kSplitMixGamma)));
}

namespace {

// x >> k as an unsigned 64-bit shift, on int64 tensors (whose >> keeps the sign).
torch::Tensor logical_shift_right(const torch::Tensor& x, int64_t k) {
  return torch::bitwise_and(x.__rshift__(k), static_cast<int64_t>((uint64_t{1} << (64 - k)) - 1));
}

// splitmix64_mix on int64 tensors: products wrap modulo 2^64 as the uint64 ones do.
torch::Tensor splitmix64_mix_tensor(torch::Tensor x) {
  x = torch::bitwise_xor(x, logical_shift_right(x, 30)) * static_cast<int64_t>(0xBF58476D1CE4E5B9ULL);
  x = torch::bitwise_xor(x, logical_shift_right(x, 27)) * static_cast<int64_t>(0x94D049BB133111EBULL);
  return torch::bitwise_xor(x, logical_shift_right(x, 31));
}

}  // namespace

torch::Tensor dropout_stream_masks(const DropoutStream& stream, int64_t first, int64_t count, const torch::Device& device) {
  std::vector<int64_t> keys;
  for (uint64_t key : stream.step_keys) keys.push_back(static_cast<int64_t>(key));
  return dropout_stream_masks(torch::tensor(keys, torch::kLong).to(device), stream.threshold, stream.kept_value, first,
                              count);  // (M, count)
}

torch::Tensor dropout_stream_masks(const torch::Tensor& step_keys, uint32_t threshold, float kept_value, int64_t first,
                                   int64_t count) {
  const int64_t M = step_keys.size(0);
#if COPYTASK_CUDA_KERNELS()
  if (step_keys.is_cuda()) {
    // One kernel writes every mask (kernels/dropout_stream_kernel.cu), on the current stream.
    const c10::cuda::CUDAGuard on_device(step_keys.device());
    const auto keys = step_keys.contiguous();
    auto out = torch::empty({M, count}, torch::TensorOptions().dtype(torch::kFloat32).device(step_keys.device()));
    const int error = dropout_stream_masks_launch(keys.data_ptr<int64_t>(), M, first, count, threshold, kept_value,
                                                  out.data_ptr<float>(), c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(error == 0, "the dropout mask kernel did not launch (cudaError_t ", error, ")");
    return out;  // (M, count)
  }
#endif
  // Elsewhere (the CPU, or a CUDA build without the kernel): integer tensor operations.
  auto options = step_keys.options();
  const int64_t first_word = first >> 2, last_word = (first + count + 3) >> 2;  // the words that hold the range
  auto words = torch::arange(first_word, last_word, options);                                     // (W)
  auto counters = step_keys.view({M, 1}) + (words + 1) * static_cast<int64_t>(kSplitMixGamma);   // (M, W)
  auto bits = splitmix64_mix_tensor(counters);                                                    // (M, W)
  // Four 16-bit lanes per word, lane l = bits >> 16 l: element 4w + l.
  auto lanes = torch::stack({torch::bitwise_and(bits, 0xffff), torch::bitwise_and(logical_shift_right(bits, 16), 0xffff),
                             torch::bitwise_and(logical_shift_right(bits, 32), 0xffff), logical_shift_right(bits, 48)},
                            2);                                                                   // (M, W, 4)
  auto lane_values = lanes.view({M, -1}).narrow(1, first - 4 * first_word, count);               // (M, count)
  auto kept = torch::full({}, kept_value, torch::TensorOptions().device(step_keys.device()));
  return torch::where(lane_values < static_cast<int64_t>(threshold), torch::zeros_like(kept), kept);  // (M, count)
}

torch::Tensor dropout_step_keys(const torch::Tensor& member_keys, const torch::Tensor& step) {
  // splitmix64_mix(key ^ splitmix64_mix((step + 1) * gamma)), as DropoutStream's constructor.
  auto step_mix = splitmix64_mix_tensor((step + 1) * static_cast<int64_t>(kSplitMixGamma));  // ()
  return splitmix64_mix_tensor(torch::bitwise_xor(member_keys, step_mix));                 // (M)
}

}  // namespace copytask
