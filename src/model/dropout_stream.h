#pragma once
// Dropout masks as a counter-based stream, the same on every device: the mask of element
// e of a member's step is decided by 16 bits of one SplitMix64 output, a pure function of
// (the member's step key, e / 4). So any range of a step's masks can be drawn on its own,
// in parallel, inside a kernel (model/fused_cpu.h) or as tensor operations on a GPU
// (dropout_stream_masks), with the same values as the whole buffer; a member's masks
// depend on its own seed and step alone, and a GPU graph has no generator state to
// capture.
//
// An element is dropped when its 16 bits fall below threshold = round(p * 2^16); the
// effective rate is threshold / 2^16 (within 2^-17 of p), and kept elements are scaled by
// its inverse, so the expectation is exact.
#include <algorithm>
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "kernels/dropout_bits.h"
#include "util/splitmix.h"

namespace copytask {

// One step's dropout stream of every member.
struct DropoutStream {
  std::vector<uint64_t> step_keys;  // per member: from its dropout seed and the step number
  uint32_t threshold = 0;           // dropped when the 16 bits < threshold
  float kept_value = 1.0f;          // 2^16 / (2^16 - threshold)

  DropoutStream() = default;
  DropoutStream(const std::vector<uint64_t>& member_keys, uint64_t step, double rate);

  // Masks of elements first .. first+count-1 of member m's step: 0 or kept_value. Whole
  // words are drawn once and give their four masks without a loop (the fused CPU step draws
  // every example's masks here: element by element, this was 15% of its time). With
  // MaskLanes (8 for a caller compiled for AVX2, 16 for AVX-512), eight words at a time in
  // vectors (dropout_words_masks), their masks MaskLanes at a time; 0: word by word. Always
  // inlined, so that it has its caller's instructions.
  template <int MaskLanes = 0>
  __attribute__((always_inline)) inline void fill(int64_t member, int64_t first, int64_t count, float* out) const {
    const uint64_t key = step_keys[static_cast<size_t>(member)];
    int64_t e = first;
    const int64_t end = first + count;
    // Elements e .. stop-1, all in e's word.
    auto within_word = [&](int64_t stop) {
      uint64_t bits = dropout_word_bits(key, static_cast<uint64_t>(e) >> 2) >> (16 * (e & 3));
      for (; e < stop; ++e, bits >>= 16) *out++ = dropout_mask_from_bits(bits, threshold, kept_value);
    };
    if ((e & 3) != 0) within_word(std::min(end, (e | 3) + 1));  // the rest of the first word
    if constexpr (MaskLanes > 0)
      for (; e + 4 * kDropoutVectorWords <= end; e += 4 * kDropoutVectorWords, out += 4 * kDropoutVectorWords)
        dropout_words_masks<MaskLanes>(key, static_cast<uint64_t>(e) >> 2, threshold, kept_value, out);
    for (; e + 4 <= end; e += 4, out += 4) {
      const uint64_t bits = dropout_word_bits(key, static_cast<uint64_t>(e) >> 2);
      out[0] = dropout_mask_from_bits(bits, threshold, kept_value);
      out[1] = dropout_mask_from_bits(bits >> 16, threshold, kept_value);
      out[2] = dropout_mask_from_bits(bits >> 32, threshold, kept_value);
      out[3] = dropout_mask_from_bits(bits >> 48, threshold, kept_value);
    }
    if (e < end) within_word(end);  // the first elements of the last word
  }

  // The masks of 16 examples side by side across the lanes (model/cpu_attention_lanes.h):
  // element i of example g (its first element 4 first_word[g] of member m's step, each
  // example whole words) to out[16 place() + g], for i < 4 words, place() called once an
  // element in the elements' order (where the lanes keep the element). The same masks as
  // fill() of each example, drawn eight examples' words at a time
  // (dropout_lanes_words_masks), with no transposition after.
  template <class Place>
  __attribute__((always_inline)) inline void fill_lanes(int64_t member, const uint64_t (&first_word)[16], int64_t words,
                                                        Place& place, float* out) const {
    const uint64_t key = step_keys[static_cast<size_t>(member)];
    alignas(64) uint64_t word[16];
    for (int g = 0; g < 16; ++g) word[g] = first_word[g];
    for (int64_t w = 0; w < words; ++w) {
      float* const at[4] = {out + 16 * place(), out + 16 * place(), out + 16 * place(), out + 16 * place()};
      dropout_lanes_words_masks(key, word, threshold, kept_value, at);
      float* const at_high[4] = {at[0] + 8, at[1] + 8, at[2] + 8, at[3] + 8};
      dropout_lanes_words_masks(key, word + 8, threshold, kept_value, at_high);
      for (int g = 0; g < 16; ++g) ++word[g];
    }
  }
};

// The same masks as fill(), computed with integer tensor operations on `device`:
// elements first .. first+count-1 of every member's step, (M, count) float32 (0 or
// kept_value). Tested equal to fill() element for element.
torch::Tensor dropout_stream_masks(const DropoutStream& stream, int64_t first, int64_t count, const torch::Device& device);

// The same with the step keys as a tensor (M) int64 on the device (the threshold and the
// kept value as DropoutStream's): what a step that keeps its step count on the device uses.
torch::Tensor dropout_stream_masks(const torch::Tensor& step_keys, uint32_t threshold, float kept_value, int64_t first,
                                   int64_t count);

// DropoutStream's step keys computed on the device: member_keys (M) int64 (the members'
// keys), step a 0-dim int64 tensor on the same device -> (M) int64, equal to
// DropoutStream(member_keys, step, rate).step_keys read as int64. No host value is read, so
// a CUDA graph that advances `step` on the device draws every replay's own masks.
torch::Tensor dropout_step_keys(const torch::Tensor& member_keys, const torch::Tensor& step);

}  // namespace copytask
