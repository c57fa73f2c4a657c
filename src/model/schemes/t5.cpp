// t5 (Raffel et al. 2020): a learned bias per head and relative-distance bucket, with
// bidirectional buckets. With d = i - j (query minus key), half = buckets / 2:
//   bucket = (d < 0 ? half : 0) + n            for n = |d| < max_exact = half / 2
//          = (d < 0 ? half : 0) + min(half - 1, max_exact + floor(log(n / max_exact)
//                 / log(max_distance / max_exact) * (half - max_exact)))   otherwise
//   bias[h, i, j] = bucket_bias[bucket(i - j), h]
// so keys to the left and to the right have buckets of their own, exact near the query and
// logarithmic further out; every distance from max_distance on shares the last bucket.
// bucket_bias starts N(0, 1/sqrt(D)), T5's own initialisation.
#include <algorithm>
#include <cmath>
#include <map>
#include <vector>

#include <ATen/core/Generator.h>

#include "model/hooks/registry.h"
#include "model/positional.h"

namespace copytask {
namespace {

// The bucket of each (query, key) pair: (P, P) int64.
torch::Tensor t5_buckets(int64_t positions, int64_t buckets, int64_t max_distance) {
  const int64_t half = buckets / 2, max_exact = half / 2;
  std::vector<int64_t> out(static_cast<size_t>(positions * positions));
  for (int64_t i = 0; i < positions; ++i)
    for (int64_t j = 0; j < positions; ++j) {
      const int64_t d = i - j, n = std::abs(d);
      int64_t bucket = d < 0 ? half : 0;
      if (n < max_exact) {
        bucket += n;
      } else {
        // In float64 with a small guard, so a distance exactly on a boundary (n = 16, 32,
        // ... with the defaults) lands in the bucket the formula gives it.
        const double scaled = std::log(static_cast<double>(n) / max_exact) /
                              std::log(static_cast<double>(max_distance) / max_exact) * (half - max_exact);
        bucket += std::min(half - 1, max_exact + static_cast<int64_t>(std::floor(scaled + 1e-9)));
      }
      out[static_cast<size_t>(i * positions + j)] = bucket;
    }
  return torch::tensor(out, torch::kLong).view({positions, positions});
}

class T5Bias : public PositionalScheme {
 public:
  T5Bias(const PositionalOptions& options, const PositionalShape& shape)
      : PositionalScheme(shape), buckets_(options.t5_buckets), max_distance_(options.t5_max_distance) {
    bucket_bias_ = register_parameter("bucket_bias", torch::zeros({buckets_, shape.heads}));  // (buckets, H)
  }
  const Hook* hook() const override { return &score_bias_hook(); }
  torch::Tensor table(int64_t positions) override {
    // One index per P, kept for good: a captured CUDA graph reads the training P's at its
    // address, so an evaluation at other lengths between replays must not free it.
    auto found = bucket_of_.find(positions);
    if (found == bucket_of_.end() || found->second.device() != bucket_bias_.device())
      found = bucket_of_.insert_or_assign(positions, t5_buckets(positions, buckets_, max_distance_)
                                                         .to(bucket_bias_.device()).reshape({-1})).first;  // (P*P)
    auto values = bucket_bias_.index_select(0, found->second);                  // (P*P, H)
    return values.view({positions, positions, shape_.heads}).permute({2, 0, 1});  // (H, P, P)
  }
  std::vector<torch::Tensor> kept_tensors() const override {
    std::vector<torch::Tensor> kept;
    for (const auto& [positions, index] : bucket_of_) kept.push_back(index);
    return kept;
  }
  void init(const torch::Tensor&, at::Generator& generator) override {
    torch::NoGradGuard no_grad;
    bucket_bias_.normal_(0.0, 1.0 / std::sqrt(static_cast<double>(shape_.embed)), generator);
  }

 private:
  int64_t buckets_, max_distance_;
  torch::Tensor bucket_bias_;
  std::map<int64_t, torch::Tensor> bucket_of_;  // per P: each (i, j)'s bucket, flat (P*P)
};

}  // namespace

SchemeEntry t5_scheme() {
  return {"t5", "T5's learned bias per relative-distance bucket (model.t5_buckets, model.t5_max_distance)",
          [](const ModelConfig&) { return std::string(); },
          [](const PositionalOptions& options, const PositionalShape& shape) {
            return std::make_shared<T5Bias>(options, shape);
          }};
}

}  // namespace copytask
