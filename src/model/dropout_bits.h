#pragma once
// The dropout stream's arithmetic (model/dropout_stream.h), in one place for the CPU's
// DropoutStream::fill and the GPU's kernel (model/dropout_stream_kernel.cu), so both draw
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

}  // namespace copytask
