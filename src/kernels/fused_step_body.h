#pragma once
// The fused GPU step's body (kernels/fused_step.h): what one thread block does for its
// (member, partition), and what the sum kernel does for one float, written once for the GPU
// and for the CPU's emulation (kernels/block_threads.h). One function per layer's forward
// and one per its backward (llm.c's layout), each a phase or two of independent items;
// nothing here knows whether it runs on a GPU.
//
// Items: a row r of the tile (layer norms, the loss), a (row, element) pair (the elementwise
// layers), a 4 x 4 tile of a product's outputs (the linear layers; 2 x 4 or 1 x 4 where a
// phase has fewer 4 x 4 tiles than threads), a (example, head, query)
// or (example, head, key) of the attention, or four columns of one (its sums over keys or
// queries), a float of a weight gradient. Every output is
// made by one item, its sum in a fixed order: a product's over k ascending, a weight
// gradient's over the tile's rows in order, continuing the running sum the partition's slice
// of `partial` holds, so the gradient is the same sum row after row whatever the tile.
//
// Shapes of one tile: n <= E examples, R = n T rows; q | k | v of a row are 3D floats, head h
// at columns h Dh of each third; attention matrices (H, T, T) per example, row = query i,
// column = key j. Parameters are (in, out) row-major, as the encoder stores them.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/block_threads.h"
#include "kernels/dropout_bits.h"
#include "kernels/fused_step.h"

namespace copytask::kernels {

// ---- Small pieces -----------------------------------------------------------------------

COPYTASK_HOST_DEVICE inline float fma_of(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}
COPYTASK_HOST_DEVICE inline float exp_of(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  return std::exp(x);
#endif
}
COPYTASK_HOST_DEVICE inline float log_of(float x) {
#if defined(__CUDA_ARCH__)
  return logf(x);
#else
  return std::log(x);
#endif
}
COPYTASK_HOST_DEVICE inline float sqrt_of(float x) {
#if defined(__CUDA_ARCH__)
  return sqrtf(x);
#else
  return std::sqrt(x);
#endif
}
COPYTASK_HOST_DEVICE inline int min_of(int a, int b) { return a < b ? a : b; }
COPYTASK_HOST_DEVICE inline float negative_infinity() {
#if defined(__CUDA_ARCH__)
  return __int_as_float(0xff800000);
#else
  return -std::numeric_limits<float>::infinity();
#endif
}

// Four floats from a 16-byte aligned address: one 128-bit load on the GPU.
struct Four {
  float v[4];
};
COPYTASK_HOST_DEVICE inline Four load_four(const float* p) {
#if defined(__CUDA_ARCH__)
  const float4 f = *reinterpret_cast<const float4*>(p);
  return {{f.x, f.y, f.z, f.w}};
#else
  Four out;
  std::memcpy(out.v, p, sizeof out.v);
  return out;
#endif
}
// The same to a 16-byte aligned address: one 128-bit store on the GPU.
COPYTASK_HOST_DEVICE inline void store_four(float* p, const Four& f) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<float4*>(p) = make_float4(f.v[0], f.v[1], f.v[2], f.v[3]);
#else
  std::memcpy(p, f.v, sizeof f.v);
#endif
}

// Columns d0 .. d0 + 3 of a row of n floats, 0 past n: one 128-bit load where the row's
// fours are aligned (`four`: n a multiple of 4 and the row 16-byte aligned), else a float at
// a time. Where a phase's items are rows (a layer norm's, the attention's q, k, v and their
// gradients), a warp's 32 threads read 32 rows at a stride of 20 or 60 floats, all in 8 of
// shared memory's 32 banks: a float at a time each load takes 4 passes (4-way bank
// conflicts); four floats at a time the stride spreads a quarter-warp's loads over all 32
// banks, one pass for each quarter (ncu: 38% of the step's shared-memory passes were
// conflicts). The same values either way, so the same sums.
COPYTASK_HOST_DEVICE inline Four row_four(const float* row, int d0, int n, bool four) {
  if (four) return load_four(row + d0);
  Four out{};
  for (int c = 0; c < 4; ++c)
    if (d0 + c < n) out.v[c] = row[d0 + c];
  return out;
}
// Columns d0 .. d0 + 3 (those below n) of a row stored, the same way.
COPYTASK_HOST_DEVICE inline void row_store_four(float* row, int d0, int n, const Four& f, bool four) {
  if (four) return store_four(row + d0, f);
  for (int c = 0; c < 4; ++c)
    if (d0 + c < n) row[d0 + c] = f.v[c];
}

// The columns of a head that a sum over keys or queries holds in registers at once: the
// attention's sums run over j (or i) for kHeadColumns columns d0 .. d0 + 3 of the head, each
// column's sum in order from 0, so each is the sum it was, and none is read back from shared
// memory at every term (a chain through memory: a load, a multiply-add, a store, per term).
// The layer norms' and the loss's element-wise loops likewise load four columns' operands
// before storing their results: the compiler cannot tell a store from the next column's
// loads, so one column at a time each load waited for the store before it. (kHeadColumns:
// kernels/fused_step.h.)

// p[0 .. n-1] = e^(p - shift) in place, their sum returned, added in order (a softmax's
// numerators: the attention's and the loss's), four loaded before any is stored.
COPYTASK_HOST_DEVICE inline float exp_shifted_in_place(float* p, int n, float shift) {
  float total = 0;
  for (int i0 = 0; i0 < n; i0 += kHeadColumns) {
    float e[kHeadColumns] = {};
    for (int c = 0; c < kHeadColumns; ++c)
      if (i0 + c < n) e[c] = p[i0 + c];
    for (int c = 0; c < kHeadColumns; ++c)
      if (i0 + c < n) {
        e[c] = exp_of(e[c] - shift);
        p[i0 + c] = e[c];
        total += e[c];
      }
  }
  return total;
}
// dot[c] = x . row j0 + c (rows[(j0 + c) row_stride + d], d < width, summed over d in order
// from 0) for the four rows j0 .. j0 + 3 below n, side by side (the attention's q . k_j and
// g_i . v_j); dot[c] is 0 for a row past n.
// `four`: x and the rows read four floats a load (row_four), the same terms in the same order.
COPYTASK_HOST_DEVICE inline void four_row_dots(const float* x, const float* rows, int row_stride, int j0, int n,
                                               int width, bool four, float (&dot)[kHeadColumns]) {
  for (int c = 0; c < kHeadColumns; ++c) dot[c] = 0.0f;
  for (int d0 = 0; d0 < width; d0 += 4) {
    const Four xs = row_four(x, d0, width, four);
    Four row[kHeadColumns];
    for (int c = 0; c < kHeadColumns; ++c)
      row[c] = j0 + c < n ? row_four(rows + (j0 + c) * row_stride, d0, width, four) : Four{};
    for (int dd = 0; dd < 4; ++dd)
      if (d0 + dd < width)
        for (int c = 0; c < kHeadColumns; ++c)
          if (j0 + c < n) dot[c] = fma_of(xs.v[dd], row[c].v[dd], dot[c]);
  }
}
// out[d] = the sum over j < n, in order from 0, of coefficient(j) * rows[j row_stride + d],
// for the four columns d = d0 .. d0 + 3 below width, in registers (the attention's weights @ v
// and d(logits) @ k: an item of its phases makes a head's four columns of a row).
// `four`: the rows read and out written four floats at a time (row_four).
template <class Coefficient>
COPYTASK_HOST_DEVICE inline void weighted_rows_four(int n, const Coefficient& coefficient, const float* rows,
                                                    int row_stride, int d0, int width, bool four, float* out) {
  static_assert(kHeadColumns == 4, "a head's four columns are one Four");
  Four acc{};
  for (int j = 0; j < n; ++j) {
    const float a = coefficient(j);
    const Four row = row_four(rows + j * row_stride, d0, width, four);
    for (int c = 0; c < kHeadColumns; ++c)
      if (d0 + c < width) acc.v[c] = fma_of(a, row.v[c], acc.v[c]);
  }
  row_store_four(out, d0, width, acc, four);
}
// p[0 .. n-1] *= factor in place, four loaded before any is stored.
COPYTASK_HOST_DEVICE inline void scale_in_place(float* p, int n, float factor) {
  for (int i0 = 0; i0 < n; i0 += kHeadColumns) {
    float e[kHeadColumns] = {};
    for (int c = 0; c < kHeadColumns; ++c)
      if (i0 + c < n) e[c] = p[i0 + c];
    for (int c = 0; c < kHeadColumns; ++c)
      if (i0 + c < n) p[i0 + c] = e[c] * factor;
  }
}

// Two phases' items in one phase: items 0..first-1 of one kind, then second of another.
// (Each barrier costs every thread of the block a wait: independent work shares one.)
template <class Threads, class First, class Second>
COPYTASK_HOST_DEVICE inline void block_items2(Threads& threads, int first, const First& a, int second, const Second& b) {
  block_items(threads, first + second, [&](int i) {
    if (i < first) a(i);
    else b(i - first);
  });
}
template <class Threads, class First, class Second, class Third>
COPYTASK_HOST_DEVICE inline void block_items3(Threads& threads, int first, const First& a, int second,
                                              const Second& b, int third, const Third& c) {
  block_items(threads, first + second + third, [&](int i) {
    if (i < first) a(i);
    else if (i < first + second) b(i - first);
    else c(i - first - second);
  });
}

// ---- Products ---------------------------------------------------------------------------

// C (rows, O) from A (rows, K) and B (K, O): A(r, k) = a[r a_row + k a_red], B(k, o) =
// b[k b_red + o b_col], so either may be read transposed. An item is a tile of C of TR rows
// (4, 2 or 1) and 4 columns; its sums run over k in order from the start the output gives (0,
// the bias, or the value C holds), each term one fused multiply-add, so every output is the
// same sum whatever the tile.
struct Product {
  const float* a;
  int a_row, a_red;
  const float* b;
  int b_red, b_col;
  int rows, K, O;
};

// The rows of a tile for a phase whose items, with tiles of TR rows, number items(TR), on
// `threads` threads: a thread runs its items one after another, so a phase lasts about its
// busiest thread's rounds of items, each a tile of TR rows. 4 x 4 tiles where they give every
// thread work; where a phase has fewer of them than threads (the reference study's tile of 5
// examples has 50 rows: 39 to 195 tiles a product for 256 threads), smaller tiles spread its
// sums over more threads: the fewest tile-rows a thread, the larger tile when two are equal
// (fewer loads). small_items false: always 4.
template <class Items>
COPYTASK_HOST_DEVICE inline int product_tile_rows(int threads, bool small_items, const Items& items) {
  if (!small_items) return kProductTile;
  int best = kProductTile, best_cost = (items(kProductTile) + threads - 1) / threads * kProductTile;
  for (int TR = kProductTile / 2; TR >= 1; TR /= 2) {
    const int cost = (items(TR) + threads - 1) / threads * TR;
    if (cost < best_cost) best = TR, best_cost = cost;
  }
  return best;
}
// A product's tiles of TR rows, TR known at run time.
COPYTASK_HOST_DEVICE inline int product_items_of(const Product& p, int TR) {
  return ((p.rows + TR - 1) / TR) * ((p.O + kProductTile - 1) / kProductTile);
}
// phase(TileRows<TR>{}) for the rows chosen, so that the tile's size is known at compile time.
template <int TR>
struct TileRows {
  static constexpr int value = TR;
};
template <class Phase>
COPYTASK_HOST_DEVICE inline void with_tile_rows(int rows, const Phase& phase) {
  if (rows == 4) phase(TileRows<4>{});
  else if (rows == 2) phase(TileRows<2>{});
  else phase(TileRows<1>{});
}

COPYTASK_HOST_DEVICE inline bool aligned_four(const float* p, int stride) {
  return (reinterpret_cast<uintptr_t>(p) & 15u) == 0 && stride % 4 == 0;
}

// The ways a whole tile's operands come four floats a load (FusedStepArgs::vector_loads):
// the layers' products take one of three forms, and each has one, which adds the same terms
// in the same order as the scalar loop (tests/test_fused_gpu.cpp: the same bits either way).
enum class ProductLoads {
  scalar,
  rows_along_k,     // A's rows and B's rows run along k and o (x @ W): 4 k a step, A by rows, B by rows
  columns_along_k,  // A's rows run along k, B's columns along k (g @ W^T): 4 k a step, B by columns
  rows_of_a,        // A read transposed (x^T @ g, a weight's gradient): B's 4 columns in one load, and
                    // a 4-row tile's 4 rows of A in one
};
template <int TR>
COPYTASK_HOST_DEVICE inline ProductLoads product_loads(const Product& p, int r0, int o0, bool vector_loads) {
  if (!vector_loads || r0 + TR > p.rows || o0 + kProductTile > p.O) return ProductLoads::scalar;
  if (p.a_red == 1 && p.b_col == 1 && aligned_four(p.a, p.a_row) && aligned_four(p.b, p.b_red))
    return ProductLoads::rows_along_k;
  if (p.a_red == 1 && p.b_red == 1 && aligned_four(p.a, p.a_row) && aligned_four(p.b, p.b_col))
    return ProductLoads::columns_along_k;
  if (p.a_row == 1 && p.b_col == 1 && (TR < kProductTile || aligned_four(p.a, p.a_red)) && aligned_four(p.b, p.b_red))
    return ProductLoads::rows_of_a;
  return ProductLoads::scalar;
}

// tiles: the column tiles' divisor (StepDivisors; another value: the index divided by /).
template <int TR, class Out>
COPYTASK_HOST_DEVICE inline void product_item(const Product& p, int item, const Out& out, const Divisor& tiles,
                                              bool vector_loads = true) {
  const int column_tiles = (p.O + kProductTile - 1) / kProductTile;
  const int row_tile = tiles.d == column_tiles ? tiles.div(item) : item / column_tiles;
  const int r0 = row_tile * TR, o0 = (item - row_tile * column_tiles) * kProductTile;
  // Rows and columns past the end read the last one's (in bounds) and are never stored.
  int a_at[TR], b_at[kProductTile];
  float acc[TR][kProductTile];
  for (int i = 0; i < TR; ++i) a_at[i] = min_of(r0 + i, p.rows - 1) * p.a_row;
  for (int j = 0; j < kProductTile; ++j) b_at[j] = min_of(o0 + j, p.O - 1) * p.b_col;
  for (int i = 0; i < TR; ++i)
    for (int j = 0; j < kProductTile; ++j)
      acc[i][j] = r0 + i < p.rows && o0 + j < p.O ? out.start(r0 + i, o0 + j) : 0.0f;
  int k = 0;
  switch (product_loads<TR>(p, r0, o0, vector_loads)) {
    case ProductLoads::rows_along_k:
    case ProductLoads::columns_along_k: {
      const bool by_columns = p.b_red == 1 && p.b_col != 1;
      // By rows: b[kk] holds B(k + kk, o0 .. o0 + 3); by columns: b[j] holds B(k .. k + 3, o0 + j).
      auto load = [&](int k0, Four (&a)[TR], Four (&b)[kProductTile]) {
        for (int i = 0; i < TR; ++i) a[i] = load_four(p.a + a_at[i] + k0);
        for (int t = 0; t < kProductTile; ++t)
          b[t] = by_columns ? load_four(p.b + k0 + b_at[t]) : load_four(p.b + (k0 + t) * p.b_red + o0);
      };
      auto add = [&](const Four (&a)[TR], const Four (&b)[kProductTile]) {
        for (int kk = 0; kk < 4; ++kk)
          for (int i = 0; i < TR; ++i)
            for (int j = 0; j < kProductTile; ++j)
              acc[i][j] = fma_of(a[i].v[kk], by_columns ? b[j].v[kk] : b[kk].v[j], acc[i][j]);
      };
      if (k + 4 <= p.K) {
        // The next four k's operands are loaded, into the other of two sets of registers,
        // before this four's multiply-adds, so that the loads' latency runs under arithmetic
        // that does not wait for them: the weights come from global memory, and ncu found the
        // products' multiply-adds waiting on those loads (long scoreboard) in about a tenth of
        // the kernel's stall samples (experiments/gpu). The same terms in the same order.
        // The loop's two halves, one for each set, are written out: the step as one lambda
        // called for each set was not inlined by nvcc and sent both sets to a 1 KB stack frame
        // (ptxas_check.sh fails), as one array of two sets indexed by the step's parity would.
        Four a[TR], b[kProductTile], a_next[TR], b_next[kProductTile];
        load(k, a, b);
        for (;;) {
          if (k + 8 > p.K) {
            add(a, b);
            k += 4;
            break;
          }
          load(k + 4, a_next, b_next);
          add(a, b);
          k += 4;
          if (k + 8 > p.K) {
            add(a_next, b_next);
            k += 4;
            break;
          }
          load(k + 4, a, b);
          add(a_next, b_next);
          k += 4;
        }
      }
      break;  // the last K % 4 below
    }
    case ProductLoads::rows_of_a:
      for (; k < p.K; ++k) {
        float a[TR];
        if constexpr (TR == kProductTile) {
          const Four rows = load_four(p.a + r0 + k * p.a_red);
          for (int i = 0; i < TR; ++i) a[i] = rows.v[i];
        } else {
          for (int i = 0; i < TR; ++i) a[i] = p.a[r0 + i + k * p.a_red];
        }
        const Four b = load_four(p.b + k * p.b_red + o0);
        for (int i = 0; i < TR; ++i)
          for (int j = 0; j < kProductTile; ++j) acc[i][j] = fma_of(a[i], b.v[j], acc[i][j]);
      }
      break;
    case ProductLoads::scalar: break;
  }
  for (; k < p.K; ++k) {
    float a[TR], b[kProductTile];
    for (int i = 0; i < TR; ++i) a[i] = p.a[a_at[i] + k * p.a_red];
    for (int j = 0; j < kProductTile; ++j) b[j] = p.b[k * p.b_red + b_at[j]];
    for (int i = 0; i < TR; ++i)
      for (int j = 0; j < kProductTile; ++j) acc[i][j] = fma_of(a[i], b[j], acc[i][j]);
  }
  // A row's four outputs in one go where the output's rows allow it (out.fours(): one
  // 128-bit store each part, where four floats a thread at the tiles' stride of 4 fell in a
  // quarter of shared memory's banks, 4-way conflicts); the same values either way.
  for (int i = 0; i < TR; ++i) {
    if (r0 + i >= p.rows) continue;
    if (o0 + kProductTile <= p.O && out.fours()) {
      out.finish_four(r0 + i, o0, Four{{acc[i][0], acc[i][1], acc[i][2], acc[i][3]}});
    } else {
      for (int j = 0; j < kProductTile; ++j)
        if (o0 + j < p.O) out.finish(r0 + i, o0 + j, acc[i][j]);
    }
  }
}

// Outputs: C = the sums (from 0 or the bias), C += them (from C's values). An output gives
// start(r, o), finish(r, o, v), and finish_four(r, o0, v) for o0 .. o0 + 3 where fours()
// (its rows 16-byte aligned four columns at a time).
struct StoreOut {
  float* c;
  int c_row;
  const float* bias;   // (O) or null
  bool four = false;   // c's rows and c_row on 16 bytes
  COPYTASK_HOST_DEVICE float start(int, int o) const { return bias ? bias[o] : 0.0f; }
  COPYTASK_HOST_DEVICE void finish(int r, int o, float v) const { c[r * c_row + o] = v; }
  COPYTASK_HOST_DEVICE bool fours() const { return four; }
  COPYTASK_HOST_DEVICE void finish_four(int r, int o0, const Four& v) const { store_four(c + r * c_row + o0, v); }
};
// (In global memory, a weight's gradient: its slice of `partial` need not be 16-byte aligned.)
struct AccumulateOut {
  float* c;
  int c_row;
  COPYTASK_HOST_DEVICE float start(int r, int o) const { return c[r * c_row + o]; }
  COPYTASK_HOST_DEVICE void finish(int r, int o, float v) const { c[r * c_row + o] = v; }
  COPYTASK_HOST_DEVICE bool fours() const { return false; }
  COPYTASK_HOST_DEVICE void finish_four(int, int, const Four&) const {}
};

// One phase of a product's tiles: C = A @ B through `out`.
template <class Threads, class Out>
COPYTASK_HOST_DEVICE inline void product_phase(Threads& threads, const Product& p, const Out& out, const Divisor& tiles,
                                               bool vector_loads, bool small_items) {
  const int tile_rows = product_tile_rows(threads.count(), small_items, [&](int TR) { return product_items_of(p, TR); });
  with_tile_rows(tile_rows, [&](auto rows) {
    constexpr int TR = decltype(rows)::value;
    block_items(threads, product_items_of(p, TR), [&](int i) { product_item<TR>(p, i, out, tiles, vector_loads); });
  });
}

// ---- The block's work ---------------------------------------------------------------------

// One thread block's view of the step: its member, its partition, the tile in hand.
// kKeptGlobal: the parts kept for the backward in the block's slot of a.kept in global
// memory (TileLayout::kept_global: slot threads.block()), else in shared memory. A template,
// not a flag, so that with the parts in shared memory the compiler still knows every part's
// address space and loads them as shared memory.
template <class Threads, bool kKeptGlobal = false>
class FusedStepBlock {
 public:
  COPYTASK_HOST_DEVICE FusedStepBlock(const FusedStepArgs& a, int member, int partition, float* shared, Threads& threads)
      : a_(a), s_(a.s), l_(a.tile), m_(member), k_(partition), smem_(shared), threads_(threads) {
    flags_ = a.member_flags[m_];
    grad_ = a.partial + (static_cast<int64_t>(m_) * a.partitions + k_) * a.partial_flat;
    scale_ = 1.0f / sqrt_of(static_cast<float>(s_.Dh));
    first_ = k_ * a.partition_examples;
    last_ = min_of(first_ + a.partition_examples, s_.B);
    step_key_ = a.dropout.step_keys ? static_cast<uint64_t>(a.dropout.step_keys[m_]) : 0;
    // Every row of the tile's parts (D, 3D wide) and every head's columns (Dh at h Dh) start
    // on 16 bytes when D and Dh are multiples of 4: the parts do (fused_step_layout.cpp).
    rows_four_ = a.vector_loads && s_.D % 4 == 0 && s_.Dh % 4 == 0;
    hidden_four_ = a.vector_loads && s_.F % 4 == 0;  // the hidden layer's rows (pre, grad_wide's F wide)
  }

  // The whole partition: its gradient zeroed, then tile after tile; its loss summed.
  COPYTASK_HOST_DEVICE COPYTASK_DEVICE_INLINE void run() {
    block_items(threads_, static_cast<int>(a_.partial_flat), [&](int i) { grad_[i] = 0.0f; });
    for (int b = first_; b < last_; b += l_.E) {
      tile_first_ = b;
      n_ = min_of(l_.E, last_ - b);
      rows_ = n_ * s_.T;
      tile_load();  // and the embedding
      for (int l = 0; l < s_.L; ++l) block_forward(l);
      layernorm_forward(sm(l_.x), a_.parameters.ln_f, sm(l_.nf), sm(l_.rstdf), sm(l_.act));
      head_forward();
      crossentropy_forward_backward();
      head_backward();
      // ln_f's backward, the rows' losses added to the partition's in the same phase.
      layernorm_backward(a_.parameters.ln_f, sm(l_.nf), sm(l_.rstdf), sm(l_.grad_narrow), /*accumulate=*/false,
                         [](int) {}, 1, [&](int) { loss_sum(); });
      for (int l = s_.L - 1; l >= 0; --l) block_backward(l);
      embedding_backward();
    }
  }

 private:
  // ---- Where things are -----------------------------------------------------------------
  COPYTASK_HOST_DEVICE float* sm(int offset) const { return smem_ + offset; }
  // (The slot's address made where it is used, from the kernel's arguments and the block's
  // index, so that it holds no register of its own: the kernel uses all 128.)
  COPYTASK_HOST_DEVICE float* block_part(int offset, int l) const {
    float* base = kKeptGlobal ? a_.kept + static_cast<int64_t>(threads_.block()) * l_.kept_floats : smem_;
    return base + offset + l * l_.block_stride;
  }
  COPYTASK_HOST_DEVICE int* ints(int offset) const { return reinterpret_cast<int*>(smem_ + offset); }
  // Member m's values of a parameter of `floats` floats per member.
  COPYTASK_HOST_DEVICE const float* value(const ParameterSlot& p, int64_t floats) const {
    return p.value ? p.value + m_ * floats : nullptr;
  }
  COPYTASK_HOST_DEVICE float* grad(const ParameterSlot& p) const { return p.value ? grad_ + p.grad : nullptr; }
  COPYTASK_HOST_DEVICE bool causal() const { return (flags_ & kMemberCausal) != 0; }
  // The block's copy `copy` of a table's gradient, where the member learns the table; else null.
  COPYTASK_HOST_DEVICE float* table_grad(MemberFlag learned, const TableGrad& t, int copy) const {
    if (!(flags_ & learned) || t.grad < 0) return nullptr;
    return grad_ + t.partial + (t.copies > 1 ? copy : 0) * t.floats;
  }
  COPYTASK_HOST_DEVICE int position(int r) const { return ints(l_.positions)[r]; }
  // Row r's example in the batch and its position in the example.
  COPYTASK_HOST_DEVICE int example_of(int r) const { return tile_first_ + a_.divisors.T.div(r); }
  COPYTASK_HOST_DEVICE int position_in_example(int r) const { return a_.divisors.T.mod(r); }

  // The dropout mask of element `local` of the tile's example e at a site of block l: its
  // bit, drawn in the tile's first phase (draw_mask_word); 1 when the step has no dropout.
  COPYTASK_HOST_DEVICE float mask(int l, int site, int e, int local) const {
    if (!a_.dropout.step_keys) return 1.0f;
    const uint32_t word = mask_word(l, e, l_.mask_site_word[site] + (local >> 5));
    return (word >> (local & 31)) & 1u ? a_.dropout.kept_value : 0.0f;
  }
  COPYTASK_HOST_DEVICE uint32_t& mask_word(int l, int e, int w) const {
    return reinterpret_cast<uint32_t*>(smem_ + l_.masks)[(l * l_.E + e) * l_.mask_words + w];
  }
  // Word w of the tile's example e at block l: the masks of its 32 elements from the step's
  // stream (kernels/dropout_bits.h: element i decides by 16 bits of the stream's word i / 4,
  // kept where they reach the threshold), each word of the stream mixed once.
  COPYTASK_HOST_DEVICE void draw_mask_word(int l, int e, int w) const {
    const DropoutArgs& d = a_.dropout;
    int site = 3;
    while (w < l_.mask_site_word[site]) --site;
    const int64_t local0 = static_cast<int64_t>(w - l_.mask_site_word[site]) * 32;
    const int64_t first = l * d.block_floats + d.site_start[site] + (tile_first_ + e) * d.example_floats[site] + local0;
    uint32_t bits = 0;
    uint64_t stream_word = 0, stream_bits = 0;
    for (int b = 0; b < 32 && local0 + b < d.example_floats[site]; ++b) {
      const int64_t element = first + b;
      if (b == 0 || static_cast<uint64_t>(element >> 2) != stream_word) {
        stream_word = static_cast<uint64_t>(element >> 2);
        stream_bits = dropout_word_bits(step_key_, stream_word);
      }
      if (dropout_mask_from_bits(stream_bits >> (16 * (element & 3)), d.threshold, 1.0f) != 0.0f) bits |= 1u << b;
    }
    mask_word(l, e, w) = bits;
  }
  // The mask of a (T, width) site at row r, column c.
  COPYTASK_HOST_DEVICE float row_mask(int l, int site, int r, int c, int width) const {
    const int e = a_.divisors.T.div(r);  // the row's example in the tile
    return mask(l, site, e, (r - e * s_.T) * width + c);
  }

  // ---- The tile's data ----------------------------------------------------------------------
  // Row r's token and position in the batch's tensors (global memory).
  COPYTASK_HOST_DEVICE int token_in_batch(int r) const {
    const int64_t b = example_of(r), t = position_in_example(r);
    return static_cast<int>(a_.tokens[m_ * a_.token_stride[0] + b * a_.token_stride[1] + t * a_.token_stride[2]]);
  }
  COPYTASK_HOST_DEVICE int position_in_batch(int r) const {
    const int64_t b = example_of(r), t = position_in_example(r);
    return a_.positions ? static_cast<int>(a_.positions[(static_cast<int64_t>(m_) * s_.B + b) * s_.T + t])
                        : static_cast<int>(t);
  }
  // The tile's tokens, targets and positions into shared memory for the later phases, and in
  // the same phase the embedding, which reads them from the batch, and the tile's dropout
  // masks.
  COPYTASK_HOST_DEVICE void tile_load() {
    const int D = s_.D;
    const float* tok = value(a_.parameters.tok_emb, static_cast<int64_t>(s_.V) * D);
    const float* rows = a_.tables.embedding_rows ? a_.tables.embedding_rows + static_cast<int64_t>(m_) * s_.P * D : nullptr;
    float* x = sm(l_.x);
    const int W = l_.mask_words;
    block_items3(
        threads_, rows_,
        [&](int r) {
          const int64_t b = example_of(r), t = position_in_example(r);
          ints(l_.tokens)[r] = token_in_batch(r);
          ints(l_.targets)[r] = static_cast<int>(
              a_.targets[m_ * a_.target_stride[0] + b * a_.target_stride[1] + t * a_.target_stride[2]]);
          ints(l_.positions)[r] = position_in_batch(r);
        },
        rows_ * D,
        [&](int i) {
          // x (R, D) = tok_emb[token] (+ the embedding rows at the row's position).
          const int r = a_.divisors.D.div(i), d = i - r * D;
          float v = tok[token_in_batch(r) * D + d];
          if (rows) v += rows[position_in_batch(r) * D + d];
          x[i] = v;
        },
        a_.dropout.step_keys ? s_.L * n_ * W : 0, [&](int i) { draw_mask_word(i / (n_ * W), i / W % n_, i % W); });
  }

  // ---- Embedding ------------------------------------------------------------------------
  // (The forward, x = tok_emb[token] + the embedding rows, is in tile_load's phase.)
  // tok_emb's gradient at each (token, d) and the embedding rows' at each (position, d):
  // the rows' grad_x in order.
  COPYTASK_HOST_DEVICE void embedding_backward() {
    const int D = s_.D, V = s_.V;
    const float* gx = sm(l_.grad_x);
    float* tok_grad = grad_ + a_.parameters.tok_emb.grad;
    float* rows_grad = table_grad(kLearnsEmbeddingRows, a_.tables.embedding_rows_grad, 0);
    const bool rows_learned = rows_grad != nullptr;
    const int* tokens = ints(l_.tokens);
    block_items2(
        threads_, V * D,
        [&](int i) {
          const int v = i / D, d = i % D;
          float acc = tok_grad[i];
          for (int r = 0; r < rows_; ++r)
            if (tokens[r] == v) acc += gx[r * D + d];
          tok_grad[i] = acc;
        },
        rows_learned ? s_.P * D : 0,
        [&](int i) {
          const int p = i / D, d = i % D;
          float acc = rows_grad[i];
          for (int r = 0; r < rows_; ++r)
            if (position(r) == p) acc += gx[r * D + d];
          rows_grad[i] = acc;
        });
  }

  // ---- Layer norm ---------------------------------------------------------------------------
  // Over D (eps 1e-5, the biased variance), row by row: normalized and 1/std kept, out =
  // normalized * weight + bias.
  COPYTASK_HOST_DEVICE void layernorm_forward(const float* x, const NormParameters& p, float* normalized, float* rstd,
                                              float* out) {
    const int D = s_.D;
    const float* w = value(p.weight, D);
    const float* bias = value(p.bias, D);
    const bool four = rows_four_;
    block_items(threads_, rows_, [&](int r) {
      const float* x_r = x + r * D;
      float sum = 0;
      for (int d0 = 0; d0 < D; d0 += 4) {
        const Four xs = row_four(x_r, d0, D, four);
        for (int c = 0; c < 4; ++c)
          if (d0 + c < D) sum += xs.v[c];
      }
      const float mean = sum / static_cast<float>(D);
      float squares = 0;
      for (int d0 = 0; d0 < D; d0 += 4) {
        const Four xs = row_four(x_r, d0, D, four);
        for (int c = 0; c < 4; ++c)
          if (d0 + c < D) squares = fma_of(xs.v[c] - mean, xs.v[c] - mean, squares);
      }
      const float inverse = 1.0f / sqrt_of(squares / static_cast<float>(D) + 1e-5f);
      rstd[r] = inverse;
      // Four columns' operands loaded before their results are stored (kHeadColumns, above).
      for (int d0 = 0; d0 < D; d0 += kHeadColumns) {
        const Four xs = row_four(x_r, d0, D, four);
        float ws[kHeadColumns] = {}, bs[kHeadColumns] = {};
        for (int c = 0; c < kHeadColumns; ++c)
          if (d0 + c < D) {
            ws[c] = w[d0 + c];
            bs[c] = bias[d0 + c];
          }
        Four n{}, o{};
        for (int c = 0; c < kHeadColumns; ++c)
          if (d0 + c < D) {
            n.v[c] = (xs.v[c] - mean) * inverse;
            o.v[c] = fma_of(n.v[c], ws[c], bs[c]);
          }
        row_store_four(normalized + r * D, d0, D, n, four);
        row_store_four(out + r * D, d0, D, o, four);
      }
    });
  }
  // out (R, D) = normalized * weight + bias again (what a backward's weight gradient reads).
  COPYTASK_HOST_DEVICE void layernorm_output_item(int i, const NormParameters& p, const float* normalized,
                                                  float* out) const {
    const int d = a_.divisors.D.mod(i);
    out[i] = fma_of(normalized[i], value(p.weight, s_.D)[d], value(p.bias, s_.D)[d]);
  }
  // grad_x (R, D) = (or +=) the gradient through the layer norm of grad_out (R, D); the
  // weight's and bias's gradients += their sums over the rows. In the same phase (one barrier
  // fewer each): row_done(r) once row r of grad_x is whole, and `extra_items` items of other
  // work that reads and writes none of what this phase does.
  template <class RowDone, class Extra>
  COPYTASK_HOST_DEVICE void layernorm_backward(const NormParameters& p, const float* normalized, const float* rstd,
                                               const float* grad_out, bool accumulate, const RowDone& row_done,
                                               int extra_items, const Extra& extra) {
    const int D = s_.D;
    const float* w = value(p.weight, D);
    float* gx = sm(l_.grad_x);
    float* w_grad = grad(p.weight);
    float* b_grad = grad(p.bias);
    const bool four = rows_four_;
    block_items3(
        threads_, rows_,
        [&](int r) {
          const float* g = grad_out + r * D;
          const float* n = normalized + r * D;
          float sum_g = 0, sum_gn = 0;  // of d(normalized) = g * w, and of it times normalized
          for (int d0 = 0; d0 < D; d0 += 4) {
            const Four gos = row_four(g, d0, D, four), ns = row_four(n, d0, D, four);
            for (int c = 0; c < 4; ++c)
              if (d0 + c < D) {
                const float gn = gos.v[c] * w[d0 + c];
                sum_g += gn;
                sum_gn = fma_of(gn, ns.v[c], sum_gn);
              }
          }
          const float mean_g = sum_g / static_cast<float>(D), mean_gn = sum_gn / static_cast<float>(D);
          const float rstd_r = rstd[r];
          for (int d0 = 0; d0 < D; d0 += kHeadColumns) {  // loads before stores, as in the forward
            const Four gos = row_four(g, d0, D, four), ns = row_four(n, d0, D, four);
            const Four before = accumulate ? row_four(gx + r * D, d0, D, four) : Four{};
            float ws[kHeadColumns] = {};
            for (int c = 0; c < kHeadColumns; ++c)
              if (d0 + c < D) ws[c] = w[d0 + c];
            Four out{};
            for (int c = 0; c < kHeadColumns; ++c)
              if (d0 + c < D) {
                const float v = rstd_r * (gos.v[c] * ws[c] - mean_g - ns.v[c] * mean_gn);
                out.v[c] = accumulate ? before.v[c] + v : v;
              }
            row_store_four(gx + r * D, d0, D, out, four);
          }
          row_done(r);
        },
        D,
        [&](int d) {
          float acc_w = w_grad[d], acc_b = b_grad[d];
          for (int r = 0; r < rows_; ++r) {
            acc_w = fma_of(grad_out[r * D + d], normalized[r * D + d], acc_w);
            acc_b += grad_out[r * D + d];
          }
          w_grad[d] = acc_w;
          b_grad[d] = acc_b;
        },
        extra_items, extra);
  }
  COPYTASK_HOST_DEVICE void layernorm_backward(const NormParameters& p, const float* normalized, const float* rstd,
                                               const float* grad_out, bool accumulate) {
    layernorm_backward(p, normalized, rstd, grad_out, accumulate, [](int) {}, 0, [](int) {});
  }

  // ---- Linear layers ------------------------------------------------------------------------
  // The product in (R, I) @ weight (I, O): its Product.
  COPYTASK_HOST_DEVICE Product forward_product(const float* in, const LinearParameters& p, int I, int O) const {
    return Product{in, I, 1, value(p.weight, static_cast<int64_t>(I) * O), O, 1, rows_, I, O};
  }
  // A product's column tiles' divisor for O outputs (StepDivisors: D, 3D, F or V wide).
  COPYTASK_HOST_DEVICE const Divisor& column_tiles(int O) const {
    const StepDivisors& v = a_.divisors;
    if (O == s_.D) return v.tiles_of_D;
    if (O == 3 * s_.D) return v.tiles_of_3D;
    if (O == s_.F) return v.tiles_of_F;
    return v.tiles_of_V;  // O == V (product_item checks the divisor's value)
  }
  // Its backward in one phase: the weight's gradient (I, O) += in^T @ grad_out, the bias's
  // (O) += the column sums of grad_out, and grad_in (R, I) = grad_out @ weight^T through
  // `in_out` (an output: StoreOut, or one that applies the layer below's backward).
  template <class InOut>
  COPYTASK_HOST_DEVICE void linear_backward(const float* in, const float* grad_out, const LinearParameters& p, int I,
                                            int O, const InOut& in_out) {
    const Product weight_grad{in, 1, I, grad_out, O, 1, I, rows_, O};
    const Product input_grad{grad_out, O, 1, value(p.weight, static_cast<int64_t>(I) * O), 1, O, rows_, O, I};
    const AccumulateOut weight_out{grad(p.weight), O};
    float* bias_grad = grad(p.bias);
    const int bias_items = bias_grad ? O : 0;
    // The phase's three parts' items with tiles of TR rows (no input gradient without an output).
    auto weight_items = [&](int TR) { return product_items_of(weight_grad, TR); };
    auto input_items = [&](int TR) { return in_out.c ? product_items_of(input_grad, TR) : 0; };
    const int tile_rows = product_tile_rows(threads_.count(), a_.small_items,
                                            [&](int TR) { return weight_items(TR) + bias_items + input_items(TR); });
    with_tile_rows(tile_rows, [&](auto rows) {
      constexpr int TR = decltype(rows)::value;
      block_items3(
          threads_, weight_items(TR),
          [&](int i) { product_item<TR>(weight_grad, i, weight_out, column_tiles(O), a_.vector_loads); }, bias_items,
          [&](int o) {
            float acc = bias_grad[o];
            for (int r = 0; r < rows_; ++r) acc += grad_out[r * O + o];
            bias_grad[o] = acc;
          },
          input_items(TR), [&](int i) { product_item<TR>(input_grad, i, in_out, column_tiles(I), a_.vector_loads); });
    });
  }

  // ---- Attention ----------------------------------------------------------------------------
  // The tables' entry of head h at the positions of rows qr (query) and kr (key).
  COPYTASK_HOST_DEVICE int bias_at(int h, int qr, int kr) const {
    return (h * s_.P + position(qr)) * s_.P + position(kr);
  }

  // Item `item` of the attention's phases: (example e, head h, query or key t), item =
  // (e H + h) T + t; with `fours`, also the head's four columns d0 = 4 f .. 4 f + 3, item =
  // ((e H + h) T + t) G + f, G = Dh / 4 rounded up (the phases' sums over keys or queries,
  // one item a row's four columns: G times the items, each a G-th as long).
  struct AttentionItem {
    int e, h, t, d0;
  };
  COPYTASK_HOST_DEVICE AttentionItem attention_item(int item, bool fours = false) const {
    int d0 = 0;
    if (fours) {
      const int row_item = a_.divisors.head_fours.div(item);
      d0 = (item - row_item * a_.divisors.head_fours.d) * kHeadColumns;
      item = row_item;
    }
    const int rows = a_.divisors.T.div(item);  // item / T: (e, h)
    const int e = a_.divisors.H.div(rows);
    return {e, rows - e * s_.H, item - rows * s_.T, d0};
  }
  // The items of a phase over (example, head, row) and, with `fours`, a head's fours of columns.
  COPYTASK_HOST_DEVICE int attention_items(bool fours) const {
    return n_ * s_.H * s_.T * (fours ? a_.divisors.head_fours.d : 1);
  }

  // Item i of the rotation's phases: (row r, q or k, head h, pair), i = ((r 2 + part) H + h)
  // pairs + pair.
  struct RotationItem {
    int r, part, h, pair;
  };
  COPYTASK_HOST_DEVICE RotationItem rotation_item(int i) const {
    const int pair_rows = a_.divisors.pairs.div(i);      // i / pairs
    const int head_rows = a_.divisors.H.div(pair_rows);  // i / (pairs H)
    return {head_rows / 2, head_rows % 2, pair_rows - head_rows * s_.H, i - pair_rows * a_.divisors.pairs.d};
  }

  // q and k of every head turned pair by pair by the angles of their row's position
  // (the pair_angles table: rope, xpos's turn).
  COPYTASK_HOST_DEVICE void rotation_forward(int l) {
    const int pairs = s_.Dh / 2, D = s_.D;
    const int64_t member = static_cast<int64_t>(m_) * s_.P * pairs;
    const float* cos_t = a_.tables.pair_cos + member;
    const float* sin_t = a_.tables.pair_sin + member;
    float* qkv = block_part(l_.qkv, l);
    // Items (row, q or k, head, pair).
    block_items(threads_, rows_ * 2 * s_.H * pairs, [&](int i) {
      const RotationItem item = rotation_item(i);
      const int pair = item.pair, h = item.h, part = item.part, r = item.r;
      float* x = qkv + r * 3 * D + part * D + h * s_.Dh + 2 * pair;
      const float c = cos_t[position(r) * pairs + pair], s = sin_t[position(r) * pairs + pair];
      const float x0 = x[0], x1 = x[1];
      x[0] = x0 * c - x1 * s;
      x[1] = x0 * s + x1 * c;
    });
  }
  // Its backward: the angles' gradient (when learned) from the turned values and the
  // gradient at them, then that gradient turned back.
  COPYTASK_HOST_DEVICE void rotation_backward(int l) {
    const int pairs = s_.Dh / 2, D = s_.D;
    const int64_t member = static_cast<int64_t>(m_) * s_.P * pairs;
    const float* cos_t = a_.tables.pair_cos + member;
    const float* sin_t = a_.tables.pair_sin + member;
    const float* turned = block_part(l_.qkv, l);
    float* g = sm(l_.grad_wide);
    if (float* angles_grad = table_grad(kLearnsPairAngles, a_.tables.pair_angles_grad, l)) {
      // Items (position, pair): the rows at that position in order, q then k, head by head.
      block_items(threads_, s_.P * pairs, [&](int i) {
        const int p = i / pairs, pair = i % pairs;
        float acc = angles_grad[i];
        for (int r = 0; r < rows_; ++r) {
          if (position(r) != p) continue;
          for (int part = 0; part < 2; ++part)
            for (int h = 0; h < s_.H; ++h) {
              const int at = r * 3 * D + part * D + h * s_.Dh + 2 * pair;
              acc += -g[at] * turned[at + 1] + g[at + 1] * turned[at];
            }
        }
        angles_grad[i] = acc;
      });
    }
    block_items(threads_, rows_ * 2 * s_.H * pairs, [&](int i) {
      const RotationItem item = rotation_item(i);
      const int pair = item.pair, h = item.h, part = item.part, r = item.r;
      float* x = g + r * 3 * D + part * D + h * s_.Dh + 2 * pair;
      const float c = cos_t[position(r) * pairs + pair], s = -sin_t[position(r) * pairs + pair];
      const float x0 = x[0], x1 = x[1];
      x[0] = x0 * c - x1 * s;
      x[1] = x0 * s + x1 * c;
    });
  }

  // Two phases. Items (example, head, query i): the row's logits q_i . k_j / sqrt(Dh) (+ the
  // score bias), the causal mask, the softmax (kept before dropout), and the weights times the
  // dropout mask. Then items (example, head, query i, four columns of the head): mixed's
  // columns = those weights @ v, each column's sum over j in order. (One item a row made both
  // while four fifths of the block's threads waited at the barrier: at the reference shape's
  // tile, 50 rows for 256 threads; the sums over v now run on 250 items, a fifth as long.)
  COPYTASK_HOST_DEVICE void attention_forward(int l) {
    const int T = s_.T, H = s_.H, Dh = s_.Dh, D = s_.D;
    const float* qkv = block_part(l_.qkv, l);
    float* weights = block_part(l_.weights, l);
    float* mixed = block_part(l_.mixed, l);
    const float* bias = a_.tables.score_bias ? a_.tables.score_bias + static_cast<int64_t>(m_) * H * s_.P * s_.P : nullptr;
    const bool is_causal = causal();
    block_items(threads_, attention_items(false), [&](int item) {
      const AttentionItem at = attention_item(item);
      const int e = at.e, h = at.h, i = at.t;
      const int qr = e * T + i, seen = is_causal ? i + 1 : T;
      const float* q = qkv + qr * 3 * D + h * Dh;
      float* w = weights + ((e * H + h) * T + i) * T;
      float row_max = negative_infinity();
      const float* keys = qkv + e * T * 3 * D + D + h * Dh;  // row j: k_j of the head
      for (int j0 = 0; j0 < seen; j0 += kHeadColumns) {
        float dot[kHeadColumns];
        four_row_dots(q, keys, 3 * D, j0, seen, Dh, rows_four_, dot);
        for (int c = 0; c < kHeadColumns; ++c)
          if (j0 + c < seen) {
            float logit = dot[c] * scale_;
            if (bias) logit += bias[bias_at(h, qr, e * T + j0 + c)];
            w[j0 + c] = logit;
            row_max = logit > row_max ? logit : row_max;
          }
      }
      const float total = exp_shifted_in_place(w, seen, row_max);
      scale_in_place(w, seen, 1.0f / total);
      for (int j = seen; j < T; ++j) w[j] = 0.0f;
      // The weights times the dropout mask, in this row of grad_scores (free until the
      // backward): each mask read once for the sums of the next phase.
      float* kept = sm(l_.grad_scores) + ((e * H + h) * T + i) * T;
      for (int j = 0; j < seen; ++j) kept[j] = w[j] * mask(l, 0, e, (h * T + i) * T + j);
    });
    block_items(threads_, attention_items(true), [&](int item) {
      const AttentionItem at = attention_item(item, true);
      const int e = at.e, h = at.h, i = at.t;
      const int qr = e * T + i, seen = is_causal ? i + 1 : T;
      const float* kept = sm(l_.grad_scores) + ((e * H + h) * T + i) * T;
      const float* values = qkv + e * T * 3 * D + 2 * D + h * Dh;  // row j: v_j of the head
      weighted_rows_four(seen, [&](int j) { return kept[j]; }, values, 3 * D, at.d0, Dh, rows_four_,
                         mixed + qr * D + h * Dh);
    });
  }

  // From grad_narrow (R, D), the gradient at mixed: grad_wide (R, 3D) = the gradient at
  // q | k | v, and grad_scores the gradient at the logits (the score bias's). Two phases:
  // items (example, head, query i) make row i's gradient at the logits and turn row i of the
  // layer's weights into the weights times the dropout mask (what dv reads; the weights
  // before dropout are not read again until the next tile's forward); then items (example,
  // head, query i, four columns) make those columns of dq_i, and items (example, head, key j,
  // four columns) those of dk_j and dv_j from the columns j, each column's sum in order (one
  // item a row of the three, the whole head, ran on a fifth of the block's threads).
  COPYTASK_HOST_DEVICE void attention_backward(int l) {
    const int T = s_.T, H = s_.H, Dh = s_.Dh, D = s_.D;
    const float* qkv = block_part(l_.qkv, l);
    float* weights = block_part(l_.weights, l);
    const float* g = sm(l_.grad_narrow);
    float* gs = sm(l_.grad_scores);
    float* gq = sm(l_.grad_wide);
    const bool is_causal = causal();
    block_items(threads_, attention_items(false), [&](int item) {
      const AttentionItem at = attention_item(item);
      const int e = at.e, h = at.h, i = at.t;
      const int qr = e * T + i, seen = is_causal ? i + 1 : T;
      float* w = weights + ((e * H + h) * T + i) * T;
      float* gl = gs + ((e * H + h) * T + i) * T;
      const float* g_i = g + qr * D + h * Dh;
      // d(weights)_j = g_i . v_j times the mask, then the softmax's backward.
      float weighted = 0;
      const float* values = qkv + e * T * 3 * D + 2 * D + h * Dh;  // row j: v_j of the head
      for (int j0 = 0; j0 < seen; j0 += kHeadColumns) {
        float dot[kHeadColumns];
        four_row_dots(g_i, values, 3 * D, j0, seen, Dh, rows_four_, dot);
        for (int c = 0; c < kHeadColumns; ++c)
          if (j0 + c < seen) {
            const float dropped = dot[c] * mask(l, 0, e, (h * T + i) * T + j0 + c);
            gl[j0 + c] = dropped;
            weighted = fma_of(w[j0 + c], dropped, weighted);
          }
      }
      for (int j0 = 0; j0 < seen; j0 += kHeadColumns) {
        float ws[kHeadColumns] = {}, gls[kHeadColumns] = {};
        for (int c = 0; c < kHeadColumns; ++c)
          if (j0 + c < seen) {
            ws[c] = w[j0 + c];
            gls[c] = gl[j0 + c];
          }
        for (int c = 0; c < kHeadColumns; ++c)
          if (j0 + c < seen) {
            gl[j0 + c] = ws[c] * (gls[c] - weighted);
            w[j0 + c] = ws[c] * mask(l, 0, e, (h * T + i) * T + j0 + c);  // now the kept weight
          }
      }
      for (int j = seen; j < T; ++j) gl[j] = 0.0f;
    });
    float* bias_grad = table_grad(kLearnsScoreBias, a_.tables.score_bias_grad, l);
    const int column_items = attention_items(true);
    block_items3(
        threads_, column_items,
        [&](int item) {
          // dq_i's four columns: the logits' gradient (phase 1) @ k.
          const AttentionItem at = attention_item(item, true);
          const int e = at.e, h = at.h, i = at.t;
          const int qr = e * T + i, seen = is_causal ? i + 1 : T;
          const float* gl = gs + ((e * H + h) * T + i) * T;
          const float* keys = qkv + e * T * 3 * D + D + h * Dh;  // row j: k_j of the head
          weighted_rows_four(seen, [&](int j) { return gl[j] * scale_; }, keys, 3 * D, at.d0, Dh, rows_four_,
                             gq + qr * 3 * D + h * Dh);
        },
        column_items,
        [&](int item) {
          // dk_j's and dv_j's four columns.
          const AttentionItem at = attention_item(item, true);
          const int e = at.e, h = at.h, j = at.t, d0 = at.d0;
          const int kr = e * T + j;
          Four dk_acc{}, dv_acc{};
          for (int i = is_causal ? j : 0; i < T; ++i) {
            const Four q = row_four(qkv + (e * T + i) * 3 * D + h * Dh, d0, Dh, rows_four_);
            const Four g_i = row_four(g + (e * T + i) * D + h * Dh, d0, Dh, rows_four_);
            const float scaled = gs[((e * H + h) * T + i) * T + j] * scale_;
            const float kept = weights[((e * H + h) * T + i) * T + j];  // times its mask (phase 1)
            for (int c = 0; c < kHeadColumns; ++c)
              if (d0 + c < Dh) {
                dk_acc.v[c] = fma_of(scaled, q.v[c], dk_acc.v[c]);
                dv_acc.v[c] = fma_of(kept, g_i.v[c], dv_acc.v[c]);
              }
          }
          row_store_four(gq + kr * 3 * D + D + h * Dh, d0, Dh, dk_acc, rows_four_);
          row_store_four(gq + kr * 3 * D + 2 * D + h * Dh, d0, Dh, dv_acc, rows_four_);
        },
        bias_grad ? H * s_.P : 0,
        [&](int item) {
          // The score bias's gradient at head h, query position p: each example's rows at p,
          // in order, their gradient at the logits added at the keys' positions.
          const int h = item / s_.P, p = item % s_.P;
          float* row = bias_grad + (h * s_.P + p) * s_.P;
          for (int e = 0; e < n_; ++e)
            for (int i = 0; i < T; ++i) {
              if (position(e * T + i) != p) continue;
              const float* gl = gs + ((e * H + h) * T + i) * T;
              for (int j = 0; j < T; ++j) row[position(e * T + j)] += gl[j];
            }
        });
  }

  // ---- Blocks -----------------------------------------------------------------------------
  // x += dropout(proj(attention(ln1(x)))); x += dropout(fc2(dropout(relu(fc1(ln2(x)))))).
  COPYTASK_HOST_DEVICE COPYTASK_DEVICE_INLINE void block_forward(int l) {
    const int D = s_.D, F = s_.F;
    const BlockParameters& p = a_.parameters.block[l];
    float* x = sm(l_.x);
    float* act = sm(l_.act);
    layernorm_forward(x, p.ln1, block_part(l_.n1, l), block_part(l_.rstd1, l), act);
    {
      const Product qkv = forward_product(act, p.qkv, D, 3 * D);
      const StoreOut out{block_part(l_.qkv, l), 3 * D, nullptr, rows_four_};
      product_phase(threads_, qkv, out, column_tiles(3 * D), a_.vector_loads, a_.small_items);
    }
    if (a_.tables.pair_cos) rotation_forward(l);
    attention_forward(l);
    residual_forward(l, block_part(l_.mixed, l), p.proj, D, /*site=*/1);
    layernorm_forward(x, p.ln2, block_part(l_.n2, l), block_part(l_.rstd2, l), act);
    {
      // pre = fc1(ln2(x)) kept; the hidden layer relu(pre) * mask in grad_wide, free until
      // the backward.
      const Product fc1 = forward_product(act, p.fc1, D, F);
      const ReluOut out{this, l, block_part(l_.pre, l), sm(l_.grad_wide), value(p.fc1.bias, F)};
      product_phase(threads_, fc1, out, column_tiles(F), a_.vector_loads, a_.small_items);
    }
    residual_forward(l, sm(l_.grad_wide), p.fc2, F, /*site=*/3);
  }
  // x += (in @ weight + bias) * the mask of `site` (1: the attention's output, 3: the
  // feed-forward's).
  COPYTASK_HOST_DEVICE void residual_forward(int l, const float* in, const LinearParameters& p, int I, int site) {
    const Product product = forward_product(in, p, I, s_.D);
    const ResidualOut out{this, l, site, sm(l_.x), value(p.bias, s_.D)};
    product_phase(threads_, product, out, column_tiles(s_.D), a_.vector_loads, a_.small_items);
  }

  COPYTASK_HOST_DEVICE COPYTASK_DEVICE_INLINE void block_backward(int l) {
    const int D = s_.D, F = s_.F;
    const BlockParameters& p = a_.parameters.block[l];
    float* gx = sm(l_.grad_x);
    float* ga = sm(l_.grad_branch);
    float* act = sm(l_.act);
    float* wide = sm(l_.grad_wide);
    float* narrow = sm(l_.grad_narrow);
    const float* pre = block_part(l_.pre, l);
    // ln2's output made again for fc1's weight gradient, into nf (ln_f's, whose backward is
    // done, free until the next tile's forward), so that it shares the phase that makes the
    // feed-forward's gradient at its output through its dropout and the hidden layer again.
    float* ln2_out = sm(l_.nf);
    block_items3(
        threads_, rows_ * D,
        [&](int i) {
          const int r = a_.divisors.D.div(i);
          ga[i] = gx[i] * row_mask(l, 3, r, i - r * D, D);
        },
        rows_ * F,
        [&](int i) {
          const float v = pre[i] > 0.0f ? pre[i] : 0.0f;
          const int r = a_.divisors.F.div(i);
          act[i] = v * row_mask(l, 2, r, i - r * F, F);
        },
        rows_ * D, [&](int i) { layernorm_output_item(i, p.ln2, block_part(l_.n2, l), ln2_out); });
    linear_backward(act, ga, p.fc2, F, D, ReluBackOut{this, l, wide, pre});  // wide = d(pre)
    linear_backward(ln2_out, wide, p.fc1, D, F, StoreOut{narrow, D, nullptr, rows_four_});
    // ln2's backward, with in the same phase: each row's gradient at the attention's output
    // through its dropout once the row is whole, and ln1's output made again (for qkv's weight
    // gradient below; act is free once fc1's backward has read it, and nothing until then
    // reads it).
    layernorm_backward(
        p.ln2, block_part(l_.n2, l), block_part(l_.rstd2, l), narrow, /*accumulate=*/true,
        [&](int r) {
          for (int d = 0; d < D; ++d) ga[r * D + d] = gx[r * D + d] * row_mask(l, 1, r, d, D);
        },
        rows_ * D, [&](int i) { layernorm_output_item(i, p.ln1, block_part(l_.n1, l), act); });
    // Attention.
    linear_backward(block_part(l_.mixed, l), ga, p.proj, D, D, StoreOut{narrow, D, nullptr, rows_four_});
    attention_backward(l);
    if (a_.tables.pair_cos) rotation_backward(l);
    linear_backward(act, wide, p.qkv, D, 3 * D, StoreOut{narrow, D, nullptr, rows_four_});
    layernorm_backward(p.ln1, block_part(l_.n1, l), block_part(l_.rstd1, l), narrow, /*accumulate=*/true);
  }

  // ---- Head and loss ----------------------------------------------------------------------
  COPYTASK_HOST_DEVICE void head_forward() {
    const Product head = forward_product(sm(l_.act), a_.parameters.head, s_.D, s_.V);
    const StoreOut out{sm(l_.logits), s_.V, value(a_.parameters.head.bias, s_.V)};
    product_phase(threads_, head, out, column_tiles(s_.V), a_.vector_loads, a_.small_items);
  }
  COPYTASK_HOST_DEVICE void head_backward() {
    linear_backward(sm(l_.act), sm(l_.logits), a_.parameters.head, s_.D, s_.V,
                    StoreOut{sm(l_.grad_narrow), s_.D, nullptr, rows_four_});
  }
  // Items: rows. Each row's cross-entropy of its target kept, its logits turned into
  // d(loss)/d(logits) for the member's mean loss; then the rows' losses added to the
  // partition's in order.
  COPYTASK_HOST_DEVICE void crossentropy_forward_backward() {
    const int V = s_.V;
    float* logits = sm(l_.logits);
    float* row_loss = sm(l_.row_loss);
    const float weight = a_.loss_weight;
    block_items(threads_, rows_, [&](int r) {
      float* p = logits + r * V;
      const int target = ints(l_.targets)[r];
      if (target < 0) {  // out of the loss (kOutOfLoss): no loss, no gradient
        for (int v = 0; v < V; ++v) p[v] = 0.0f;
        row_loss[r] = 0.0f;
        return;
      }
      float row_max = negative_infinity();
      for (int v = 0; v < V; ++v) row_max = p[v] > row_max ? p[v] : row_max;
      const float target_shifted = p[target] - row_max;  // kept before e^x replaces it
      const float total = exp_shifted_in_place(p, V, row_max);
      row_loss[r] = log_of(total) - target_shifted;  // -log softmax of the target
      scale_in_place(p, V, weight / total);
      p[target] -= weight;
    });
  }
  // The rows' losses added to the partition's in order (one item: run() gives it a place in
  // a later phase).
  COPYTASK_HOST_DEVICE void loss_sum() const {
    const float* row_loss = sm(l_.row_loss);
    double* loss = a_.partial_loss + static_cast<int64_t>(m_) * a_.partitions + k_;
    double sum = tile_first_ == first_ ? 0.0 : *loss;
    for (int r = 0; r < rows_; ++r) sum += static_cast<double>(row_loss[r]);
    *loss = sum;
  }

  // ---- Outputs of the products that apply a layer --------------------------------------------
  // x += (sum + bias) * the dropout mask of `site`.
  struct ResidualOut {
    const FusedStepBlock* block;
    int l, site;
    float* x;
    const float* bias;
    COPYTASK_HOST_DEVICE float start(int, int o) const { return bias ? bias[o] : 0.0f; }
    COPYTASK_HOST_DEVICE void finish(int r, int o, float v) const {
      const int D = block->s_.D;
      x[r * D + o] += v * block->row_mask(l, site, r, o, D);
    }
    COPYTASK_HOST_DEVICE bool fours() const { return block->rows_four_; }
    COPYTASK_HOST_DEVICE void finish_four(int r, int o0, const Four& v) const {
      const int D = block->s_.D;
      Four row = load_four(x + r * D + o0);
      for (int c = 0; c < 4; ++c) row.v[c] += v.v[c] * block->row_mask(l, site, r, o0 + c, D);
      store_four(x + r * D + o0, row);
    }
  };
  // pre = sum + bias; hidden = relu(pre) * the hidden layer's mask.
  struct ReluOut {
    const FusedStepBlock* block;
    int l;
    float* pre;
    float* hidden;
    const float* bias;
    COPYTASK_HOST_DEVICE float start(int, int o) const { return bias[o]; }
    COPYTASK_HOST_DEVICE void finish(int r, int o, float v) const {
      const int F = block->s_.F;
      pre[r * F + o] = v;
      hidden[r * F + o] = (v > 0.0f ? v : 0.0f) * block->row_mask(l, 2, r, o, F);
    }
    COPYTASK_HOST_DEVICE bool fours() const { return block->hidden_four_; }
    COPYTASK_HOST_DEVICE void finish_four(int r, int o0, const Four& v) const {
      const int F = block->s_.F;
      Four h;
      for (int c = 0; c < 4; ++c) h.v[c] = (v.v[c] > 0.0f ? v.v[c] : 0.0f) * block->row_mask(l, 2, r, o0 + c, F);
      store_four(pre + r * F + o0, v);
      store_four(hidden + r * F + o0, h);
    }
  };
  // d(pre) = the sum (the gradient at the hidden layer) through the mask and the ReLU.
  struct ReluBackOut {
    const FusedStepBlock* block;
    int l;
    float* c;
    const float* pre;
    COPYTASK_HOST_DEVICE float start(int, int) const { return 0.0f; }
    COPYTASK_HOST_DEVICE void finish(int r, int o, float v) const {
      const int F = block->s_.F;
      c[r * F + o] = (pre[r * F + o] > 0.0f ? v : 0.0f) * block->row_mask(l, 2, r, o, F);
    }
    COPYTASK_HOST_DEVICE bool fours() const { return block->hidden_four_; }
    COPYTASK_HOST_DEVICE void finish_four(int r, int o0, const Four& v) const {
      const int F = block->s_.F;
      const Four before = load_four(pre + r * F + o0);
      Four out;
      for (int k = 0; k < 4; ++k) out.v[k] = (before.v[k] > 0.0f ? v.v[k] : 0.0f) * block->row_mask(l, 2, r, o0 + k, F);
      store_four(c + r * F + o0, out);
    }
  };

  const FusedStepArgs& a_;
  const StepShape& s_;
  const TileLayout& l_;
  int m_, k_;
  float* smem_;
  Threads& threads_;
  uint8_t flags_ = 0;
  float* grad_ = nullptr;  // the block's slice of partial (flat)
  float scale_ = 1.0f;     // 1 / sqrt(Dh)
  bool rows_four_ = false;    // rows and head columns read and written four floats at a time (row_four)
  bool hidden_four_ = false;  // the same for the hidden layer's rows
  int first_ = 0, last_ = 0;          // the partition's examples
  int tile_first_ = 0, n_ = 0, rows_ = 0;  // the tile's first example, examples and rows
  uint64_t step_key_ = 0;
};

// The sum kernel's item i < M flat: member m's float f of grads, the partitions' in order (a
// table's copies in order within each); items M flat .. M flat + M - 1: member m's mean loss.
COPYTASK_HOST_DEVICE inline void fused_step_sum_item(const FusedStepArgs& a, int64_t i) {
  const int64_t M = a.members, K = a.partitions, total = M * a.flat;
  if (i < total) {
    const int64_t m = i / a.flat, f = i % a.flat;
    const float* member = a.partial + m * K * a.partial_flat;
    int64_t at = f, copies = 1, stride = 0;  // where float f's terms are in a block's slice
    const TableGrad* tables[3] = {&a.tables.embedding_rows_grad, &a.tables.pair_angles_grad, &a.tables.score_bias_grad};
    if (f >= a.parameter_floats)
      for (const TableGrad* t : tables)
        if (t->grad >= 0 && f >= t->grad && f < t->grad + t->floats) {
          at = t->partial + (f - t->grad);
          copies = t->copies;
          stride = t->floats;
        }
    float sum = 0;
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < copies; ++c) {
        const float term = member[k * a.partial_flat + at + c * stride];
        sum = k == 0 && c == 0 ? term : sum + term;
      }
    a.grads[i] = sum;
  } else if (i < total + M) {
    const int64_t m = i - total;
    double sum = 0;
    for (int64_t k = 0; k < K; ++k) sum += a.partial_loss[m * K + k];
    a.member_loss[m] = static_cast<float>(sum / (static_cast<double>(a.s.B) * a.s.T));
  }
}

}  // namespace copytask::kernels
