#pragma once
// Ctrl-C: the signal handler asks the training loop to stop; the loop stops before its next
// step and throws Interrupted. A light header, so the command line need not see tensors.
#include <stdexcept>

namespace copytask {

class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

// Async-signal-safe: sets an atomic flag.
void stop_request();
bool stop_requested();

}  // namespace copytask
