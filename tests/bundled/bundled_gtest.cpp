// GoogleTest built from the bundled sources: one test and its own main.
#include <gtest/gtest.h>

TEST(Bundled, GoogleTestRuns) { EXPECT_EQ(1 + 1, 2); }

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
