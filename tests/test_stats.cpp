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

}  // namespace
}  // namespace copytask
