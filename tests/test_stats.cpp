// Summary statistics against values computed by hand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "report/stats.h"

namespace copytask {
namespace {

TEST(Stats, SummaryOfFiveValues) {
  // mean 0.9, sample variance ((.1^2)*2 + (.05^2)*2 + 0) / 4 = 0.00625, std 0.0790569
  Summary s = summarize({0.8, 0.85, 0.9, 0.95, 1.0});
  EXPECT_EQ(s.n, 5);
  EXPECT_NEAR(s.mean, 0.9, 1e-12);
  EXPECT_NEAR(s.std, 0.0790569415, 1e-9);
  EXPECT_DOUBLE_EQ(s.min, 0.8);
  EXPECT_DOUBLE_EQ(s.max, 1.0);
  ASSERT_TRUE(s.ci95.has_value());
  const double half = 2.7764 * 0.0790569415 / std::sqrt(5.0);  // t(0.975, 4) = 2.7764
  EXPECT_NEAR(s.ci95->first, 0.9 - half, 1e-6);
  EXPECT_NEAR(s.ci95->second, 0.9 + half, 1e-6);
}

TEST(Stats, IntervalIsClippedToTheMetricRange) {
  // mean 0.99333, std 0.011547, t(0.975, 2) = 4.3027: half width 0.0287 -> [0.9647, 1.0]
  Summary s = summarize({0.98, 1.0, 1.0});
  ASSERT_TRUE(s.ci95.has_value());
  EXPECT_NEAR(s.ci95->first, 0.99333333 - 4.3027 * 0.011547005 / std::sqrt(3.0), 1e-6);
  EXPECT_DOUBLE_EQ(s.ci95->second, 1.0);
}

TEST(Stats, SingleValueHasNoInterval) {
  Summary s = summarize({0.5});
  EXPECT_EQ(s.n, 1);
  EXPECT_EQ(s.std, 0.0);
  EXPECT_FALSE(s.ci95.has_value());
  EXPECT_TRUE(summary_json(s)["ci95"].is_null());
}

TEST(Stats, StudentTQuantiles) {
  EXPECT_NEAR(student_t_975(1), 12.7062, 1e-4);
  EXPECT_NEAR(student_t_975(2), 4.3027, 1e-4);
  EXPECT_NEAR(student_t_975(30), 2.0423, 1e-4);
  EXPECT_NEAR(student_t_975(40), 2.0211, 1e-3);
  EXPECT_NEAR(student_t_975(120), 1.9799, 1e-3);
  EXPECT_THROW(student_t_975(0), std::invalid_argument);
}

// The Wilson score interval against its closed form at the ends and in the middle: 0 or all
// of n trials, and a half.
TEST(Stats, WilsonIntervalMatchesItsClosedForm) {
  const double z = 1.959964;
  for (int64_t n : {int64_t{1}, int64_t{100}, int64_t{500}}) {
    const auto [low1, high1] = wilson_95(1.0, n);
    EXPECT_NEAR(low1, n / (n + z * z), 1e-12) << n;  // all successes: n / (n + z^2)
    EXPECT_DOUBLE_EQ(high1, 1.0);
    const auto [low0, high0] = wilson_95(0.0, n);
    EXPECT_DOUBLE_EQ(low0, 0.0);
    EXPECT_NEAR(high0, z * z / (n + z * z), 1e-12) << n;
    const auto [low, high] = wilson_95(0.5, n);
    EXPECT_NEAR(0.5 - low, high - 0.5, 1e-12) << "symmetric at one half";
  }
  EXPECT_NEAR(wilson_95(1.0, 100).first, 0.9630, 5e-5);
  EXPECT_NEAR(wilson_95(1.0, 500).first, 0.9924, 5e-5);
  EXPECT_THROW(wilson_95(0.5, 0), std::invalid_argument);
}

// A share's interval never collapses: seeds that agree, or one seed alone, keep the finite
// test's binomial uncertainty; where the seeds disagree more, the t interval stands.
TEST(Stats, AShareIntervalCoversBothTheSeedsAndTheFiniteTest) {
  const Summary agree = summarize_share({1.0, 1.0, 1.0, 1.0, 1.0}, 100);
  ASSERT_TRUE(agree.ci95);
  EXPECT_NEAR(agree.ci95->first, 0.9630, 5e-5);
  EXPECT_DOUBLE_EQ(agree.ci95->second, 1.0);
  const Summary two = summarize_share({0.0067, 0.0067}, 1000);  // two equal seeds: t gives zero width
  ASSERT_TRUE(two.ci95);
  EXPECT_LT(two.ci95->first, 0.0067);
  EXPECT_GT(two.ci95->second, 0.0067);
  const Summary one = summarize_share({0.4}, 100);
  ASSERT_TRUE(one.ci95) << "one seed still has the binomial interval";
  const auto binomial = wilson_95(0.4, 100);
  EXPECT_DOUBLE_EQ(one.ci95->first, binomial.first);
  const std::vector<double> split = {0.0, 0.63, 1.0, 0.0, 1.0};
  const Summary seeds = summarize(split), share = summarize_share(split, 100);
  EXPECT_DOUBLE_EQ(share.ci95->first, seeds.ci95->first) << "the seeds' spread is the wider here";
  EXPECT_DOUBLE_EQ(share.ci95->second, seeds.ci95->second);
  const Summary unknown = summarize_share({1.0, 1.0}, 0);
  EXPECT_DOUBLE_EQ(unknown.ci95->first, 1.0) << "no trials known: the t interval alone";
}

}  // namespace
}  // namespace copytask
