#pragma once
// A buffer of floats laid out from one list of named parts: the total is their sum and each
// part starts where the one before it ends, so the floats reserved and the slices handed out
// are computed from the same list and cannot disagree (the fused CPU step's workspace).
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace copytask {

class FloatLayout {
 public:
  struct Part {
    const char* name = nullptr;
    int64_t floats = -1;
  };
  // parts[i] is part i (callers index them by an enum); every one must be given.
  explicit FloatLayout(std::vector<Part> parts) : parts_(std::move(parts)) {
    for (const Part& part : parts_) {
      if (!part.name || part.floats < 0) throw std::logic_error("FloatLayout: a part was left out of the list");
      offsets_.push_back(total_);
      total_ += part.floats;
    }
  }
  FloatLayout() = default;
  int64_t total() const { return total_; }
  // Where part i starts in `buffer` (at least total() floats long: checked).
  float* at(std::vector<float>& buffer, size_t i) const {
    if (i >= parts_.size() || static_cast<int64_t>(buffer.size()) < total_)
      throw std::logic_error("FloatLayout: part " + std::to_string(i) + " outside a buffer of " +
                             std::to_string(buffer.size()) + " floats laid out for " + std::to_string(total_));
    return buffer.data() + offsets_[i];
  }
  int64_t offset(size_t i) const { return offsets_.at(i); }
  const Part& part(size_t i) const { return parts_.at(i); }
  size_t size() const { return parts_.size(); }

 private:
  std::vector<Part> parts_;
  std::vector<int64_t> offsets_;
  int64_t total_ = 0;
};

}  // namespace copytask
