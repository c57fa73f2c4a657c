#pragma once
// The encoder's layers by hand on the CPU, one example at a time: one function per layer's
// forward and one per its backward (llm.c's layout). model/fused_cpu.cpp composes them
// into the training step and the evaluation forward pass; nothing else implements them.
// Everything is row-major float32; weights are (in, out), as the LibTorch model stores them.
// The functions are always inlined into their caller, so each of its compiled variants
// (x86-64-v4, x86-64-v3 and generic: on_cpu_variant below) gets them with its own
// instructions; the matrix products alone are out of line, one function per variant.
//
// Shapes of one example: T positions, D embed, H heads, Dh = D / H, F FF hidden, V vocab;
// q | k | v of a position are one row of 3D floats, head h at columns h*Dh of each third.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "config/layer_form.h"
#include "model/cpu_variant.h"

#define COPYTASK_INLINE inline __attribute__((always_inline))
// Vec8 and Vec16 values are passed only between always-inlined functions, so the warning
// that their ABI differs between the compiled variants does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace copytask::cpu {

// ---- The compiled variants ------------------------------------------------------------
// The hot functions are compiled three times, for x86-64-v4 (AVX-512: 16-wide registers),
// x86-64-v3 (AVX2 and FMA: 8-wide) and the generic target, and cpu_variant_active()
// (model/cpu_variant.h) picks one at every call. A kernel writes its body once, as an
// always-inlined lambda of the register width's tag, and on_cpu_variant runs it:
//
//   return on_cpu_variant([&](auto lanes) COPYTASK_KERNEL_BODY { ...; matmul<decltype(lanes)>(...); });
//
// Each runner below has its target's instructions, and the body and every layer it calls
// (always inlined) are compiled into it with them. The tag tells the layers that are written
// for a width (the matrix products) which one to use.
// The tags: the register width and the variant (the out-of-line products below are called
// by the variant).
struct LanesV4 {
  static constexpr int kWidth = 16;
  static constexpr CpuVariant kVariant = CpuVariant::x86_64_v4;
};
struct LanesV3 {
  static constexpr int kWidth = 8;
  static constexpr CpuVariant kVariant = CpuVariant::x86_64_v3;
};
struct LanesGeneric {
  static constexpr int kWidth = 8;
  static constexpr CpuVariant kVariant = CpuVariant::generic;
};
#define COPYTASK_KERNEL_BODY __attribute__((always_inline))

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
#define COPYTASK_CPU_VARIANTS 1
// prefer-vector-width=512: GCC's x86-64-v4 otherwise vectorises the elementwise loops 8 wide.
template <class Body>
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) auto run_x86_64_v4(const Body& body) {
  return body(LanesV4{});
}
template <class Body>
__attribute__((noinline, target("arch=x86-64-v3"))) auto run_x86_64_v3(const Body& body) {
  return body(LanesV3{});
}
#else
#define COPYTASK_CPU_VARIANTS 0
#endif
template <class Body>
__attribute__((noinline)) auto run_generic(const Body& body) {
  return body(LanesGeneric{});
}

template <class Body>
COPYTASK_INLINE auto on_cpu_variant(const Body& body) {
#if COPYTASK_CPU_VARIANTS
  switch (cpu_variant_active()) {
    case CpuVariant::x86_64_v4: return run_x86_64_v4(body);
    case CpuVariant::x86_64_v3: return run_x86_64_v3(body);
    case CpuVariant::generic: break;
  }
#endif
  return run_generic(body);
}

// ---- Small matrix products ------------------------------------------------------------

// Eight and sixteen floats, loaded and stored unaligned: the vector types of the matrix
// products (one AVX register in the x86-64-v3 variant, two SSE registers in the generic
// one; one AVX-512 register in the x86-64-v4 variant).
typedef float Vec8 __attribute__((vector_size(32)));
typedef float Vec16 __attribute__((vector_size(64)));
typedef float Vec4 __attribute__((vector_size(16)));  // a 20-wide row's last four
// The first `width` floats of a vector, the others 0 / stored. Loaded through a buffer and
// stored from a copy (the argument is by value), so that no accumulator of a tile is indexed
// at a run-time lane, which would keep the whole tile in memory instead of registers.
template <class Vec>
COPYTASK_INLINE Vec load_partial(const float* p, int64_t width) {
  float buffer[sizeof(Vec) / sizeof(float)] = {};
  for (int64_t l = 0; l < width; ++l) buffer[l] = p[l];
  Vec v;
  __builtin_memcpy(&v, buffer, sizeof v);
  return v;
}
template <class Vec>
COPYTASK_INLINE void store_partial(float* p, Vec v, int64_t width) {
  for (int64_t l = 0; l < width; ++l) p[l] = v[l];
}

// Every right-hand matrix (B below) is followed by this many readable floats: the
// products read 8 (or 16) columns at a time, so up to 15 past its end.
constexpr int64_t kSlack = 16;

template <class Vec>
COPYTASK_INLINE Vec load_vec(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
// (By value and through an unaligned type: an accumulator whose address is taken stays in
// memory.)
template <class Vec>
COPYTASK_INLINE void store_vec(float* p, Vec v) {
  typedef float Unaligned __attribute__((vector_size(sizeof(Vec)), aligned(4), may_alias));
  *reinterpret_cast<Unaligned*>(p) = v;
}
template <>
COPYTASK_INLINE void store_vec<float>(float* p, float v) {
  *p = v;
}

// An element-wise loop over i < n written once: body(Lane{}, i) for lanes i .. i + width - 1,
// with Lane = Vec8 while eight remain, then Vec4 (a 20-wide row's last four), then float one
// by one (load_vec<float> and store_vec<float> are a plain read and write). Each element's
// arithmetic is the body's whatever its lane type, so the three loops agree bit for bit.
// Written out, not left to the compiler: it vectorised such loops behind run-time checks that
// their arrays do not overlap, paid on every row.
template <class Body>
COPYTASK_INLINE void over_lanes(int64_t n, const Body& body) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) body(Vec8{}, i);
  for (; i + 4 <= n; i += 4) body(Vec4{}, i);
  for (; i < n; ++i) body(float{}, i);
}

// A tile's partial last vector, the first `width` < W lanes of a row: how each variant loads
// (the other lanes 0) and stores it. The generic target goes through a small buffer (above);
// x86-64-v3 and x86-64-v4 mask the lanes in one instruction (AVX's vmaskmovps; AVX-512's
// k-masked moves), which touch no float past `width`. Through the buffer, the partial
// vectors were about a sixth of the products' instructions (a loop per lane, and a vector
// load from floats just stored one by one, which the CPU cannot forward). The masked moves
// are inline assembly: the intrinsics carry their target, which the templates below (shared
// by the three variants) lack, and GCC refuses to inline them there. The stored floats are
// declared read and written ("+m"), so no earlier store to them can be dropped.
struct PartialsThroughBuffer {
  template <class Vec>
  static COPYTASK_INLINE int64_t mask(int64_t width) { return width; }
  template <class Vec>
  static COPYTASK_INLINE Vec load(const float* p, int64_t width) { return load_partial<Vec>(p, width); }
  template <class Vec>
  static COPYTASK_INLINE void store(float* p, Vec v, int64_t width) { store_partial(p, v, width); }
};

#if defined(__GNUC__) && defined(__x86_64__) && !defined(__clang__)
typedef int32_t Int32x8 __attribute__((vector_size(32)));
// AVX (x86-64-v3): 8 lanes, the mask's lanes negative where the lane is kept.
struct PartialsMaskedAvx {
  template <class Vec>
  static COPYTASK_INLINE Int32x8 mask(int64_t width) {
    static_assert(sizeof(Vec) == 32, "AVX masks 8-lane vectors");
    const Int32x8 lane = {0, 1, 2, 3, 4, 5, 6, 7};
    return lane < (Int32x8{} + static_cast<int32_t>(width));
  }
  template <class Vec>
  static COPYTASK_INLINE Vec load(const float* p, Int32x8 mask) {
    Vec v;
    asm("vmaskmovps %1, %2, %0" : "=x"(v) : "m"(*reinterpret_cast<const float(*)[8]>(p)), "x"(mask));
    return v;
  }
  template <class Vec>
  static COPYTASK_INLINE void store(float* p, Vec v, Int32x8 mask) {
    asm("vmaskmovps %2, %1, %0" : "+m"(*reinterpret_cast<float(*)[8]>(p)) : "x"(mask), "x"(v));
  }
};
// AVX-512 (x86-64-v4): 8 or 16 lanes under a mask register.
struct PartialsMaskedAvx512 {
  template <class Vec>
  static COPYTASK_INLINE uint16_t mask(int64_t width) { return static_cast<uint16_t>((1u << width) - 1); }
  template <class Vec>
  static COPYTASK_INLINE Vec load(const float* p, uint16_t mask) {
    constexpr int W = sizeof(Vec) / sizeof(float);
    Vec v;
    asm("vmovups %1, %0%{%2%}%{z%}" : "=v"(v) : "m"(*reinterpret_cast<const float(*)[W]>(p)), "Yk"(mask));
    return v;
  }
  template <class Vec>
  static COPYTASK_INLINE void store(float* p, Vec v, uint16_t mask) {
    constexpr int W = sizeof(Vec) / sizeof(float);
    asm("vmovups %1, %0%{%2%}" : "+m"(*reinterpret_cast<float(*)[W]>(p)) : "v"(v), "Yk"(mask));
  }
};
#endif

// One small matrix product: rows r < rows of C = (or +=, or = bias +) A @ B, where A's
// element (r, k) is A[r * a_row + k * a_red] (so A may be read transposed), B's row k starts
// at B + k * b_row and C's row r at C + r * c_row (so either may be a head's columns of a
// wider matrix).
struct Product {
  const float* A;
  int64_t a_row, a_red;
  const float* B;
  int64_t b_row;
  const float* bias;  // (O), or null: C's rows start from it (when not accumulating)
  float* C;
  int64_t c_row;
  int64_t rows, K, O;
  bool accumulate;    // C += A @ B
};

// How a tile's sums start: from 0, from C's values (C +=), or from the bias.
enum class TileStart { zero, accumulate, bias };

// The register tile: rows r < R of C, columns o .. o + W NV for vectors of W floats (when
// Partial, the last of the NV vectors holds only the columns up to O: its other lanes are
// computed from the next row's or the slack's floats and never stored). The R x NV
// accumulators stay in registers over the whole sum, so each loaded row of B serves R
// products and each broadcast element of A serves NV. Every element is the same sum in the
// same order whatever the tile (the first term, then one fused multiply-add per k in order).
// The start (0, C or the bias) is a template argument and the partial vector known at compile
// time, so that the compiler keeps the tile in registers from the first load to the last
// store (with the start chosen inside, it kept the tile on the stack around the loop).
template <class Vec, class Partials, int R, int NV, bool Partial, TileStart Start>
COPYTASK_INLINE void matmul_tile(const Product& p, const float* A, float* C, int64_t o) {
  constexpr int W = sizeof(Vec) / sizeof(float);
  const auto last = Partials::template mask<Vec>(Partial ? p.O - o - W * (NV - 1) : W);  // the last vector's lanes
  auto full = [&](int v) { return !Partial || v < NV - 1; };
  Vec acc[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      const float* from = Start == TileStart::accumulate ? C + r * p.c_row + o + W * v : p.bias + o + W * v;
      if constexpr (Start == TileStart::zero) acc[r][v] = Vec{};
      else acc[r][v] = full(v) ? load_vec<Vec>(from) : Partials::template load<Vec>(from, last);
    }
  const float* b_k = p.B + o;
  for (int64_t k = 0; k < p.K; ++k, b_k += p.b_row) {
    Vec b[NV];
    for (int v = 0; v < NV; ++v) b[v] = load_vec<Vec>(b_k + W * v);
    for (int r = 0; r < R; ++r) {
      const float a = A[r * p.a_row + k * p.a_red];
      for (int v = 0; v < NV; ++v) acc[r][v] += a * b[v];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      float* out = C + r * p.c_row + o + W * v;
      if (full(v)) store_vec(out, acc[r][v]);
      else Partials::store(out, acc[r][v], last);
    }
}

// The tile with its start chosen once, outside it.
template <class Vec, class Partials, int R, int NV, bool Partial>
COPYTASK_INLINE void matmul_tile_started(const Product& p, const float* A, float* C, int64_t o) {
  if (p.accumulate) matmul_tile<Vec, Partials, R, NV, Partial, TileStart::accumulate>(p, A, C, o);
  else if (p.bias) matmul_tile<Vec, Partials, R, NV, Partial, TileStart::bias>(p, A, C, o);
  else matmul_tile<Vec, Partials, R, NV, Partial, TileStart::zero>(p, A, C, o);
}

// How many of the `left` vectors of a row's columns the next tile takes, at most MaxNV: all
// of them when they fit, else MaxNV, but never leaving one alone where two tiles can share
// the last vectors (with MaxNV 3, four vectors are 2 + 2, five 3 + 2, seven 3 + 2 + 2). A
// tile's R x NV accumulators are its independent chains of FMAs: a one-vector tile has only
// R, fewer than the FMA pipes and their latency need (8 on every core here), so each of its
// k costs the FMA's latency for R FMAs.
template <int MaxNV>
constexpr int tile_vectors(int64_t left) {
  if (left <= MaxNV) return static_cast<int>(left);
  if (left - MaxNV == 1) return MaxNV - 1 >= 2 ? MaxNV - 1 : MaxNV;
  return MaxNV;
}

// Rows r < R of C from A's and C's row pointers: tiles of tile_vectors' widths along the
// columns, the last partial when O is not a multiple of W.
template <class Vec, class Partials, int R, int MaxNV>
COPYTASK_INLINE void matmul_rows(const Product& p, const float* A, float* C) {
  constexpr int W = sizeof(Vec) / sizeof(float);
  const int64_t vectors = (p.O + W - 1) / W;
  const bool partial = p.O % W != 0;
  int64_t o = 0;
  for (int64_t v = 0; v < vectors;) {
    const int nv = tile_vectors<MaxNV>(vectors - v);
    v += nv;
    const bool last_partial = partial && v == vectors;
    auto tile = [&](auto width) COPYTASK_KERNEL_BODY {
      constexpr int NV = decltype(width)::value;
      if (last_partial) matmul_tile_started<Vec, Partials, R, NV, true>(p, A, C, o);
      else matmul_tile_started<Vec, Partials, R, NV, false>(p, A, C, o);
    };
    if constexpr (MaxNV >= 4) if (nv == 4) tile(std::integral_constant<int, 4>{});
    if constexpr (MaxNV >= 3) if (nv == 3) tile(std::integral_constant<int, 3>{});
    if (nv == 2) tile(std::integral_constant<int, 2>{});
    if (nv == 1) tile(std::integral_constant<int, 1>{});
    o += W * nv;
  }
}

// Every row of C in tiles of Vec: where a row's columns are one or two vectors and the
// variant's registers hold MaxRows rows of them, blocks of ten or eight rows that divide the
// rows (an attention product of T = 10 rows in one tile); else blocks of five rows where they
// divide the rows and four do not (10 positions: 5 + 5, not 4 + 4 + 2), else of four and the
// rest. A tile of R rows takes up to MaxNV vectors and at most Accumulators registers of sums
// (R x NV). x86-64-v3: 4 x 3, 5 x 2 or 10 x 1 of the 16 AVX2 registers, the rest for B's
// vectors and A's broadcast element (5 x 3 ran out of them: 14.8 cycles a k against 6.1 for
// 4 x 3, timed by scripts/mca_driver.cpp on Zen 3); x86-64-v4: up to 5 x 4 or 10 x 2 of the
// 32 AVX-512 registers. Why taller tiles for narrow rows: a tile's R x NV sums are its
// independent chains of FMAs, and a 5 x 1 tile's five are fewer than two FMA pipes at a
// latency of four cycles need, so each of its k waited on the FMA's latency.
template <class Vec, class Partials, int MaxNV, int Accumulators, int MaxRows>
COPYTASK_INLINE void matmul_blocks(const Product& p) {
  constexpr int W = sizeof(Vec) / sizeof(float);
  auto A = [&](int64_t r) { return p.A + r * p.a_row; };
  auto C = [&](int64_t r) { return p.C + r * p.c_row; };
  auto rows = [&](auto R, int64_t r) COPYTASK_KERNEL_BODY {
    constexpr int kR = decltype(R)::value;
    constexpr int kMaxNV = MaxNV < Accumulators / kR ? MaxNV : Accumulators / kR;
    matmul_rows<Vec, Partials, kR, kMaxNV>(p, A(r), C(r));
  };
  const int64_t vectors = (p.O + W - 1) / W;  // a row's, the last maybe partial
  auto tall = [&](int64_t R) { return R <= MaxRows && vectors <= 2 && R * vectors <= Accumulators && p.rows % R == 0; };
  int64_t r = 0;
  if constexpr (MaxRows >= 10)
    if (tall(10)) {
      for (; r < p.rows; r += 10) rows(std::integral_constant<int, 10>{}, r);
      return;
    }
  if constexpr (MaxRows >= 8)
    if (tall(8)) {
      for (; r < p.rows; r += 8) rows(std::integral_constant<int, 8>{}, r);
      return;
    }
  if (p.rows % 5 == 0 && p.rows % 4 != 0) {
    for (; r < p.rows; r += 5) rows(std::integral_constant<int, 5>{}, r);
    return;
  }
  for (; r + 4 <= p.rows; r += 4) rows(std::integral_constant<int, 4>{}, r);
  switch (p.rows - r) {
    case 3: rows(std::integral_constant<int, 3>{}, r); break;
    case 2: rows(std::integral_constant<int, 2>{}, r); break;
    case 1: rows(std::integral_constant<int, 1>{}, r); break;
    default: break;
  }
}

// The products out of line, one function per variant. Inlined at each of the step's call
// sites, their tiles made the per-example function 190 KB of code (x86-64-v3) and 490 KB
// (x86-64-v4), many times the 32 KB instruction cache; a call costs far less than a product.
#if COPYTASK_CPU_VARIANTS
// On x86-64-v4, 16-lane tiles; but where 512-bit FMAs run on 256-bit pipes (Zen 4) and 8-lane
// vectors cover the columns with fewer lanes (a 20-wide row: 24 lanes, not 32), 8-lane tiles
// of up to 4 vectors in AVX-512's 32 registers.
__attribute__((noinline, target("arch=x86-64-v4,prefer-vector-width=512"))) inline void matmul_x86_64_v4(
    const Product& p) {
  const int64_t lanes8 = (p.O + 7) / 8 * 8, lanes16 = (p.O + 15) / 16 * 16;
  if (lanes8 < lanes16 && cpu_avx512_on_256_bit_pipes()) matmul_blocks<Vec8, PartialsMaskedAvx512, 4, 20, 10>(p);
  else matmul_blocks<Vec16, PartialsMaskedAvx512, 4, 20, 10>(p);
}
__attribute__((noinline, target("arch=x86-64-v3"))) inline void matmul_x86_64_v3(const Product& p) {
  matmul_blocks<Vec8, PartialsMaskedAvx, 3, 12, 10>(p);
}
#endif
__attribute__((noinline)) inline void matmul_generic(const Product& p) { matmul_blocks<Vec8, PartialsThroughBuffer, 2, 10, 5>(p); }

// The product in the variant of the tag Lanes. Every B is followed by kSlack readable floats.
template <class Lanes>
COPYTASK_INLINE void matmul(const Product& p) {
#if COPYTASK_CPU_VARIANTS
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v4) return matmul_x86_64_v4(p);
  if constexpr (Lanes::kVariant == CpuVariant::x86_64_v3) return matmul_x86_64_v3(p);
#endif
  matmul_generic(p);
}

// The common case: A (rows, K) read as A[r * a_row + k * a_red], B (K, O) and C (rows, O)
// contiguous.
template <class Lanes>
COPYTASK_INLINE void matmul(const float* A, int64_t a_row, int64_t a_red, const float* B, const float* bias, float* C,
                            int64_t rows, int64_t K, int64_t O, bool accumulate) {
  matmul<Lanes>(Product{A, a_row, a_red, B, O, bias, C, O, rows, K, O, accumulate});
}

// ---- Exponential -----------------------------------------------------------------------

// e^x for each lane, within 2 ulp of the exact value for x <= 88 (0 below -87: the softmax
// and the cross-entropy take it of x - max <= 0, where such terms are below float's
// precision of the largest, which is 1); NaN stays NaN. x = n ln 2 + r with |r| <= ln 2 / 2
// (ln 2 in two parts, so r is exact to float precision), e^r by its Taylor polynomial to
// r^7 (error below 6e-9 there), times 2^n built in the exponent bits. The library's
// expf, one call per element, was most of the attention's and the loss's time.
template <class Vec>
COPYTASK_INLINE Vec exp_lanes(Vec x) {
  typedef int32_t IntVec __attribute__((vector_size(sizeof(Vec))));
  const Vec high = x > 88.0f ? Vec{} + 88.0f : x;
  const Vec n = (high * 1.44269504f + 12582912.0f) - 12582912.0f;  // round to nearest: 1.5 * 2^23
  const Vec r = (high - n * 0.693359375f) - n * -2.12194440e-4f;
  Vec p = Vec{} + (1.0f / 5040);
  p = p * r + (1.0f / 720);
  p = p * r + (1.0f / 120);
  p = p * r + (1.0f / 24);
  p = p * r + (1.0f / 6);
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const IntVec n_int = __builtin_convertvector(x < -87.0f ? Vec{} : n, IntVec);
  const IntVec scale_bits = (n_int + 127) << 23;
  Vec scale;
  __builtin_memcpy(&scale, &scale_bits, sizeof scale);
  return x < -87.0f ? Vec{} : p * scale;
}

// x[e] = e^x[e] for e < n, eight at a time (the last few through a buffer: call it on a
// whole block of rows, not row by row).
COPYTASK_INLINE void exp_in_place(float* x, int64_t n) {
  int64_t e = 0;
  for (; e + 8 <= n; e += 8) store_vec(x + e, exp_lanes(load_vec<Vec8>(x + e)));
  if (e < n) store_partial(x + e, exp_lanes(load_partial<Vec8>(x + e, n - e)), n - e);
}

// ---- Linear -------------------------------------------------------------------------------

// out (T, O) = in (T, I) @ w (I, O) + bias (O); bias may be null.
template <class Lanes>
COPYTASK_INLINE void linear_forward(const float* in, const float* w, const float* bias, float* out, int64_t T,
                                    int64_t I, int64_t O) {
  matmul<Lanes>(in, I, 1, w, bias, out, T, I, O, false);
}

// grad_w (I, O) += in^T @ grad_out; grad_bias (O) += the column sums of grad_out (when
// given); grad_in (T, I) = grad_out @ w^T (when given), read from w_t = w^T (O, I).
template <class Lanes>
COPYTASK_INLINE void linear_backward(const float* in, const float* grad_out, const float* w_t, float* grad_w,
                                     float* grad_bias, float* grad_in, int64_t T, int64_t I, int64_t O) {
  if (grad_bias)  // each column summed row after row, several columns in a vector's lanes
    over_lanes(O, [&](auto lane, int64_t o) {
      using Lane = decltype(lane);
      Lane sum = load_vec<Lane>(grad_bias + o);
      for (int64_t t = 0; t < T; ++t) sum += load_vec<Lane>(grad_out + t * O + o);
      store_vec(grad_bias + o, sum);
    });
  matmul<Lanes>(in, 1, I, grad_out, nullptr, grad_w, I, T, O, true);  // rows i, summed over t
  if (grad_in) matmul<Lanes>(grad_out, O, 1, w_t, nullptr, grad_in, T, O, I, false);
}

// ---- Layer norm ---------------------------------------------------------------------------
// A row's sums (its mean, its variance, the backward's two means) are taken eight lanes at a
// time, the lanes then added pairwise (lanes_sums) and the last D % 8 elements one at a time
// (a chain of D dependent additions per sum had made the layer norms a tenth of the step). The
// rows go in blocks of eight, and each block's lanes and tails are added across its rows: the
// eight rows' partial sums transposed, so that lane i of one vector holds row i's sum, the same
// additions in the same order as row by row, in 8 vector additions instead of 8 x 7 scalar
// ones and one division for the block instead of eight (a profile on Emerald Rapids had the
// lanes' sums, the scalar tails and the divisions at 11% of the step).

// The rows of a block.
constexpr int64_t kLayerNormRows = 8;
typedef Vec8 RowsVec;  // lane i: row i of a block

// lane i = ((a[i][0] + a[i][4]) + (a[i][1] + a[i][5])) + ((a[i][2] + a[i][6]) + (a[i][3] +
// a[i][7])), the sum of row i's eight lanes: the eight rows' lanes transposed (c[j] lane i =
// a[i][j]) in three rounds of shuffles, then added in that order.
COPYTASK_INLINE RowsVec lanes_sums(const Vec8 (&a)[kLayerNormRows]) {
  Vec8 t[8], u[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(a[i], a[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(a[i], a[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4)
    for (int h = 0; h < 2; ++h) {
      u[i + 2 * h] = __builtin_shufflevector(t[i + h], t[i + h + 2], 0, 1, 8, 9, 4, 5, 12, 13);
      u[i + 2 * h + 1] = __builtin_shufflevector(t[i + h], t[i + h + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    }
  Vec8 c[8];  // c[j] lane i = a[i][j]
  for (int j = 0; j < 4; ++j) {
    c[j] = __builtin_shufflevector(u[j], u[j + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    c[j + 4] = __builtin_shufflevector(u[j], u[j + 4], 4, 5, 6, 7, 12, 13, 14, 15);
  }
  return ((c[0] + c[4]) + (c[1] + c[5])) + ((c[2] + c[6]) + (c[3] + c[7]));
}

// The elements of a row in whole vectors of eight.
COPYTASK_INLINE int64_t full_lanes(int64_t D) { return D / 8 * 8; }

// A block's rows (row i at x + i * D, i < rows <= 8) and their last D % 8 elements as
// columns, transposed once for every sum over the block: lane i of tail[d - full] =
// x[i * D + d] (0 for i >= rows). Four at a time as a 4 x 8 transposition of the rows' last
// four (a 20-wide row's tail).
struct RowsBlock {
  const float* x;
  int64_t D, rows, full;
  RowsVec tail[8];
  COPYTASK_INLINE RowsBlock(const float* x_, int64_t D_, int64_t rows_) : x(x_), D(D_), rows(rows_), full(full_lanes(D_)) {
    int64_t d = full;
    for (; d + 4 <= D; d += 4) {
      Vec4 r[8];
      for (int64_t i = 0; i < 8; ++i) r[i] = i < rows ? load_vec<Vec4>(x + i * D + d) : Vec4{};
      Vec8 w[4];  // row i's four | row i + 4's four
      for (int i = 0; i < 4; ++i) w[i] = __builtin_shufflevector(r[i], r[i + 4], 0, 1, 2, 3, 4, 5, 6, 7);
      const Vec8 t0 = __builtin_shufflevector(w[0], w[1], 0, 8, 1, 9, 4, 12, 5, 13);
      const Vec8 t1 = __builtin_shufflevector(w[0], w[1], 2, 10, 3, 11, 6, 14, 7, 15);
      const Vec8 t2 = __builtin_shufflevector(w[2], w[3], 0, 8, 1, 9, 4, 12, 5, 13);
      const Vec8 t3 = __builtin_shufflevector(w[2], w[3], 2, 10, 3, 11, 6, 14, 7, 15);
      RowsVec* c = tail + (d - full);
      c[0] = __builtin_shufflevector(t0, t2, 0, 1, 8, 9, 4, 5, 12, 13);
      c[1] = __builtin_shufflevector(t0, t2, 2, 3, 10, 11, 6, 7, 14, 15);
      c[2] = __builtin_shufflevector(t1, t3, 0, 1, 8, 9, 4, 5, 12, 13);
      c[3] = __builtin_shufflevector(t1, t3, 2, 3, 10, 11, 6, 7, 14, 15);
    }
    for (; d < D; ++d) {
      RowsVec c{};
      for (int64_t i = 0; i < rows; ++i) c[i] = x[i * D + d];
      tail[d - full] = c;
    }
  }
  // Row i's eight floats from element d (d < full).
  COPYTASK_INLINE Vec8 chunk(int64_t i, int64_t d) const { return load_vec<Vec8>(x + i * D + d); }
};

// lane i < rows: the sum over d < D of x[i * D + d].
COPYTASK_INLINE RowsVec rows_sum(const RowsBlock& x) {
  Vec8 acc[kLayerNormRows] = {};
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t d = 0; d < x.full; d += 8) acc[i] += x.chunk(i, d);
  RowsVec sum = lanes_sums(acc);
  for (int64_t d = x.full; d < x.D; ++d) sum += x.tail[d - x.full];
  return sum;
}

// lane i < rows: the sum over d < D of x[i * D + d] * y[i * D + d] (two blocks of one shape).
COPYTASK_INLINE RowsVec rows_dot(const RowsBlock& x, const RowsBlock& y) {
  Vec8 acc[kLayerNormRows] = {};
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t d = 0; d < x.full; d += 8) acc[i] += x.chunk(i, d) * y.chunk(i, d);
  RowsVec sum = lanes_sums(acc);
  for (int64_t d = x.full; d < x.D; ++d) sum += x.tail[d - x.full] * y.tail[d - x.full];
  return sum;
}

// lane i < rows: the sum over d < D of (x[i * D + d] - mean[i])^2.
COPYTASK_INLINE RowsVec rows_squared_deviation(const RowsBlock& x, RowsVec mean) {
  Vec8 acc[kLayerNormRows] = {};
  for (int64_t i = 0; i < x.rows; ++i)
    for (int64_t d = 0; d < x.full; d += 8) {
      const Vec8 deviation = x.chunk(i, d) - mean[i];
      acc[i] += deviation * deviation;
    }
  RowsVec sum = lanes_sums(acc);
  for (int64_t d = x.full; d < x.D; ++d) {
    const RowsVec deviation = x.tail[d - x.full] - mean;
    sum += deviation * deviation;
  }
  return sum;
}

// Over D (eps 1e-5, biased variance, as torch::layer_norm); keeps the normalised rows and
// 1/std for the backward. The element-wise loops over d go over_lanes (above). The rows go in
// blocks of eight, each step for the whole block before the next (every mean, then every
// 1/std, then the rows normalised): a row's steps wait on each other (a sum, a division, a
// second sum, a square root), the block's rows do not. Each row's arithmetic is the same.
COPYTASK_INLINE void layernorm_forward(const float* x, const float* weight, const float* bias, float* normalized,
                                       float* rstd, float* out, int64_t T, int64_t D) {
  for (int64_t first = 0; first < T; first += kLayerNormRows) {
    const int64_t rows = std::min(kLayerNormRows, T - first);
    const RowsBlock x_block(x + first * D, D, rows);
    const RowsVec mean = rows_sum(x_block) / static_cast<float>(D);
    const RowsVec variance = rows_squared_deviation(x_block, mean) / static_cast<float>(D);
    float r[kLayerNormRows];
    for (int64_t i = 0; i < rows; ++i) r[i] = 1.0f / std::sqrt(variance[i] + 1e-5f);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t t = first + i;
      const float* x_t = x + t * D;
      const float mean_t = mean[i];
      rstd[t] = r[i];
      float* n_t = normalized + t * D;
      float* out_t = out + t * D;
      over_lanes(D, [&](auto lane, int64_t d) {
        using Lane = decltype(lane);
        const Lane n = (load_vec<Lane>(x_t + d) - mean_t) * r[i];
        store_vec(n_t + d, n);
        store_vec(out_t + d, n * load_vec<Lane>(weight + d) + load_vec<Lane>(bias + d));
      });
    }
  }
}

// grad_x (T, D) += the gradient through the layer norm of grad_out; the weight and bias
// gradients accumulate, row after row. scratch: layernorm_backward_scratch_floats(D). The rows
// go in blocks of eight, as in the forward: each row's d(normalized) first (and the weight's
// and bias's gradients, in the rows' order), then the block's sixteen means, whose chains do
// not wait on each other, then the rows' gradients. Each row's arithmetic is the same.
COPYTASK_INLINE int64_t layernorm_backward_scratch_floats(int64_t D) { return kLayerNormRows * D + 8; }
COPYTASK_INLINE void layernorm_backward(const float* normalized, const float* rstd, const float* weight,
                                        const float* grad_out, float* grad_weight, float* grad_bias, float* grad_x,
                                        int64_t T, int64_t D, float* scratch) {
  for (int64_t first = 0; first < T; first += kLayerNormRows) {
    const int64_t rows = std::min(kLayerNormRows, T - first);
    for (int64_t i = 0; i < rows; ++i) {
      const float* n_t = normalized + (first + i) * D;
      const float* g_t = grad_out + (first + i) * D;
      float* gn = scratch + i * D;  // d(normalized) = grad_out * weight, row i of the block
      over_lanes(D, [&](auto lane, int64_t d) {
        using Lane = decltype(lane);
        const Lane g = load_vec<Lane>(g_t + d);
        store_vec(grad_weight + d, load_vec<Lane>(grad_weight + d) + g * load_vec<Lane>(n_t + d));
        store_vec(grad_bias + d, load_vec<Lane>(grad_bias + d) + g);
        store_vec(gn + d, g * load_vec<Lane>(weight + d));
      });
    }
    // The means of d(normalized) and of d(normalized) * normalized, a block's rows at once.
    const RowsBlock g_block(scratch, D, rows), n_block(normalized + first * D, D, rows);
    const RowsVec mean_g = rows_sum(g_block) / static_cast<float>(D);
    const RowsVec mean_gn = rows_dot(g_block, n_block) / static_cast<float>(D);
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t t = first + i;
      const float* n_t = normalized + t * D;
      const float* gn = scratch + i * D;
      float* gx_t = grad_x + t * D;
      const float r = rstd[t], mean_g_t = mean_g[i], mean_gn_t = mean_gn[i];
      over_lanes(D, [&](auto lane, int64_t d) {
        using Lane = decltype(lane);
        store_vec(gx_t + d, load_vec<Lane>(gx_t + d) +
                                r * (load_vec<Lane>(gn + d) - mean_g_t - load_vec<Lane>(n_t + d) * mean_gn_t));
      });
    }
  }
}

// ---- Embedding ----------------------------------------------------------------------------

// x (T, D) = tok_emb[tokens[t]]; tokens read with a stride. (The additive hook adds its
// rows next: model/hooks/additive.cpp.)
COPYTASK_INLINE void embedding_forward(const float* tok_emb, const int64_t* tokens, int64_t token_stride, float* x,
                                       int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    const float* row = tok_emb + tokens[t * token_stride] * D;
    for (int64_t d = 0; d < D; ++d) x[t * D + d] = row[d];
  }
}

// grad_tok_emb rows of the tokens += grad_x.
COPYTASK_INLINE void embedding_backward(const float* grad_x, const int64_t* tokens, int64_t token_stride,
                                        float* grad_tok_emb, int64_t T, int64_t D) {
  for (int64_t t = 0; t < T; ++t) {
    float* row = grad_tok_emb + tokens[t * token_stride] * D;
    for (int64_t d = 0; d < D; ++d) row[d] += grad_x[t * D + d];
  }
}

// ---- Attention ----------------------------------------------------------------------------
// Head by head, as small matrix products (the products above): the scores, the mix weights
// @ v, and backward d(weights) = g v^T, dv = weights^T g, dq = d(scores) k and dk =
// d(scores)^T q. Between them the softmax, which keeps each head's weights key-major:
// (T keys, T queries), w_t[j T + i] the weight query i gives key j. A query's softmax is a
// column of that matrix, so the queries lie across a vector's lanes, and its maximum, its sum
// over the keys (in the keys' order, the order a query's row had been summed in) and its
// normalisation are vector operations a key at a time; query-major, each row had been a
// chain of scalar operations. The scores come out key-major at no cost, k q^T with q
// transposed where q k^T had transposed k, and the products read the weights transposed
// where they need them query-major (a tile reads A either way, with the same sums), so every
// number is the one the query-major softmax made.
//
// The element-wise work between two products is one pass over vectors of queries, each
// reading what the product before it stored and storing what the product after it reads:
// a vector load that spans two recent stores (a pass over the whole matrix eight floats at
// a time after one along its rows) cannot take its floats from the store queue and waits
// for both stores to reach the cache, which had cost more than the scalar chains saved.

// The floats of the scratch every attention function below takes: a head's q, k or the
// upstream gradient transposed (Dh, T) and the slack the products read past it, then four
// (T, T) matrices.
COPYTASK_INLINE int64_t attention_scratch_floats(int64_t T, int64_t Dh) { return Dh * T + kSlack + 4 * T * T; }

// All key-major (T, T) but head_t.
struct AttentionScratch {
  float* head_t;        // (Dh, T): q or k of the head, or its upstream gradient, transposed
  float* scores;        // the scores q . k (forward); d(loss)/d(weights) before dropout (backward)
  float* kept;          // the weights times the dropout mask
  float* grad_logits;   // d(loss)/d(logits)
  float* grad_scores;   // d(loss)/d(scores) times the 1/sqrt(Dh) scale
  AttentionScratch(float* scratch, int64_t T, int64_t Dh)
      : head_t(scratch),
        scores(scratch + Dh * T + kSlack),
        kept(scores + T * T),
        grad_logits(kept + T * T),
        grad_scores(grad_logits + T * T) {}
};

// out (Dh, T) = the first Dh columns of the T rows at rows, rows + stride, ..., transposed.
COPYTASK_INLINE void rows_transposed(const float* rows, int64_t stride, float* out, int64_t T, int64_t Dh) {
  for (int64_t j = 0; j < T; ++j)
    for (int64_t d = 0; d < Dh; ++d) out[d * T + j] = rows[j * stride + d];
}

// m (T, T) transposed in place: a head's matrix between query-major and key-major.
COPYTASK_INLINE void square_transpose(float* m, int64_t T) {
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = i + 1; j < T; ++j) std::swap(m[i * T + j], m[j * T + i]);
}

// body(Lane{}, i0) for vectors of the queries i0 .. i0 + lanes - 1 that cover 0 .. T - 1:
// eight at a time and the last eight ending at T, overlapping the vector before (T = 10:
// queries 0 to 7, then 2 to 9); below eight, four likewise, then one by one. A query's
// numbers are the same in whichever vector it is computed, so a body that reads nothing it
// or another body writes may run a query twice: the same floats are stored again.
template <class Body>
COPYTASK_INLINE void over_queries(int64_t T, const Body& body) {
  auto vectors = [&](auto lane, int64_t width) COPYTASK_KERNEL_BODY {
    int64_t i0 = 0;
    for (; i0 + width <= T; i0 += width) body(lane, i0);
    if (i0 < T) body(lane, T - width);
  };
  if (T >= 8) vectors(Vec8{}, 8);
  else if (T >= 4) vectors(Vec4{}, 4);
  else
    for (int64_t i = 0; i < T; ++i) body(float{}, i);
}

// The floats `stride` apart from p, as a vector of queries (a lane type of over_queries).
template <class Lane>
COPYTASK_INLINE Lane lanes_strided(const float* p, int64_t stride) {
  if constexpr (std::is_same_v<Lane, float>) {
    return *p;
  } else {
    Lane v;
    for (int l = 0; l < static_cast<int>(sizeof(Lane) / sizeof(float)); ++l) v[l] = p[l * stride];
    return v;
  }
}

// Which keys the queries of a vector (from i0) see: every key, or (Causal) the keys j <= i.
// seen(j, a, b): a for the lanes that see key j, b for the others. Causal a template
// argument, so that a softmax over every key has no test in its loops.
template <class Lane, bool Causal>
struct SeenKeys {
  Lane queries;  // the lanes' queries, as floats (exact below 2^24)
  explicit SeenKeys(int64_t i0) {
    if constexpr (std::is_same_v<Lane, float>) {
      queries = static_cast<float>(i0);
    } else {
      for (int l = 0; l < static_cast<int>(sizeof(Lane) / sizeof(float)); ++l) queries[l] = static_cast<float>(i0 + l);
    }
  }
  COPYTASK_INLINE Lane operator()(int64_t j, Lane a, Lane b) const {
    if constexpr (Causal) return Lane{} + static_cast<float>(j) <= queries ? a : b;
    else return a;
  }
};
// body(SeenKeys<Lane, causal>(i0)) with causal known at compile time.
template <class Lane, class Body>
COPYTASK_INLINE void with_seen_keys(bool causal, int64_t i0, const Body& body) {
  if (causal) body(SeenKeys<Lane, true>(i0));
  else body(SeenKeys<Lane, false>(i0));
}

// e^x of a lane type, lane by lane the same as exp_lanes.
template <class Lane>
COPYTASK_INLINE Lane exp_lane(Lane x) {
  if constexpr (std::is_same_v<Lane, float>) return exp_lanes(Vec4{x, 0.0f, 0.0f, 0.0f})[0];
  else return exp_lanes(x);
}

// x, rounded to float where the compiler cannot see: a product passed through it is never
// contracted with the sum or difference that takes it into one fused multiply-add. (Where
// the variant has FMA: the generic target has none to contract into.)
template <class Lanes, class Lane>
COPYTASK_INLINE Lane rounded(Lane x) {
#if COPYTASK_CPU_VARIANTS
  if constexpr (Lanes::kVariant != CpuVariant::generic) asm("" : "+x"(x));
#endif
  return x;
}

// One head's softmax, key-major: w_t (T, T) = the softmax over each query's seen keys of its
// logits logit(Lane{}, j, i0) (0 for the unseen keys), and kept_t = w_t times the dropout
// mask dropout_t when that is given. For each vector of queries: their logits (stored in
// w_t) and their maximum over the seen keys; e^(logit - maximum) and their sum in the keys'
// order; each divided by the sum. Lane by lane the operations, in the order, that a query's
// row had taken (the logits and the e^x rounded as they had been when stored, not
// contracted into the subtraction or the sum after them). logit reads nothing this function
// writes.
template <class Lanes, class Logit>
COPYTASK_INLINE void softmax_key_major(const Logit& logit, bool causal, const float* dropout_t, float* w_t,
                                       float* kept_t, int64_t T) {
  const float infinity = std::numeric_limits<float>::infinity();
  over_queries(T, [&](auto lane, int64_t i0) COPYTASK_KERNEL_BODY {
    using Lane = decltype(lane);
    with_seen_keys<Lane>(causal, i0, [&](const auto& seen) COPYTASK_KERNEL_BODY {
      Lane row_max = Lane{} - infinity;
      for (int64_t j = 0; j < T; ++j) {
        const Lane x = rounded<Lanes>(logit(lane, j, i0));
        store_vec(w_t + j * T + i0, x);
        row_max = seen(j, row_max < x ? x : row_max, row_max);  // std::max
      }
      Lane total = Lane{};
      for (int64_t j = 0; j < T; ++j) {
        const Lane e = rounded<Lanes>(seen(j, exp_lane(load_vec<Lane>(w_t + j * T + i0) - row_max), Lane{}));
        store_vec(w_t + j * T + i0, e);
        total = total + e;  // + 0 for the unseen keys: the same sum
      }
      const Lane inverse_total = 1.0f / total;
      for (int64_t j = 0; j < T; ++j) {
        const Lane w = load_vec<Lane>(w_t + j * T + i0) * inverse_total;  // 0 stays 0
        store_vec(w_t + j * T + i0, w);
        if (dropout_t) store_vec(kept_t + j * T + i0, w * load_vec<Lane>(dropout_t + j * T + i0));
      }
    });
  });
}

// Its backward, key-major: grad_logits_t = w (d(weights) - sum over the seen keys k of w_k
// d(weights)_k, in the keys' order) for the seen keys, 0 for the others, where d(weights) =
// grad_kept_t times the dropout mask (when given, rounded: a product of its own, as it had
// been stored); grad_scores_t (when given) = grad_logits_t times scale. grad_kept_t is not
// written.
template <class Lanes>
COPYTASK_INLINE void softmax_backward_key_major(const float* w_t, bool causal, const float* dropout_t,
                                                const float* grad_kept_t, float* grad_logits_t, float* grad_scores_t,
                                                float scale, int64_t T) {
  over_queries(T, [&](auto lane, int64_t i0) COPYTASK_KERNEL_BODY {
    using Lane = decltype(lane);
    auto grad_weights = [&](int64_t e) COPYTASK_KERNEL_BODY {
      const Lane g = load_vec<Lane>(grad_kept_t + e);
      return dropout_t ? rounded<Lanes>(g * load_vec<Lane>(dropout_t + e)) : g;
    };
    with_seen_keys<Lane>(causal, i0, [&](const auto& seen) COPYTASK_KERNEL_BODY {
      Lane weighted = Lane{};
      for (int64_t j = 0; j < T; ++j) {
        const int64_t e = j * T + i0;
        weighted = seen(j, weighted + load_vec<Lane>(w_t + e) * grad_weights(e), weighted);
      }
      for (int64_t j = 0; j < T; ++j) {
        const int64_t e = j * T + i0;
        const Lane g = seen(j, load_vec<Lane>(w_t + e) * (grad_weights(e) - weighted), Lane{});
        store_vec(grad_logits_t + e, g);
        if (grad_scores_t) store_vec(grad_scores_t + e, g * scale);
      }
    });
  });
}

// Head h's softmax and mix from its scores (or logits) key-major, logit(Lane{}, j, i0) as
// softmax_key_major takes them: w_t (T, T) = the weights, key-major; mixed's head h columns
// = the weights (times the dropout mask, key-major, when given) @ v.
template <class Lanes, class Logit>
COPYTASK_INLINE void softmax_mix_head(const float* qkv, const Logit& logit, bool causal, const float* dropout,
                                      float* w_t, float* mixed, const AttentionScratch& scratch, int64_t h, int64_t T,
                                      int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float* dropout_t = dropout ? dropout + h * T * T : nullptr;
  softmax_key_major<Lanes>(logit, causal, dropout_t, w_t, scratch.kept, T);
  const float* kept = dropout ? scratch.kept : w_t;
  // The kept weights read query-major: A(i, j) = kept[j T + i].
  matmul<Lanes>(Product{kept, 1, T, qkv + 2 * D + h * Dh, 3 * D, nullptr, mixed + h * Dh, D, T, T, Dh, false});
}

// weights[h, j, i] (key-major) = softmax over the keys j of (q_i . k_j / sqrt(Dh) + bias[h,
// i, j]), j <= i only when causal (the others 0); mixed (T, D) = the weights (times the
// dropout mask, when given) @ v, head by head. qkv: (T, 3D), followed by kSlack readable
// floats; bias (H, T, T) query-major; dropout, weights: (H, T, T) key-major; scratch:
// attention_scratch_floats.
template <class Lanes>
COPYTASK_INLINE void attention_forward(const float* qkv, const float* bias, bool causal, const float* dropout,
                                       float* weights, float* mixed, float* scratch, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  const AttentionScratch work(scratch, T, Dh);
  for (int64_t h = 0; h < H; ++h) {
    rows_transposed(qkv + h * Dh, 3 * D, work.head_t, T, Dh);  // q^T (Dh, T)
    // scores_t (T, T) = k q^T.
    matmul<Lanes>(Product{qkv + D + h * Dh, 3 * D, 1, work.head_t, T, nullptr, work.scores, T, T, Dh, T, false});
    // Two functions, not one with a test inside: the scaled score that both branches of a
    // test share is rounded, where the bias's branch is one fused multiply-add.
    auto scaled = [&](auto lane, int64_t j, int64_t i0) COPYTASK_KERNEL_BODY {
      return load_vec<decltype(lane)>(work.scores + j * T + i0) * scale;
    };
    auto biased = [&](auto lane, int64_t j, int64_t i0) COPYTASK_KERNEL_BODY {
      using Lane = decltype(lane);
      return load_vec<Lane>(work.scores + j * T + i0) * scale + lanes_strided<Lane>(bias + (h * T + i0) * T + j, T);
    };
    if (bias) softmax_mix_head<Lanes>(qkv, biased, causal, dropout, weights + h * T * T, mixed, work, h, T, H, Dh);
    else softmax_mix_head<Lanes>(qkv, scaled, causal, dropout, weights + h * T * T, mixed, work, h, T, H, Dh);
  }
}

// The backward of head h's mix: scratch.scores (T, T, key-major) = d(loss)/d(kept weights)
// (v g^T), and the head's v columns of grad_qkv = kept^T g (set).
template <class Lanes>
COPYTASK_INLINE void mix_backward_head(const float* qkv, const float* weights, const float* dropout,
                                       const float* grad_mixed, float* grad_qkv, const AttentionScratch& scratch,
                                       int64_t h, int64_t T, int64_t H, int64_t Dh) {
  const int64_t D = H * Dh;
  const float* w_t = weights + h * T * T;
  rows_transposed(grad_mixed + h * Dh, D, scratch.head_t, T, Dh);  // g^T (Dh, T)
  matmul<Lanes>(Product{qkv + 2 * D + h * Dh, 3 * D, 1, scratch.head_t, T, nullptr, scratch.scores, T, T, Dh, T, false});
  const float* kept = w_t;
  if (dropout) {
    // The weights and the mask were stored long before: a pass over the whole matrix.
    const float* drop_h = dropout + h * T * T;
    for (int64_t e = 0; e < T * T; ++e) scratch.kept[e] = w_t[e] * drop_h[e];
    kept = scratch.kept;
  }
  matmul<Lanes>(Product{kept, T, 1, grad_mixed + h * Dh, D, nullptr, grad_qkv + 2 * D + h * Dh, 3 * D, T, T, Dh, false});
}

// The head's q and k columns of grad_qkv = (or +=) the gradient through q k^T of
// grad_scores (T, T), key-major or query-major: dq = d(scores) k, dk = d(scores)^T q.
template <class Lanes>
COPYTASK_INLINE void scores_backward_head(const float* qkv, const float* grad_scores, bool key_major, float* grad_qkv,
                                          int64_t h, int64_t T, int64_t H, int64_t Dh, bool accumulate) {
  const int64_t D = H * Dh;
  // d(scores)(i, j) = grad_scores[i by_query + j by_key].
  const int64_t by_query = key_major ? 1 : T, by_key = key_major ? T : 1;
  matmul<Lanes>(Product{grad_scores, by_query, by_key, qkv + D + h * Dh, 3 * D, nullptr, grad_qkv + h * Dh, 3 * D, T, T,
                        Dh, accumulate});
  matmul<Lanes>(Product{grad_scores, by_key, by_query, qkv + h * Dh, 3 * D, nullptr, grad_qkv + D + h * Dh, 3 * D, T, T,
                        Dh, accumulate});
}

// From grad_mixed (T, D, followed by kSlack readable floats): grad_qkv (T, 3D) = the
// gradient at q | k | v (set, not added); grad_bias (H, T, T, query-major), when given, +=
// the gradient at the scores before the scaling, which is the score bias's. weights and
// dropout key-major, as attention_forward left them; scratch: attention_scratch_floats.
template <class Lanes>
COPYTASK_INLINE void attention_backward(const float* qkv, const float* weights, bool causal, const float* dropout,
                                        const float* grad_mixed, float* grad_qkv, float* grad_bias, float* scratch,
                                        int64_t T, int64_t H, int64_t Dh) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  const AttentionScratch work(scratch, T, Dh);
  for (int64_t h = 0; h < H; ++h) {
    mix_backward_head<Lanes>(qkv, weights, dropout, grad_mixed, grad_qkv, work, h, T, H, Dh);
    softmax_backward_key_major<Lanes>(weights + h * T * T, causal, dropout ? dropout + h * T * T : nullptr, work.scores,
                               work.grad_logits, work.grad_scores, scale, T);
    if (grad_bias)
      for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < T; ++j) grad_bias[(h * T + i) * T + j] += work.grad_logits[j * T + i];
    scores_backward_head<Lanes>(qkv, work.grad_scores, true, grad_qkv, h, T, H, Dh, false);
  }
}

// ---- Attention in stages ----------------------------------------------------------------------
// A member with hooks at the scores or softmax site (a content term, the length scale) runs
// its attention in stages, so that the hooks can read and change the logits between them:
// scores, then (the hooks), then softmax and the mix; backward the same way back. The same
// function as attention_forward / attention_backward; the hooks see the scores, the logits
// and their gradients query-major (H, T, T), the weights stay key-major.

// scores (H, T, T, query-major) = q_i . k_j / sqrt(Dh) for the seen keys (j <= i when
// causal), 0 beyond.
template <class Lanes>
COPYTASK_INLINE void attention_scores(const float* qkv, bool causal, float* scores, float* scratch, int64_t T, int64_t H,
                                      int64_t Dh) {
  const int64_t D = H * Dh;
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  const AttentionScratch work(scratch, T, Dh);
  for (int64_t h = 0; h < H; ++h) {
    float* s_h = scores + h * T * T;
    rows_transposed(qkv + D + h * Dh, 3 * D, work.head_t, T, Dh);  // k^T (Dh, T)
    matmul<Lanes>(Product{qkv + h * Dh, 3 * D, 1, work.head_t, T, nullptr, s_h, T, T, Dh, T, false});
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      for (int64_t j = 0; j < seen; ++j) s_h[i * T + j] *= scale;
      for (int64_t j = seen; j < T; ++j) s_h[i * T + j] = 0.0f;
    }
  }
}

// weights (H, T, T): the logits in, query-major; their softmax over the seen keys out,
// key-major (0 beyond); mixed (T, D) = the weights (times the dropout mask, key-major, when
// given) @ v, head by head.
template <class Lanes>
COPYTASK_INLINE void attention_softmax_mix(const float* qkv, bool causal, const float* dropout, float* weights,
                                           float* mixed, float* scratch, int64_t T, int64_t H, int64_t Dh) {
  const AttentionScratch work(scratch, T, Dh);
  for (int64_t h = 0; h < H; ++h) {
    float* w_h = weights + h * T * T;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) work.scores[j * T + i] = w_h[i * T + j];  // the logits, key-major
    auto logit = [&](auto lane, int64_t j, int64_t i0) COPYTASK_KERNEL_BODY {
      return load_vec<decltype(lane)>(work.scores + j * T + i0);
    };
    softmax_mix_head<Lanes>(qkv, logit, causal, dropout, w_h, mixed, work, h, T, H, Dh);
  }
}

// From grad_mixed (T, D): grad_qkv (T, 3D) set, its v part the gradient at v and its q and k
// parts zero; grad_logits (H, T, T, query-major) = the gradient at the softmax's input (0
// for unseen keys).
template <class Lanes>
COPYTASK_INLINE void attention_softmax_backward(const float* qkv, const float* weights, bool causal,
                                                const float* dropout, const float* grad_mixed, float* grad_qkv,
                                                float* grad_logits, float* scratch, int64_t T, int64_t H,
                                                int64_t Dh) {
  const int64_t D = H * Dh;
  const AttentionScratch work(scratch, T, Dh);
  for (int64_t j = 0; j < T; ++j)
    for (int64_t e = 0; e < 2 * D; ++e) grad_qkv[j * 3 * D + e] = 0.0f;
  for (int64_t h = 0; h < H; ++h) {
    mix_backward_head<Lanes>(qkv, weights, dropout, grad_mixed, grad_qkv, work, h, T, H, Dh);
    softmax_backward_key_major<Lanes>(weights + h * T * T, causal, dropout ? dropout + h * T * T : nullptr, work.scores,
                               work.grad_logits, nullptr, 1.0f, T);
    float* grad_logits_h = grad_logits + h * T * T;
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j < T; ++j) grad_logits_h[i * T + j] = work.grad_logits[j * T + i];
  }
}

// grad_qkv's q and k parts += the gradient through q_i . k_j / sqrt(Dh) of grad_scores
// (H, T, T, query-major; its entries for unseen keys are not read).
template <class Lanes>
COPYTASK_INLINE void attention_scores_backward(const float* qkv, bool causal, const float* grad_scores,
                                               float* grad_qkv, float* scratch, int64_t T, int64_t H, int64_t Dh) {
  const float scale = 1.0f / std::sqrt(static_cast<float>(Dh));
  const AttentionScratch work(scratch, T, Dh);
  for (int64_t h = 0; h < H; ++h) {
    for (int64_t i = 0; i < T; ++i) {
      const int64_t seen = causal ? i + 1 : T;
      for (int64_t j = 0; j < seen; ++j) work.grad_scores[i * T + j] = grad_scores[(h * T + i) * T + j] * scale;
      for (int64_t j = seen; j < T; ++j) work.grad_scores[i * T + j] = 0.0f;
    }
    scores_backward_head<Lanes>(qkv, work.grad_scores, false, grad_qkv, h, T, H, Dh, true);
  }
}

// ---- Residuals, ReLU, dropout ----------------------------------------------------------------
// The mask test is outside the loops: each loop is then one the compiler vectorises
// (measured: with the test inside, these four loops cost 7% of the step's instructions).

// x (n) += y * mask (mask may be null).
COPYTASK_INLINE void residual_forward(float* x, const float* y, const float* mask, int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) x[t] += y[t] * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) x[t] += y[t];
}

// grad_y (n) = grad_x * mask: the gradient at a residual branch's output.
COPYTASK_INLINE void residual_backward(const float* grad_x, const float* mask, float* grad_y, int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) grad_y[t] = grad_x[t] * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) grad_y[t] = grad_x[t];
}

// out (n) = relu(pre) * mask.
COPYTASK_INLINE void relu_forward(const float* pre, const float* mask, float* out, int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) out[t] = (pre[t] > 0.0f ? pre[t] : 0.0f) * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) out[t] = pre[t] > 0.0f ? pre[t] : 0.0f;
}

// grad_pre (n) = grad_out through the mask and the ReLU.
COPYTASK_INLINE void relu_backward(const float* pre, const float* mask, const float* grad_out, float* grad_pre,
                                   int64_t n) {
  if (mask)
    for (int64_t t = 0; t < n; ++t) grad_pre[t] = (pre[t] > 0.0f ? grad_out[t] : 0.0f) * mask[t];
  else
    for (int64_t t = 0; t < n; ++t) grad_pre[t] = pre[t] > 0.0f ? grad_out[t] : 0.0f;
}

// Phi(x), the standard normal's distribution function, of eight lanes, and phi(x) sqrt(2 pi)
// = e^(-x^2 / 2) to `gauss`: Phi(x) = (1 + erf(x / sqrt 2)) / 2, erf by Abramowitz and Stegun
// 7.1.26 (absolute error below 1.5e-7; PyTorch's vectorised erf takes the same form), its
// e^(-z^2) the gauss itself, so one exp_lanes gives both. The library's erff, one call per
// element, had made a gelu step 1.7 times a relu one.
template <class Vec>
COPYTASK_INLINE Vec normal_cdf_lanes(Vec x, Vec* gauss) {
  const Vec z = x * 0.70710678118654752f;  // x / sqrt 2
  const Vec a = z < 0.0f ? -z : z;
  const Vec t = 1.0f / (1.0f + 0.3275911f * a);
  Vec p = 1.061405429f * t - 1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t - 0.284496736f;
  p = p * t + 0.254829592f;
  p = p * t;
  const Vec g = exp_lanes(-(z * z));
  const Vec erf_abs = 1.0f - p * g;
  *gauss = g;
  return 0.5f * (1.0f + (z < 0.0f ? -erf_abs : erf_abs));
}

// gelu(x) = x Phi(x) (the exact form, Phi through erf), and its slope Phi(x) + x phi(x).
COPYTASK_INLINE Vec8 gelu_lanes(Vec8 x) {
  Vec8 gauss;
  return x * normal_cdf_lanes(x, &gauss);
}
COPYTASK_INLINE Vec8 gelu_slope_lanes(Vec8 x) {
  constexpr float kInvSqrt2Pi = 0.39894228040143268f;
  Vec8 gauss;
  const Vec8 cdf = normal_cdf_lanes(x, &gauss);
  return cdf + x * (kInvSqrt2Pi * gauss);
}

// out (n) = gelu(pre) * mask, eight at a time.
COPYTASK_INLINE void gelu_forward(const float* pre, const float* mask, float* out, int64_t n) {
  int64_t e = 0;
  for (; e + 8 <= n; e += 8) {
    Vec8 y = gelu_lanes(load_vec<Vec8>(pre + e));
    if (mask) y *= load_vec<Vec8>(mask + e);
    store_vec(out + e, y);
  }
  if (e < n) {
    Vec8 y = gelu_lanes(load_partial<Vec8>(pre + e, n - e));
    if (mask) y *= load_partial<Vec8>(mask + e, n - e);
    store_partial(out + e, y, n - e);
  }
}

// grad_pre (n) = grad_out through the mask and the GELU, eight at a time.
COPYTASK_INLINE void gelu_backward(const float* pre, const float* mask, const float* grad_out, float* grad_pre,
                                   int64_t n) {
  int64_t e = 0;
  for (; e + 8 <= n; e += 8) {
    Vec8 g = load_vec<Vec8>(grad_out + e) * gelu_slope_lanes(load_vec<Vec8>(pre + e));
    if (mask) g *= load_vec<Vec8>(mask + e);
    store_vec(grad_pre + e, g);
  }
  if (e < n) {
    Vec8 g = load_partial<Vec8>(grad_out + e, n - e) * gelu_slope_lanes(load_partial<Vec8>(pre + e, n - e));
    if (mask) g *= load_partial<Vec8>(mask + e, n - e);
    store_partial(grad_pre + e, g, n - e);
  }
}

// The feed-forward's activation f (model.activation), forward and backward: one case per
// value of config/layer_form.h that lists the fused CPU step among its steps.
COPYTASK_INLINE void activation_forward(Activation f, const float* pre, const float* mask, float* out, int64_t n) {
  switch (f) {
    case Activation::relu: relu_forward(pre, mask, out, n); return;
    case Activation::gelu: gelu_forward(pre, mask, out, n); return;
  }
}

COPYTASK_INLINE void activation_backward(Activation f, const float* pre, const float* mask, const float* grad_out,
                                         float* grad_pre, int64_t n) {
  switch (f) {
    case Activation::relu: relu_backward(pre, mask, grad_out, grad_pre, n); return;
    case Activation::gelu: gelu_backward(pre, mask, grad_out, grad_pre, n); return;
  }
}

// ---- Cross-entropy -----------------------------------------------------------------------------

// Lane by lane the larger of x and the maximum so far, by a compare and a select (no branch);
// a NaN in x is passed over. row_maximum and the cross-entropy in lanes both take it, so
// their maxima are the same numbers.
template <class V>
COPYTASK_INLINE V larger_of(V x, V most) {
  return x > most ? x : most;
}

// The largest of p[0 .. n), eight lanes at a time and without a branch on the numbers:
// std::max one by one compiled to a compare and a jump, mispredicted wherever a row's
// largest logit sits at a new place (2.6% of the reference step). The maximum of numbers
// is the same whatever order they are compared in (of a +0 and a -0 it may give either,
// which the cross-entropy below subtracts and exponentiates to the same values); a NaN is
// passed over, as std::max(row_max, NaN) passes it over.
COPYTASK_INLINE float row_maximum(const float* p, int64_t n) {
  Vec8 most = Vec8{} - std::numeric_limits<float>::infinity();
  int64_t v = 0;
  for (; v + 8 <= n; v += 8) most = larger_of(load_vec<Vec8>(p + v), most);
  for (; v < n; ++v) most = larger_of(Vec8{} + p[v], most);  // the same number in every lane
  most = larger_of(__builtin_shufflevector(most, most, 4, 5, 6, 7, 0, 1, 2, 3), most);
  most = larger_of(__builtin_shufflevector(most, most, 2, 3, 0, 1, 6, 7, 4, 5), most);
  most = larger_of(__builtin_shufflevector(most, most, 1, 0, 3, 2, 5, 4, 7, 6), most);
  return most[0];
}

// logits (T, V) -> returns the summed cross-entropy of the targets over the T positions,
// and turns the logits into d(loss)/d(logits) for a loss that is the sum times `weight`
// (1 / (B T): the member's mean over its batch). A target out of the loss (< 0) adds
// nothing to either. scratch: T floats.
COPYTASK_INLINE double crossentropy_forward_backward(float* logits, const int64_t* targets, int64_t target_stride,
                                                     float weight, int64_t T, int64_t V, float* scratch) {
  // The logits less their row's maximum, the target's kept in scratch (T floats), then e^ of all.
  for (int64_t t = 0; t < T; ++t) {
    float* p_t = logits + t * V;
    const float row_max = row_maximum(p_t, V);
    for (int64_t v = 0; v < V; ++v) p_t[v] -= row_max;
    const int64_t target = targets[t * target_stride];
    scratch[t] = target < 0 ? 0.0f : p_t[target];
  }
  exp_in_place(logits, T * V);
  double loss = 0;
  for (int64_t t = 0; t < T; ++t) {
    float* p_t = logits + t * V;
    if (targets[t * target_stride] < 0) {  // out of the loss: no loss, no gradient
      std::fill(p_t, p_t + V, 0.0f);
      continue;
    }
    float total = 0;
    for (int64_t v = 0; v < V; ++v) total += p_t[v];
    loss += static_cast<double>(std::log(total) - scratch[t]);  // -log softmax of the target
    const float to_gradient = weight / total;                     // softmax = e^(logit - max) / total
    for (int64_t v = 0; v < V; ++v) p_t[v] *= to_gradient;
    p_t[targets[t * target_stride]] -= weight;
  }
  return loss;
}

}  // namespace copytask::cpu
