#pragma once
// Ctrl-C: the signal handler asks the training loop to stop; the loop stops before its next
// step and throws Interrupted. A light header, so the command line need not see tensors.
#include <stdexcept>
#include <string>

namespace copytask {

// what(): "interrupted", or what the code that stopped adds (the study: what it kept).
class Interrupted : public std::runtime_error {
 public:
  explicit Interrupted(const std::string& what = "interrupted") : std::runtime_error(what) {}
};

// Async-signal-safe: sets an atomic flag.
void stop_request();
bool stop_requested();

}  // namespace copytask
