#pragma once
// Helpers the scheme files share: signed distances, a bias table from per-distance values,
// and the small MLP of the learned-function biases (dynamic, fire).
// Shapes: P positions, H heads, W hidden width.
#include <torch/types.h>

namespace at {
struct Generator;
}

namespace copytask {

// d[i][j] = i - j (query minus key: positive when the key is to the left), float64 (P, P),
// made on `device`: a scheme computing its table on a GPU copies nothing from the host, so
// a CUDA graph can capture the forward pass.
torch::Tensor signed_distances(int64_t positions, const torch::Device& device = torch::kCPU);

// The (H, P, P) bias table from values per signed distance (2P-1, H), row k holding
// d = k - (P-1): bias[h][i][j] = values[i - j + P - 1][h].
torch::Tensor bias_from_distance_values(const torch::Tensor& values, int64_t positions);

// PyTorch's nn.Linear initialisation for a weight in (in, out) layout and its bias:
// both U(-1/sqrt(in), 1/sqrt(in)).
void linear_init(torch::Tensor& weight, torch::Tensor& bias, at::Generator& generator);

}  // namespace copytask
