#pragma once
// Helpers the scheme files share: signed distances, a bias table from per-distance values,
// and the small MLP of the learned-function biases (dynamic, fire).
// Shapes: P positions, H heads, W hidden width.
#include <string>
#include <vector>

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

// A tensor's values on the host, as float64, flat (reported_values, positional.json): copied
// from whatever device it lives on (reading a GPU tensor's data_ptr on the host crashes).
std::vector<double> host_values(const torch::Tensor& values);

}  // namespace copytask

namespace copytask {

struct RopeRescaling;
struct PositionalOptions;

// RoPE's pieces, shared by rope and xpos (model/schemes/rope.cpp): the rotated pairs
// R / 2 = floor(fraction * Dh / 2); why a rescaling cannot apply ("" when it can); the
// angles (P, Dh/2) float32, rescaled when asked; YaRN's temperature as a qk_scale table
// (2, P, Dh/2); and why a model's sizes cannot rotate ("" when they can).
int64_t rope_rotated_pairs(double fraction, int64_t head_dim);
std::string rope_rescaling_problem(const RopeRescaling& rescaling, int64_t pairs);
torch::Tensor rope_angles(int64_t positions, int64_t head_dim, double base, int64_t pairs,
                          const RopeRescaling& rescaling);
torch::Tensor yarn_log_scale(int64_t positions, int64_t head_dim, double factor);
std::string rope_shape_problem(const PositionalOptions& options, int64_t embed, int64_t heads);

}  // namespace copytask
