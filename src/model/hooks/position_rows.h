#pragma once
// What the hooks whose tables have a row per position share (additive, rotation, qk_scale):
// the position IDs' gather of each example's rows, in LibTorch and on the fused CPU
// step, and the scatter of their gradient back. Shapes: M members, B batch, T positions,
// P table positions, W floats per row.
#include <cstdint>

#include <torch/types.h>

#include "model/cpu_layers.h"

namespace copytask {

// (M, P, W...) stacked rows -> (M, B, T, W...): example b of member m reads rows positions[m, b, :].
inline torch::Tensor gather_position_rows(const torch::Tensor& stacked, const torch::Tensor& positions) {
  const int64_t M = positions.size(0), B = positions.size(1), T = positions.size(2), P = stacked.size(1);
  auto row_shape = stacked.sizes().slice(2).vec();  // (W...)
  auto member_rows = (torch::arange(M, positions.options()) * P).view({M, 1, 1}) + positions;  // (M, B, T): rows of (M*P)
  std::vector<int64_t> flat_shape{M * P};
  flat_shape.insert(flat_shape.end(), row_shape.begin(), row_shape.end());
  std::vector<int64_t> out_shape{M, B, T};
  out_shape.insert(out_shape.end(), row_shape.begin(), row_shape.end());
  return stacked.reshape(flat_shape).index_select(0, member_rows.reshape({-1})).view(out_shape);  // (M, B, T, W...)
}

namespace cpu {

// rows (T, W) = table rows pos[t] (each W floats).
COPYTASK_INLINE void position_rows_gather(const float* table, const int64_t* pos, float* rows, int64_t T, int64_t W) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t w = 0; w < W; ++w) rows[t * W + w] = table[pos[t] * W + w];
}

// table_grad rows pos[t] += grad_rows (T, W).
COPYTASK_INLINE void position_rows_scatter(const float* grad_rows, const int64_t* pos, float* table_grad, int64_t T,
                                           int64_t W) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t w = 0; w < W; ++w) table_grad[pos[t] * W + w] += grad_rows[t * W + w];
}

}  // namespace cpu
}  // namespace copytask
