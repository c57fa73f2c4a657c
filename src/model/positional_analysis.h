#pragma once
// positional.json (docs/design.md section 5): what each member's positions look like, read
// off its hooks (each hook's describe(), model/hooks/hook.h) so a new scheme is analysed
// without new code here. The helpers the hooks use:
//   additive (fixed or learned table): position-by-position dot product and cosine
//     similarity, and a 2-D PCA of the T position vectors; a learned table also gets its
//     path over training, each evaluation's table projected on the final PCA axes;
//   rotation: the relative score kernel, q_m . k_n of equal contents as a function of m - n;
//   score_bias: each head's (T, T) bias, and its mean as a function of the signed distance.
// Shapes: T positions, D embed, H heads, Dh = D / H.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/positional.h"

namespace copytask {

// A (R, C) tensor as nested JSON lists, rounded to 6 decimals (the files stay small and
// diffable); attention.json's maps use it too.
nlohmann::json matrix_json(const torch::Tensor& matrix);

// The PCA of position vectors: the mean (D) and the first two principal axes (D, 2), each
// axis signed so that its largest component is positive (a fixed orientation).
struct PositionPca {
  torch::Tensor mean, axes;
  std::vector<double> explained_variance_ratio;  // of the two axes
};

// vectors (T, D) -> {"dot": TxT, "cosine": TxT, "pca": {"points": Tx2, "explained_variance_ratio": [2]}}
nlohmann::json position_vectors_json(const torch::Tensor& vectors, PositionPca* pca_out = nullptr);
PositionPca position_pca(const torch::Tensor& vectors);
// vectors (T, D) projected on a PCA's axes -> Tx2 points.
nlohmann::json position_projection_json(const torch::Tensor& vectors, const PositionPca& pca);

// The relative kernel of a rotation table: q = k = ones(Dh) at every position, turned by
// the angles (T, Dh/2), score(d) = mean over m - n = d of q_m . k_n / Dh, for
// d = -(T-1) .. T-1. -> {"distance": [...], "score": [...], "head_dim": Dh}
nlohmann::json relative_kernel_json(const torch::Tensor& angles);

// A score-bias table (H, T, T) as a function of the signed distance d = i - j (query minus
// key): per head, the mean of bias[h, i, j] over i - j = d (a relative bias depends on d
// alone; FIRE's also on i). -> {"distance": [-(T-1) .. T-1], "heads": [H][2T-1]}
nlohmann::json bias_by_distance_json(const torch::Tensor& bias);

// One member's entry of positional.json: {"seed", then what each hook of the member shows
// of its table (model/hooks/*.cpp, Hook::describe):
//   additive:   "vectors" (and "path" for a learned table: learned_path, its table at each
//               evaluation, (step, (T, D)), projected on the final PCA axes);
//   rotation:   "relative_kernel";   qk_scale: "qk_scale" (the scale of q_i . k_j by i - j);
//   score_bias: "bias" [H][T][T] and "bias_by_distance";
//   content:    "content_score" [L][H][T][T], the term on the first probe (probe_terms: per
//               block (H, T, T); none when empty);
// and the values each component reports (ALiBi's "slopes", KERPLE's "r1", "r2", the length
// scale's "length_scale", ...), and "hooks": the names of its hooks}.
nlohmann::json positional_member_json(PositionalScheme& scheme, int64_t seed, int64_t positions,
                                      const std::vector<std::pair<int64_t, torch::Tensor>>& learned_path,
                                      const std::vector<torch::Tensor>& probe_terms = {});

}  // namespace copytask
