#pragma once
// The encoder's row-wise layers for a group of 16 examples with the examples across a
// vector's lanes (the layout of cpu_attention_lanes.h: element i of the 16 examples at 16 i ..
// 16 i + 15, lane e example e's): the linear layers' forward and input gradient, their weight
// gradient, the layer norm forward and backward, and the cross-entropy. model/fused_cpu.cpp
// runs every block, the final layer norm, the head and the loss in this layout around the
// attention across the lanes, so that nothing is transposed between the layers.
//
// Every activation and every gradient at an activation is the number the example-at-a-time
// layers of cpu_layers.h give, bit for bit: each lane runs their operations in their order (a
// linear layer's sums from the bias or 0 over k in order, one multiply-add a k; a layer
// norm's sums in rows_sum's order). The parameters' gradients, sums over the examples, are
// summed a lane apart (each lane its examples' in order) and across the lanes at a
// partition's end: the same terms in another order, so the same numbers within rounding.
// Kept in the examples' order, they had to read each gradient's rows out of the lanes: the
// transpositions had cost what the lanes saved (docs/performance.md).
//
// Shapes: T positions, I inputs, O outputs, D the layer norm's width; "(T, I) in lanes" is T I
// lanes elements, element (t, i) at 16 (t I + i).
#include <cmath>
#include <cstdint>
#include <limits>

#include "model/cpu_attention_lanes.h"
#include "model/cpu_layers.h"

namespace copytask::cpu {

// ---- Linear layers across the lanes ------------------------------------------------------

// What a linear layer's tile does with its sums y, at each element's offset in C: the
// pointwise pass that followed the product, done while y is in registers (the passes over
// the layer's output in memory had taken 7% of the step). Each is the operation of
// cpu_layers.h's pass in its order, so the same bits.
enum class LanesEpilogue {
  store,          // C = y
  residual,       // C += y * mask (or + y): residual_forward, C the residual stream
  relu,           // C = y, activated = relu(y) * mask (or relu(y)): relu_forward after the store
  relu_backward,  // C = (pre > 0 ? y : 0) * mask (or without): relu_backward of y, the layer's
                  // input gradient, into the gradient at the pre-activation
};

// C (rows, O) in lanes = bias (O) (or 0) + A (rows, K) in lanes @ W (K, O), W shared by the
// lanes: A(r, k) at A + 16 (r a_row + k), W(k, o) at W[k w_row + o], C(r, o) at C + 16 (r c_row
// + o). Each lane's sum is matmul_tile's: the bias (or 0), then one multiply-add a k in order;
// then the epilogue. mask, pre and activated are laid out as C.
struct LanesLinear {
  const float* A;
  int64_t a_row;
  const float* W;
  int64_t w_row;
  const float* bias;  // (O), or null
  float* C;
  int64_t c_row;
  int64_t rows, K, O;
  LanesEpilogue epilogue = LanesEpilogue::store;
  const float* mask = nullptr;   // dropout's, or null (residual, relu, relu_backward)
  const float* pre = nullptr;    // the pre-activation (relu_backward)
  float* activated = nullptr;    // relu's output (relu)
};

// The epilogue E of a tile's sums acc (R, NO) at rows r0.., columns o0.., lanes lane..: at
// each element's offset in C (and in mask, pre, activated); Masked: p.mask is given.
template <LanesEpilogue E, bool Masked, class Vec, int R, int NO>
COPYTASK_INLINE void lanes_linear_finish(const LanesLinear& p, int64_t r0, int64_t o0, int64_t lane,
                                         const Vec (&acc)[R][NO]) {
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < NO; ++o) {
      const int64_t at = lane + kExampleLanes * ((r0 + r) * p.c_row + o0 + o);
      const Vec y = acc[r][o];
      if constexpr (E == LanesEpilogue::store) {
        store_vec(p.C + at, y);
      } else if constexpr (E == LanesEpilogue::residual) {
        const Vec x = load_vec<Vec>(p.C + at);
        if constexpr (Masked) store_vec(p.C + at, x + y * load_vec<Vec>(p.mask + at));
        else store_vec(p.C + at, x + y);
      } else if constexpr (E == LanesEpilogue::relu) {
        store_vec(p.C + at, y);
        const Vec kept = y > 0.0f ? y : Vec{};
        store_vec(p.activated + at, Masked ? kept * load_vec<Vec>(p.mask + at) : kept);
      } else {
        const Vec passed = load_vec<Vec>(p.pre + at) > 0.0f ? y : Vec{};
        store_vec(p.C + at, Masked ? passed * load_vec<Vec>(p.mask + at) : passed);
      }
    }
}

// The tile: rows r0 .. r0 + R - 1, columns o0 .. o0 + NO - 1, lanes lane .. lane + W - 1. Each
// k loads R vectors of A and broadcasts NO weights for R NO multiply-adds.
template <class Vec, int R, int NO, bool Bias>
COPYTASK_INLINE void lanes_linear_tile(const LanesLinear& p, int64_t r0, int64_t o0, int64_t lane) {
  Vec acc[R][NO];
  for (int r = 0; r < R; ++r)
    for (int o = 0; o < NO; ++o) acc[r][o] = Bias ? Vec{} + p.bias[o0 + o] : Vec{};
  const float* a_k = p.A + lane + kExampleLanes * r0 * p.a_row;
  const float* w_k = p.W + o0;
  for (int64_t k = 0; k < p.K; ++k, a_k += kExampleLanes, w_k += p.w_row) {
    Vec a[R];
    for (int r = 0; r < R; ++r) a[r] = load_vec<Vec>(a_k + kExampleLanes * r * p.a_row);
    for (int o = 0; o < NO; ++o) {
      const float w = w_k[o];
      for (int r = 0; r < R; ++r) acc[r][o] += a[r] * w;
    }
  }
  constexpr auto store = LanesEpilogue::store, residual = LanesEpilogue::residual, relu = LanesEpilogue::relu,
                 relu_backward = LanesEpilogue::relu_backward;
  switch (p.epilogue) {  // once a tile
    case store: return lanes_linear_finish<store, false>(p, r0, o0, lane, acc);
    case residual:
      return p.mask ? lanes_linear_finish<residual, true>(p, r0, o0, lane, acc)
                    : lanes_linear_finish<residual, false>(p, r0, o0, lane, acc);
    case relu:
      return p.mask ? lanes_linear_finish<relu, true>(p, r0, o0, lane, acc)
                    : lanes_linear_finish<relu, false>(p, r0, o0, lane, acc);
    case relu_backward:
      return p.mask ? lanes_linear_finish<relu_backward, true>(p, r0, o0, lane, acc)
                    : lanes_linear_finish<relu_backward, false>(p, r0, o0, lane, acc);
  }
}

// lanes_linear_tile as lanes_tiles (cpu_attention_lanes.h) calls it, the tiles of the
// attention's products with a broadcast weight where those have a vector of B; the bias start
// chosen once, outside the tiles.
template <bool Bias>
struct LanesLinearTile {
  const LanesLinear& p;
  template <class Vec, int R, int NO>
  COPYTASK_INLINE void run(int64_t r0, int64_t o0, int64_t lane) const {
    lanes_linear_tile<Vec, R, NO, Bias>(p, r0, o0, lane);
  }
};

template <class Lanes>
COPYTASK_INLINE void lanes_linear_started(const LanesLinear& p) {
  if (p.bias) lanes_tiles<Lanes>(LanesLinearTile<true>{p}, p.rows, p.O);
  else lanes_tiles<Lanes>(LanesLinearTile<false>{p}, p.rows, p.O);
}

// Out of line, one function per variant, as matmul and lanes_product.
#if COPYTASK_CPU_VARIANTS
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) inline void lanes_linear_x86_64_v4(
    const LanesLinear& p) {
  lanes_linear_started<LanesV4>(p);
}
__attribute__((noinline, target("arch=x86-64-v3"))) inline void lanes_linear_x86_64_v3(const LanesLinear& p) {
  lanes_linear_started<LanesV3>(p);
}
#endif
__attribute__((noinline)) inline void lanes_linear_generic(const LanesLinear& p) { lanes_linear_started<LanesGeneric>(p); }

template <class Lanes>
COPYTASK_INLINE void lanes_linear(const LanesLinear& p) {
#if COPYTASK_CPU_VARIANTS
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v4) return lanes_linear_x86_64_v4(p);
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v3) return lanes_linear_x86_64_v3(p);
#endif
  lanes_linear_generic(p);
}

// linear_forward across the lanes: out (T, O) = in (T, I) @ w (I, O) + bias (O), both in lanes;
// bias may be null.
template <class Lanes>
COPYTASK_INLINE void linear_forward_lanes(const float* in_l, const float* w, const float* bias, float* out_l, int64_t T,
                                          int64_t I, int64_t O) {
  lanes_linear<Lanes>(LanesLinear{in_l, I, w, O, bias, out_l, O, T, I, O});
}

// x (T, O) += in (T, I) @ w (I, O) + bias (O), times the dropout mask (T, O) where given:
// linear_forward_lanes then residual_forward, in one pass. All in lanes.
template <class Lanes>
COPYTASK_INLINE void linear_residual_lanes(const float* in_l, const float* w, const float* bias, const float* mask_l,
                                           float* x_l, int64_t T, int64_t I, int64_t O) {
  lanes_linear<Lanes>(LanesLinear{in_l, I, w, O, bias, x_l, O, T, I, O, LanesEpilogue::residual, mask_l});
}

// pre (T, O) = in (T, I) @ w (I, O) + bias (O), and hidden (T, O) = relu(pre) times the
// dropout mask where given: linear_forward_lanes then relu_forward, in one pass. All in lanes.
template <class Lanes>
COPYTASK_INLINE void linear_relu_lanes(const float* in_l, const float* w, const float* bias, const float* mask_l,
                                       float* pre_l, float* hidden_l, int64_t T, int64_t I, int64_t O) {
  lanes_linear<Lanes>(
      LanesLinear{in_l, I, w, O, bias, pre_l, O, T, I, O, LanesEpilogue::relu, mask_l, nullptr, hidden_l});
}

// linear_backward's input gradient across the lanes: grad_in (T, I) = grad_out (T, O) @ w^T,
// both in lanes, read from w_t = w^T (O, I).
template <class Lanes>
COPYTASK_INLINE void linear_input_gradient_lanes(const float* grad_out_l, const float* w_t, float* grad_in_l, int64_t T,
                                                 int64_t I, int64_t O) {
  lanes_linear<Lanes>(LanesLinear{grad_out_l, O, w_t, I, nullptr, grad_in_l, I, T, O, I});
}

// The input gradient through a ReLU layer's output: grad_pre (T, I) = relu_backward of
// grad_out (T, O) @ w^T at pre (T, I), times the dropout mask (T, I) where given: what
// linear_input_gradient_lanes then relu_backward give, in one pass. All in lanes.
template <class Lanes>
COPYTASK_INLINE void linear_input_gradient_relu_lanes(const float* grad_out_l, const float* w_t, const float* pre_l,
                                                      const float* mask_l, float* grad_pre_l, int64_t T, int64_t I,
                                                      int64_t O) {
  lanes_linear<Lanes>(
      LanesLinear{grad_out_l, O, w_t, I, nullptr, grad_pre_l, I, T, O, I, LanesEpilogue::relu_backward, mask_l, pre_l});
}

// fc1 and its activation f: pre (T, O) = in (T, I) @ w (I, O) + bias (O), hidden (T, O) = f(pre)
// times the dropout mask where given. ReLU in the layer's tiles (linear_relu_lanes); another f
// (GELU) its own pass after the layer (activation_forward). All in lanes.
template <class Lanes>
COPYTASK_INLINE void linear_activation_lanes(Activation f, const float* in_l, const float* w, const float* bias,
                                             const float* mask_l, float* pre_l, float* hidden_l, int64_t T, int64_t I,
                                             int64_t O) {
  if (f == Activation::relu) return linear_relu_lanes<Lanes>(in_l, w, bias, mask_l, pre_l, hidden_l, T, I, O);
  linear_forward_lanes<Lanes>(in_l, w, bias, pre_l, T, I, O);
  activation_forward(f, pre_l, mask_l, hidden_l, kExampleLanes * T * O);
}

// Its backward's input gradient through the layer after it: grad_pre (T, I) = the backward of
// f at pre (T, I) of grad_out (T, O) @ w^T, times the dropout mask (T, I) where given, w^T read
// from w_t (O, I). ReLU's backward in that layer's tiles (linear_input_gradient_relu_lanes);
// another f's after them, through grad_hidden (T, I), the gradient at f's output (unused with
// ReLU). All in lanes.
template <class Lanes>
COPYTASK_INLINE void linear_input_gradient_activation_lanes(Activation f, const float* grad_out_l, const float* w_t,
                                                            const float* pre_l, const float* mask_l,
                                                            float* grad_hidden_l, float* grad_pre_l, int64_t T,
                                                            int64_t I, int64_t O) {
  if (f == Activation::relu)
    return linear_input_gradient_relu_lanes<Lanes>(grad_out_l, w_t, pre_l, mask_l, grad_pre_l, T, I, O);
  linear_input_gradient_lanes<Lanes>(grad_out_l, w_t, grad_hidden_l, T, I, O);
  activation_backward(f, pre_l, mask_l, grad_hidden_l, grad_pre_l, kExampleLanes * T * I);
}

// linear_backward's weight and bias gradients, each lane's own: grad_w_l (I, O) += in^T @
// grad_out and grad_bias_l (O) += the column sums of grad_out (when given), lane e summing
// example e's rows in order. in (T, I), grad_out (T, O) and both gradients in lanes. The
// examples' sums stay apart, one a lane, for a whole partition of the batch, and are added
// across the lanes at its end (model/fused_cpu.cpp): a sum over the examples in an order of
// lanes, not the examples' one after another that linear_backward takes over a group's rows.
template <class Lanes>
COPYTASK_INLINE void linear_weight_gradient_lanes(const float* in_l, const float* grad_out_l, float* grad_w_l,
                                                  float* grad_bias_l, int64_t T, int64_t I, int64_t O) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  if (grad_bias_l)
    for (int64_t lane = 0; lane < kExampleLanes; lane += W)
      for (int64_t o = 0; o < O; ++o) {
        Vec sum = load_vec<Vec>(grad_bias_l + kExampleLanes * o + lane);
        for (int64_t t = 0; t < T; ++t) sum += load_vec<Vec>(grad_out_l + kExampleLanes * (t * O + o) + lane);
        store_vec(grad_bias_l + kExampleLanes * o + lane, sum);
      }
  // grad_w (i, o) += sum over t of in(t, i) grad_out(t, o).
  lanes_product<Lanes>(LanesProduct{in_l, 1, I, grad_out_l, O, 1, grad_w_l, O, 1, I, T, O, true});
}

// ---- Layer norm across the lanes -------------------------------------------------------------
// Each lane's sums are rows_sum's, rows_dot's and rows_squared_deviation's: eight partial sums
// from 0 of every eighth element (d, d + 8, ... below full_lanes(D)), added as lanes_sums adds
// them, then the last D % 8 elements one at a time. Element d of row t at x + 16 (t D + d).

template <class Vec>
COPYTASK_INLINE Vec lanes_partial_sums_added(const Vec (&acc)[8]) {
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

// The lanes' sum over d < D of x_t[16 d].
template <class Vec>
COPYTASK_INLINE Vec lanes_row_sum(const float* x_t, int64_t D) {
  Vec acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = Vec{};
  const int64_t full = full_lanes(D);
  for (int64_t d = 0; d < full; d += 8)
    for (int j = 0; j < 8; ++j) acc[j] += load_vec<Vec>(x_t + kExampleLanes * (d + j));
  Vec sum = lanes_partial_sums_added(acc);
  for (int64_t d = full; d < D; ++d) sum += load_vec<Vec>(x_t + kExampleLanes * d);
  return sum;
}

// The lanes' sum over d < D of x_t[16 d] y_t[16 d].
template <class Vec>
COPYTASK_INLINE Vec lanes_row_dot(const float* x_t, const float* y_t, int64_t D) {
  Vec acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = Vec{};
  const int64_t full = full_lanes(D);
  for (int64_t d = 0; d < full; d += 8)
    for (int j = 0; j < 8; ++j)
      acc[j] += load_vec<Vec>(x_t + kExampleLanes * (d + j)) * load_vec<Vec>(y_t + kExampleLanes * (d + j));
  Vec sum = lanes_partial_sums_added(acc);
  for (int64_t d = full; d < D; ++d) sum += load_vec<Vec>(x_t + kExampleLanes * d) * load_vec<Vec>(y_t + kExampleLanes * d);
  return sum;
}

// The lanes' sum over d < D of (x_t[16 d] - mean)^2.
template <class Vec>
COPYTASK_INLINE Vec lanes_row_squared_deviation(const float* x_t, Vec mean, int64_t D) {
  Vec acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = Vec{};
  const int64_t full = full_lanes(D);
  for (int64_t d = 0; d < full; d += 8)
    for (int j = 0; j < 8; ++j) {
      const Vec deviation = load_vec<Vec>(x_t + kExampleLanes * (d + j)) - mean;
      acc[j] += deviation * deviation;
    }
  Vec sum = lanes_partial_sums_added(acc);
  for (int64_t d = full; d < D; ++d) {
    const Vec deviation = load_vec<Vec>(x_t + kExampleLanes * d) - mean;
    sum += deviation * deviation;
  }
  return sum;
}

// layernorm_forward across the lanes: x, normalized, out (T, D) and rstd (T) in lanes.
template <class Lanes>
COPYTASK_INLINE void layernorm_forward_lanes(const float* x_l, const float* weight, const float* bias,
                                             float* normalized_l, float* rstd_l, float* out_l, int64_t T, int64_t D) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  for (int64_t lane = 0; lane < kExampleLanes; lane += W)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t row = kExampleLanes * t * D + lane;
      const float* x_t = x_l + row;
      const Vec mean = lanes_row_sum<Vec>(x_t, D) / static_cast<float>(D);
      const Vec variance = lanes_row_squared_deviation<Vec>(x_t, mean, D) / static_cast<float>(D);
      Vec r{};
      for (int e = 0; e < W; ++e) r[e] = 1.0f / std::sqrt(variance[e] + 1e-5f);
      store_vec(rstd_l + kExampleLanes * t + lane, r);
      for (int64_t d = 0; d < D; ++d) {
        const Vec n = (load_vec<Vec>(x_t + kExampleLanes * d) - mean) * r;
        store_vec(normalized_l + row + kExampleLanes * d, n);
        store_vec(out_l + row + kExampleLanes * d, n * weight[d] + bias[d]);
      }
    }
}

// layernorm_backward's gradient at the input across the lanes: grad_x (T, D) += the gradient
// through the layer norm of grad_out (T, D); normalized and rstd as the forward left them; all
// in lanes. scratch: D lanes elements.
template <class Lanes>
COPYTASK_INLINE void layernorm_input_gradient_lanes(const float* normalized_l, const float* rstd_l, const float* weight,
                                                    const float* grad_out_l, float* grad_x_l, int64_t T, int64_t D,
                                                    float* scratch_l) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  for (int64_t lane = 0; lane < kExampleLanes; lane += W)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t row = kExampleLanes * t * D + lane;
      const float* n_t = normalized_l + row;
      float* gn = scratch_l + lane;  // d(normalized) = grad_out * weight
      for (int64_t d = 0; d < D; ++d)
        store_vec(gn + kExampleLanes * d, load_vec<Vec>(grad_out_l + row + kExampleLanes * d) * weight[d]);
      const Vec mean_g = lanes_row_sum<Vec>(gn, D) / static_cast<float>(D);
      const Vec mean_gn = lanes_row_dot<Vec>(gn, n_t, D) / static_cast<float>(D);
      const Vec r = load_vec<Vec>(rstd_l + kExampleLanes * t + lane);
      float* gx_t = grad_x_l + row;
      for (int64_t d = 0; d < D; ++d) {
        const int64_t at = kExampleLanes * d;
        store_vec(gx_t + at, load_vec<Vec>(gx_t + at) +
                                 r * (load_vec<Vec>(gn + at) - mean_g - load_vec<Vec>(n_t + at) * mean_gn));
      }
    }
}

// layernorm_backward's weight and bias gradients (D each), each lane's own:
// grad_weight_l += grad_out * normalized and grad_bias_l += grad_out, lane e summing example
// e's rows in order (as linear_weight_gradient_lanes). All in lanes.
template <class Lanes>
COPYTASK_INLINE void layernorm_parameter_gradients_lanes(const float* normalized_l, const float* grad_out_l,
                                                         float* grad_weight_l, float* grad_bias_l, int64_t T,
                                                         int64_t D) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  for (int64_t lane = 0; lane < kExampleLanes; lane += W)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t at = kExampleLanes * d + lane;
      Vec weight_sum = load_vec<Vec>(grad_weight_l + at), bias_sum = load_vec<Vec>(grad_bias_l + at);
      for (int64_t t = 0; t < T; ++t) {
        const Vec g = load_vec<Vec>(grad_out_l + kExampleLanes * t * D + at);
        weight_sum += g * load_vec<Vec>(normalized_l + kExampleLanes * t * D + at);
        bias_sum += g;
      }
      store_vec(grad_weight_l + at, weight_sum);
      store_vec(grad_bias_l + at, bias_sum);
    }
}

// ---- Cross-entropy across the lanes ---------------------------------------------------------

// crossentropy_forward_backward of the group's examples across the lanes: logits (T, V) in
// lanes -> d(loss)/d(logits) in place, lane g as that function turns example g's rows, so the
// same bits (the same maximum, subtraction, e^, sum in order over v, one logf a position, the
// same division and products); adds each example's summed cross-entropy (a double summed
// over its positions in order, as the rows' form returns it) to `loss`, example after
// example. targets[g]: example g's targets, read with target_stride; a target < 0, and every
// lane from n on, gives no loss and a zero gradient (so a weight gradient summed a lane apart
// gets nothing from the lanes past the group). scratch_l: 3 T lanes elements.
template <class Lanes>
COPYTASK_INLINE void crossentropy_forward_backward_lanes(float* logits_l, const int64_t* const* targets,
                                                         int64_t target_stride, int64_t n, float weight, int64_t T,
                                                         int64_t V, float* scratch_l, double& loss) {
  using Vec = LanesChunk<Lanes>;
  constexpr int W = sizeof(Vec) / sizeof(float);
  constexpr int64_t L = kExampleLanes;
  float* target_logit = scratch_l;       // (T) in lanes: the target's logit less the row's maximum
  float* total = scratch_l + L * T;      // (T) in lanes: the sum of e^(logit - maximum)
  float* to_gradient = total + L * T;    // (T) in lanes: weight / total, or 0 out of the loss
  auto target_of = [&](int64_t g, int64_t t) { return g < n ? targets[g][t * target_stride] : int64_t{-1}; };
  for (int64_t lane = 0; lane < L; lane += W)
    for (int64_t t = 0; t < T; ++t) {
      float* p_t = logits_l + L * t * V + lane;
      Vec most = Vec{} - std::numeric_limits<float>::infinity();
      for (int64_t v = 0; v < V; ++v) most = larger_of(load_vec<Vec>(p_t + L * v), most);  // row_maximum's
      for (int64_t v = 0; v < V; ++v) store_vec(p_t + L * v, load_vec<Vec>(p_t + L * v) - most);
    }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t g = 0; g < L; ++g) {
      const int64_t target = target_of(g, t);
      target_logit[L * t + g] = target < 0 ? 0.0f : logits_l[L * (t * V + target) + g];
    }
  exp_in_place(logits_l, L * T * V);  // element by element: each the rows' e^
  for (int64_t lane = 0; lane < L; lane += W)
    for (int64_t t = 0; t < T; ++t) {
      const float* p_t = logits_l + L * t * V + lane;
      Vec sum{};
      for (int64_t v = 0; v < V; ++v) sum += load_vec<Vec>(p_t + L * v);
      store_vec(total + L * t + lane, sum);
    }
  for (int64_t g = 0; g < L; ++g) {
    double example_loss = 0;
    for (int64_t t = 0; t < T; ++t) {
      const float total_t = total[L * t + g];
      if (target_of(g, t) < 0) {
        to_gradient[L * t + g] = 0.0f;  // e^ >= 0 times 0: the rows' zeros
        continue;
      }
      example_loss += static_cast<double>(std::log(total_t) - target_logit[L * t + g]);
      to_gradient[L * t + g] = weight / total_t;
    }
    if (g < n) loss += example_loss;
  }
  for (int64_t lane = 0; lane < L; lane += W)
    for (int64_t t = 0; t < T; ++t) {
      float* p_t = logits_l + L * t * V + lane;
      const Vec scale = load_vec<Vec>(to_gradient + L * t + lane);
      for (int64_t v = 0; v < V; ++v) store_vec(p_t + L * v, load_vec<Vec>(p_t + L * v) * scale);
    }
  for (int64_t g = 0; g < n; ++g)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t target = target_of(g, t);
      if (target >= 0) logits_l[L * (t * V + target) + g] -= weight;
    }
}

}  // namespace copytask::cpu
