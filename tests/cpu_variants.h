#pragma once
// Runs a test once for each compiled variant of the CPU kernels (model/cpu_variant.h):
// TEST_P(CpuVariantTest, Name) with INSTANTIATE_CPU_VARIANTS(Suite). A variant this CPU
// cannot execute is skipped with a message naming what it lacks; the variant in force
// before the test is restored after it.
#include <string>

#include <gtest/gtest.h>

#include "model/cpu_variant.h"

namespace copytask::test {

class CpuVariantTest : public ::testing::TestWithParam<CpuVariant> {
 protected:
  void SetUp() override {
    before_ = cpu_variant_active();
    const std::string missing = cpu_variant_missing(GetParam());
    if (!missing.empty())
      GTEST_SKIP() << "this CPU cannot run the " << cpu_variant_name(GetParam()) << " kernels (it lacks " << missing
                   << "): skipped";
    ASSERT_EQ(cpu_variant_set(GetParam()), "");
    std::printf("  CPU kernels: %s\n", cpu_variant_name(GetParam()));
  }
  void TearDown() override { cpu_variant_set(before_); }

 private:
  CpuVariant before_ = CpuVariant::generic;
};

// "x86_64_v4", "x86_64_v3", "generic": the test names' suffixes.
inline std::string cpu_variant_test_name(const ::testing::TestParamInfo<CpuVariant>& info) {
  std::string name = cpu_variant_name(info.param);
  for (char& c : name)
    if (c == '-') c = '_';
  return name;
}

}  // namespace copytask::test

#define INSTANTIATE_CPU_VARIANTS(suite)                                                                        \
  INSTANTIATE_TEST_SUITE_P(Variants, suite, ::testing::ValuesIn(::copytask::cpu_variants_all()), \
                           ::copytask::test::cpu_variant_test_name)
