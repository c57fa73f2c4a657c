#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <gtest/gtest.h>

#include "autograd_only_scheme.h"
#include "model/positional.h"

// --exit-77-when-all-skipped (after GoogleTest's own flags): exit 77 when at least one test
// ran and every one skipped itself, which ctest shows as skipped (tests/ctest_groups.cmake
// runs each group of tests so); otherwise GoogleTest's exit status, 1 on any failure.
int main(int argc, char** argv) {
  // MKL in its reproducible branch (the same numbers on every CPU), set before any LibTorch op
  // so that it holds however the binary is started (ctest, the GPU bundle's run script, by
  // hand), for the autograd references of a LibTorch that calls MKL (PyPI's 2.11, the CUDA
  // build's). On an AMD Zen 4 its default branch gave one member's gradients (rope+causal,
  // FusedGpu's copy-family shape) 2.8% off the kernels' where Debian's LibTorch 1.13, 2.11 in
  // this branch and 2.11 with ATen's AVX2 kernels (ATEN_CPU_CAPABILITY=avx2) all agreed with
  // them to 1e-6. A value already set (a user's own MKL_CBWR) is kept.
  setenv("MKL_CBWR", "COMPATIBLE", 0);
  ::testing::InitGoogleTest(&argc, argv);
  bool exit_77_when_all_skipped = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--exit-77-when-all-skipped") == 0) {
      exit_77_when_all_skipped = true;
    } else {
      std::fprintf(stderr, "copytask_tests: unknown argument '%s' (GoogleTest's --gtest_* flags, --exit-77-when-all-skipped)\n",
                   argv[i]);
      return 2;
    }
  }
  copytask::test::autograd_only_scheme_register();  // before the rules, which list its name
  copytask::positional_rules_install();  // config checks name the registry's schemes
  const int status = RUN_ALL_TESTS();
  const ::testing::UnitTest& unit = *::testing::UnitTest::GetInstance();
  if (status == 0 && exit_77_when_all_skipped && unit.test_to_run_count() > 0 &&
      unit.skipped_test_count() == unit.test_to_run_count())
    return 77;
  return status;
}
