#include "train/batcher.h"

#include <numeric>
#include <stdexcept>

#include "util/uniform.h"

namespace copytask {

MemberBatcher::MemberBatcher(int64_t examples, int64_t batch_size, const std::vector<uint64_t>& member_seeds)
    : examples_(examples), batch_size_(batch_size) {
  if (batch_size < 1 || batch_size > examples) throw std::invalid_argument("batch size must be 1..examples");
  for (uint64_t seed : member_seeds) {
    Stream stream;
    stream.engine.seed(seed);
    stream.order.resize(examples);
    reshuffle(stream);
    streams_.push_back(std::move(stream));
  }
}

void MemberBatcher::reshuffle(Stream& stream) {
  std::iota(stream.order.begin(), stream.order.end(), 0);
  for (int64_t i = examples_ - 1; i > 0; --i)  // Fisher-Yates
    std::swap(stream.order[i], stream.order[uniform_below(stream.engine, static_cast<uint64_t>(i) + 1)]);
  stream.cursor = 0;
}

std::vector<int64_t> MemberBatcher::next() {
  std::vector<int64_t> indices;
  indices.reserve(streams_.size() * batch_size_);
  for (auto& stream : streams_) {
    // An epoch's tail shorter than a batch is dropped: every batch has the same size.
    if (stream.cursor + batch_size_ > examples_) reshuffle(stream);
    indices.insert(indices.end(), stream.order.begin() + stream.cursor,
                   stream.order.begin() + stream.cursor + batch_size_);
    stream.cursor += batch_size_;
  }
  return indices;
}

}  // namespace copytask
