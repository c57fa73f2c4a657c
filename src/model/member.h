#pragma once
// What makes one member of a batch: its arm's name, seed, positional scheme with its
// options, and causal flag. Plain data (no tensors), so the command line can speak of members.
#include <cstdint>
#include <string>
#include <utility>

#include "config/config.h"

namespace copytask {

struct MemberSpec {
  MemberSpec(std::string arm_ = "", int64_t seed_ = 0, std::string positional_ = "none", bool causal_ = false,
             PositionalOptions options_ = {})
      : arm(std::move(arm_)), seed(seed_), positional(std::move(positional_)), causal(causal_),
        options(std::move(options_)) {}
  std::string arm;          // the study's name for the member's arm, e.g. "alibi+causal" (study/study.h)
  int64_t seed = 0;
  std::string positional;   // its positional scheme (model.positional)
  bool causal = false;
  PositionalOptions options;
};

}  // namespace copytask
