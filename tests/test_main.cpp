#include <gtest/gtest.h>

#include "autograd_only_scheme.h"
#include "model/positional.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  copytask::test::autograd_only_scheme_register();  // before the rules, which list its name
  copytask::positional_rules_install();  // config checks name the registry's schemes
  return RUN_ALL_TESTS();
}
