#include "train/interrupt.h"

#include <atomic>

namespace copytask {
namespace {
// Lock-free, so setting it from a signal handler is safe.
std::atomic<bool> stop_flag{false};
static_assert(std::atomic<bool>::is_always_lock_free);
}  // namespace

void stop_request() { stop_flag = true; }
bool stop_requested() { return stop_flag; }

}  // namespace copytask
