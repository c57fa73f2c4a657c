#pragma once
// Seeded minibatches, one stream per member: each member walks its own shuffled epochs of
// the train split, drawn from its seed alone, so its batches never depend on the members
// beside it. Pure C++; the trainer uploads the indices.
#include <cstdint>
#include <random>
#include <vector>

namespace copytask {

class MemberBatcher {
 public:
  // batch_size must be 1..examples.
  MemberBatcher(int64_t examples, int64_t batch_size, const std::vector<uint64_t>& member_seeds);

  // The next batch of every member: M * B row indices, member-major.
  std::vector<int64_t> next();

 private:
  struct Stream {
    std::mt19937_64 engine;
    std::vector<int64_t> order;  // the current epoch's permutation
    int64_t cursor = 0;
  };
  void reshuffle(Stream& stream);

  int64_t examples_, batch_size_;
  std::vector<Stream> streams_;
};

}  // namespace copytask
