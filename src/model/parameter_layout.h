#pragma once
// The encoder's parameter layout, written once: the parameters outside the blocks, then each
// block's, by their names in the encoder (named_parameters, checkpoints' keys, the parity
// fixtures' names). EncoderImpl::stacked_parameters() lists the tensors in this order; the
// fused CPU step indexes them by the positions below, found by name at compile time, so a
// renamed or reordered parameter changes the step's indices with it or fails to compile.
#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace copytask {

inline constexpr std::array<std::string_view, 5> kGlobalParameterNames = {"tok_emb", "ln_f.weight", "ln_f.bias",
                                                                          "head.weight", "head.bias"};
// Block l's parameter "blocks.<l>.<name>".
inline constexpr std::array<std::string_view, 11> kBlockParameterNames = {
    "ln1.weight", "ln1.bias", "attn.qkv.weight", "attn.proj.weight", "attn.proj.bias", "ln2.weight",
    "ln2.bias",   "ff.fc1.weight", "ff.fc1.bias", "ff.fc2.weight", "ff.fc2.bias"};

// The position of a name in a list of the layout; a name not in it stops compilation where
// it is used in a constant expression (the throw is not a constant expression).
template <size_t N>
constexpr int parameter_position(const std::array<std::string_view, N>& names, std::string_view name) {
  for (size_t i = 0; i < N; ++i)
    if (names[i] == name) return static_cast<int>(i);
  throw std::logic_error("no parameter of that name in the layout (model/parameter_layout.h)");
}

// The whole layout for L blocks: index i's name (globals first, then block by block).
inline int64_t parameter_count(int64_t blocks) {
  return static_cast<int64_t>(kGlobalParameterNames.size() + blocks * kBlockParameterNames.size());
}
inline std::string parameter_name(int64_t index) {
  const auto globals = static_cast<int64_t>(kGlobalParameterNames.size());
  if (index < globals) return std::string(kGlobalParameterNames[static_cast<size_t>(index)]);
  const int64_t per_block = static_cast<int64_t>(kBlockParameterNames.size()), in_blocks = index - globals;
  return "blocks." + std::to_string(in_blocks / per_block) + "." +
         std::string(kBlockParameterNames[static_cast<size_t>(in_blocks % per_block)]);
}

}  // namespace copytask
