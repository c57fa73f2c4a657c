#include "model/schemes/scheme_util.h"

#include <cmath>

#include <ATen/core/Generator.h>

namespace copytask {

torch::Tensor signed_distances(int64_t positions, const torch::Device& device) {
  auto index = torch::arange(positions, torch::TensorOptions().dtype(torch::kFloat64).device(device));
  return index.unsqueeze(1) - index.unsqueeze(0);  // (P, P) i - j
}

torch::Tensor bias_from_distance_values(const torch::Tensor& values, int64_t positions) {
  auto index = torch::arange(positions, torch::TensorOptions().dtype(torch::kLong).device(values.device()));
  auto rows = (index.unsqueeze(1) - index.unsqueeze(0) + (positions - 1)).reshape({-1});  // (P*P) i - j + P - 1
  auto gathered = values.index_select(0, rows);                                            // (P*P, H)
  return gathered.view({positions, positions, values.size(1)}).permute({2, 0, 1});        // (H, P, P)
}

std::vector<double> host_values(const torch::Tensor& values) {
  const torch::Tensor host = values.detach().to(torch::kCPU, torch::kFloat64).contiguous();
  return std::vector<double>(host.data_ptr<double>(), host.data_ptr<double>() + host.numel());
}

void linear_init(torch::Tensor& weight, torch::Tensor& bias, at::Generator& generator) {
  torch::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(weight.size(0)));
  weight.uniform_(-bound, bound, generator);
  bias.uniform_(-bound, bound, generator);
}

}  // namespace copytask
