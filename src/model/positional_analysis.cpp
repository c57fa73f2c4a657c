#include "model/positional_analysis.h"

#include <cmath>

#include <torch/torch.h>

#include "model/hooks/hook.h"
#include "model/positional.h"

namespace copytask {
nlohmann::json matrix_json(const torch::Tensor& matrix) {
  auto m = matrix.to(torch::kCPU, torch::kFloat64).contiguous();  // the host's copy, from any device
  auto a = m.accessor<double, 2>();
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t i = 0; i < m.size(0); ++i) {
    nlohmann::json row = nlohmann::json::array();
    for (int64_t j = 0; j < m.size(1); ++j) row.push_back(std::round(a[i][j] * 1e6) / 1e6);
    rows.push_back(row);
  }
  return rows;
}

PositionPca position_pca(const torch::Tensor& vectors) {
  auto x = vectors.to(torch::kFloat64);                       // (T, D)
  PositionPca pca;
  pca.mean = x.mean(0);                                       // (D)
  auto centered = x - pca.mean;                               // (T, D)
  auto covariance = centered.t().mm(centered);                // (D, D)
  // at::linalg_eigh: in LibTorch 1.13 and 2.x alike (2.x dropped torch/linalg.h).
  auto [values, vectors_by_column] = at::linalg_eigh(covariance, "L");  // ascending eigenvalues
  const int64_t D = x.size(1), kept = std::min<int64_t>(2, D);
  auto axes = vectors_by_column.narrow(1, D - kept, kept).flip({1});        // (D, kept) largest first
  // Fix each axis' sign: its largest component positive.
  auto largest = axes.abs().argmax(0);                                      // (kept)
  auto signs = axes.gather(0, largest.unsqueeze(0)).sign();                 // (1, kept)
  axes = axes * signs;
  if (kept < 2) axes = torch::cat({axes, torch::zeros({D, 2 - kept}, axes.options())}, 1);  // (D, 2)
  pca.axes = axes;
  const double total = values.clamp_min(0).sum().item<double>();
  auto top = values.flip({0}).clamp_min(0);
  for (int64_t i = 0; i < 2; ++i)
    pca.explained_variance_ratio.push_back(i < kept && total > 0 ? top[i].item<double>() / total : 0.0);
  return pca;
}

nlohmann::json position_projection_json(const torch::Tensor& vectors, const PositionPca& pca) {
  return matrix_json((vectors.to(torch::kFloat64) - pca.mean).mm(pca.axes));  // (T, 2)
}

nlohmann::json position_vectors_json(const torch::Tensor& vectors, PositionPca* pca_out) {
  auto x = vectors.to(torch::kFloat64);                        // (T, D)
  auto dot = x.mm(x.t());                                      // (T, T)
  auto norms = x.norm(2, 1).clamp_min(1e-12);                  // (T)
  auto cosine = dot / norms.unsqueeze(1) / norms.unsqueeze(0); // (T, T)
  PositionPca pca = position_pca(x);
  nlohmann::json out = {{"dot", matrix_json(dot)},
                        {"cosine", matrix_json(cosine)},
                        {"pca", {{"points", position_projection_json(x, pca)},
                                 {"explained_variance_ratio", pca.explained_variance_ratio}}}};
  if (pca_out) *pca_out = pca;
  return out;
}

nlohmann::json relative_kernel_json(const torch::Tensor& angles) {
  const int64_t T = angles.size(0), head_dim = 2 * angles.size(1);
  // Turned in float32, as the model turns q and k; the products in float64.
  auto cos = angles.to(torch::kFloat32).cos(), sin = angles.to(torch::kFloat32).sin();  // (T, Dh/2)
  auto ones = torch::ones({T, head_dim});                                                // (T, Dh): the same content everywhere
  auto q = rotate_pairs(ones, cos, sin).to(torch::kFloat64);                             // (T, Dh)
  auto k = rotate_pairs(ones, cos, sin).to(torch::kFloat64);                             // (T, Dh)
  auto scores = q.mm(k.t()) / static_cast<double>(head_dim);                             // (T, T) [m][n]
  nlohmann::json distance = nlohmann::json::array(), score = nlohmann::json::array();
  for (int64_t d = -(T - 1); d <= T - 1; ++d) {
    // The diagonal m - n = d: torch's diagonal(offset) takes n - m = offset.
    const double mean = scores.diagonal(-d).mean().item<double>();
    distance.push_back(d);
    score.push_back(std::round(mean * 1e6) / 1e6);
  }
  return {{"distance", distance}, {"score", score}, {"head_dim", head_dim}};
}

nlohmann::json bias_by_distance_json(const torch::Tensor& bias) {
  const int64_t H = bias.size(0), T = bias.size(1);
  auto b = bias.to(torch::kFloat64);
  nlohmann::json distance = nlohmann::json::array(), heads = nlohmann::json::array();
  for (int64_t d = -(T - 1); d <= T - 1; ++d) distance.push_back(d);
  for (int64_t h = 0; h < H; ++h) {
    nlohmann::json values = nlohmann::json::array();
    for (int64_t d = -(T - 1); d <= T - 1; ++d)
      values.push_back(std::round(b[h].diagonal(-d).mean().item<double>() * 1e6) / 1e6);  // i - j = d
    heads.push_back(values);
  }
  return {{"distance", distance}, {"heads", heads}};
}

nlohmann::json positional_member_json(PositionalScheme& scheme, int64_t seed, int64_t positions,
                                      const std::vector<std::pair<int64_t, torch::Tensor>>& learned_path,
                                      const std::vector<torch::Tensor>& probe_terms) {
  torch::NoGradGuard no_grad;
  nlohmann::json out = {{"seed", seed}};
  nlohmann::json names = nlohmann::json::array();
  for (const Hook* hook : scheme.member_hooks()) {
    PositionalScheme& owner = *scheme.owner_of(*hook);
    HookDescription member{owner};
    if (hook->stacks()) member.table = owner.table(*hook, positions).detach().cpu();
    member.positions = positions;
    member.causal = scheme.shape().causal;
    member.learned_path = learned_path;
    member.probe_terms = probe_terms;
    hook->describe(member, out);
    names.push_back(hook->name());
  }
  out["hooks"] = names;
  for (PositionalScheme* component : scheme.components())
    for (const auto& [key, values] : component->reported_values()) out[key] = values;
  return out;
}

}  // namespace copytask
