#pragma once
// The dropout stream's arithmetic (model/dropout_stream.h), in one place for the CPU's
// DropoutStream::fill and the GPU's kernel (kernels/dropout_stream_kernel.cu), so both draw
// the same masks by construction. No LibTorch here: nvcc compiles it too.
#include <cstdint>

#include "util/splitmix.h"

namespace copytask {

// The 64 bits of word w of a step's stream: elements 4w .. 4w+3, element 4w + l deciding by
// its 16 bits (bits >> 16 l) & 0xffff.
COPYTASK_HOST_DEVICE inline uint64_t dropout_word_bits(uint64_t step_key, uint64_t word) {
  return splitmix64_mix(step_key + (word + 1) * kSplitMixGamma);
}

// The mask of the element whose 16 bits are the low ones of `bits`: 0 (dropped) when they
// fall below threshold, else kept_value.
COPYTASK_HOST_DEVICE inline float dropout_mask_from_bits(uint64_t bits, uint32_t threshold, float kept_value) {
  return (bits & 0xffff) < threshold ? 0.0f : kept_value;
}

// Element e's mask.
COPYTASK_HOST_DEVICE inline float dropout_mask_of(uint64_t step_key, int64_t e, uint32_t threshold, float kept_value) {
  const uint64_t bits = dropout_word_bits(step_key, static_cast<uint64_t>(e) >> 2) >> (16 * (e & 3));
  return dropout_mask_from_bits(bits, threshold, kept_value);
}

#if !defined(__CUDACC__)
// Words first_word .. first_word + 7 at once: their 32 masks, in order, to out. The same
// arithmetic as dropout_word_bits and dropout_mask_from_bits lane by lane (GCC's vector
// extensions), so the same masks bit for bit; the words' 16-bit pieces are, in memory order,
// the elements' (element 4w + l takes bits 16 l .. 16 l + 15 of word w, little-endian).
// MaskLanes: the masks compared and stored at once, one register's int32 lanes: 16 where
// the caller is compiled for AVX-512, 8 for AVX2. With 16 lanes on AVX2 GCC took the
// comparisons one lane at a time in scalar code (272 instructions for the 32 masks, what the
// words one by one cost); its 64-bit multiplies it makes of 32-bit ones (vpmuludq) either way.
inline constexpr int kDropoutVectorWords = 8;
// A register's 16-bit pieces and their int32 lanes, for 8 and 16 masks a register.
template <int MaskLanes>
struct DropoutMaskVectors;
template <>
struct DropoutMaskVectors<8> {
  typedef uint16_t Pieces __attribute__((vector_size(16)));
  typedef int32_t Lanes __attribute__((vector_size(32)));
};
template <>
struct DropoutMaskVectors<16> {
  typedef uint16_t Pieces __attribute__((vector_size(32)));
  typedef int32_t Lanes __attribute__((vector_size(64)));
};
template <int MaskLanes>
__attribute__((always_inline)) inline void dropout_words_masks(uint64_t step_key, uint64_t first_word,
                                                               uint32_t threshold, float kept_value, float* out) {
  typedef uint64_t Words __attribute__((vector_size(8 * kDropoutVectorWords)));
  typedef uint16_t Pieces __attribute__((vector_size(2 * 4 * kDropoutVectorWords)));  // all 32
  const Words lane = {0, 1, 2, 3, 4, 5, 6, 7};
  Words x = step_key + (first_word + lane + 1) * kSplitMixGamma;  // splitmix64_mix, lane by lane
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x = x ^ (x >> 31);
  Pieces pieces;
  __builtin_memcpy(&pieces, &x, sizeof pieces);
  int32_t kept_bits;
  __builtin_memcpy(&kept_bits, &kept_value, sizeof kept_bits);
  for (int part = 0; part < 4 * kDropoutVectorWords / MaskLanes; ++part) {
    typename DropoutMaskVectors<MaskLanes>::Pieces piece;
    using Lanes = typename DropoutMaskVectors<MaskLanes>::Lanes;
    __builtin_memcpy(&piece, reinterpret_cast<const char*>(&pieces) + part * sizeof piece, sizeof piece);
    const Lanes kept = __builtin_convertvector(piece, Lanes) >= static_cast<int32_t>(threshold);  // -1 where kept
    const Lanes masks = kept & kept_bits;  // kept_value's bits, or 0.0f's
    __builtin_memcpy(out + part * MaskLanes, &masks, sizeof masks);
  }
}

// Eight examples' words at once, lane l word words[l] of the step's stream: the masks of the
// four elements each word decides, piece p's (element 4 words[l] + p) to out[p][l] as eight
// floats, 0 or kept_value. The same arithmetic as dropout_word_bits and
// dropout_mask_from_bits, lane by lane; where dropout_words_masks takes eight words of one
// example, this takes one word of each of eight, for a group of examples across the lanes.
__attribute__((always_inline)) inline void dropout_lanes_words_masks(uint64_t step_key, const uint64_t* words,
                                                                     uint32_t threshold, float kept_value,
                                                                     float* const (&out)[4]) {
  typedef uint64_t Words __attribute__((vector_size(64)));
  typedef int32_t Lanes __attribute__((vector_size(32)));
  Words x;
  __builtin_memcpy(&x, words, sizeof x);
  x = step_key + (x + 1) * kSplitMixGamma;  // splitmix64_mix, lane by lane
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  x = x ^ (x >> 31);
  int32_t kept_bits;
  __builtin_memcpy(&kept_bits, &kept_value, sizeof kept_bits);
  for (int piece = 0; piece < 4; ++piece) {
    const Lanes bits = __builtin_convertvector((x >> (16 * piece)) & 0xffff, Lanes);
    const Lanes masks = (bits >= static_cast<int32_t>(threshold)) & kept_bits;  // kept_value's bits, or 0.0f's
    __builtin_memcpy(out[piece], &masks, sizeof masks);
  }
}
#endif

}  // namespace copytask
