#include <gtest/gtest.h>

#include "model/positional.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  copytask::positional_rules_install();  // config checks name the registry's schemes
  return RUN_ALL_TESTS();
}
