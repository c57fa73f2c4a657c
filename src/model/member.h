#pragma once
// What makes one member of a batch: its scheme's name, seed, positional scheme and causal
// flag. A light header (no tensors), so the command line can speak of members.
#include <cstdint>
#include <string>
#include <vector>

namespace copytask {

struct MemberSpec {
  std::string scheme;
  int64_t seed = 0;
  std::string positional = "none";
  bool causal = false;
};

// Member specs of one scheme: one member per seed.
inline std::vector<MemberSpec> members_of(const std::string& scheme, const std::string& positional, bool causal,
                                          const std::vector<int64_t>& seeds) {
  std::vector<MemberSpec> members;
  for (int64_t seed : seeds) members.push_back(MemberSpec{scheme, seed, positional, causal});
  return members;
}

}  // namespace copytask
