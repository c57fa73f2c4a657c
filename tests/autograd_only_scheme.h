#pragma once
// A scheme the test binary registers for itself, with no fused CPU kernel: what a researcher
// prototyping a scheme in LibTorch has before writing its CPU kernel. Its entry says it
// runs on the autograd and device steps only, so the tests that need the fused step leave
// it out (test_util.h: every_positional_member's `needs`), and the study and CLI paths
// must train it on the autograd step, in batches of its own.
#include <string>

namespace copytask::test {

// "sqrt_bias": bias[h, i, j] = -w_h sqrt(|i - j|), w = exp(log_w) learned per head, from 1.
constexpr const char* kAutogradOnlyScheme = "sqrt_bias";

// Registers it (positional_scheme_register); test_main calls it before installing the rules.
void autograd_only_scheme_register();

// Whether only this binary has the scheme: the independent reference (tests/reference) and
// its fixtures cover the project's schemes, not these.
bool is_test_only_scheme(const std::string& name);

}  // namespace copytask::test
