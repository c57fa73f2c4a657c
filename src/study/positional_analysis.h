#pragma once
// positional.json (DESIGN.md section 5): what each scheme's positions look like, read off
// the scheme's own hook so a new scheme is analysed without new code here:
//   additive (fixed or learned table): position-by-position dot product and cosine
//     similarity, and a 2-D PCA of the T position vectors; a learned table also gets its
//     path over training, each evaluation's table projected on the final PCA axes;
//   rotate_qk: the relative score kernel, q_m . k_n of equal contents as a function of m - n;
//   score_bias: each head's (T, T) bias.
// Shapes: T positions, D embed, H heads, Dh = D / H.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

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

// The relative kernel of a rotating scheme: q = k = ones(Dh) at every position, rotated
// by the scheme, score(d) = mean over m - n = d of q_m . k_n / Dh, for d = -(T-1) .. T-1.
// -> {"distance": [...], "score": [...], "head_dim": Dh}
nlohmann::json relative_kernel_json(const std::string& positional, int64_t positions, int64_t head_dim);

// One member's entry of positional.json: {"seed", plus the fields of its scheme's hook}.
// learned_table: the member's final (T, D) table (learned schemes); learned_path: its
// table at each evaluation, (step, (T, D)).
nlohmann::json positional_member_json(const std::string& positional, int64_t seed, int64_t positions, int64_t embed,
                                      int64_t heads, const torch::Tensor& learned_table,
                                      const std::vector<std::pair<int64_t, torch::Tensor>>& learned_path);

}  // namespace copytask
