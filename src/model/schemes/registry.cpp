// The registry of positional schemes: one line per scheme below, naming the function in
// its file (src/model/schemes/<name>.cpp) that returns its SchemeEntry. The order is the
// order the command line and docs/configuration.md list them in.
#include "model/positional.h"

#define COPYTASK_POSITIONAL_SCHEMES(SCHEME) \
  SCHEME(none)                              \
  SCHEME(sinusoidal)                        \
  SCHEME(learned)                           \
  SCHEME(rope)                              \
  SCHEME(alibi)                             \
  SCHEME(t5)                                \
  SCHEME(dynamic)                           \
  SCHEME(kerple)                            \
  SCHEME(fire)

namespace copytask {

#define COPYTASK_DECLARE_SCHEME(name) SchemeEntry name##_scheme();
COPYTASK_POSITIONAL_SCHEMES(COPYTASK_DECLARE_SCHEME)

const std::vector<SchemeEntry>& positional_registry() {
#define COPYTASK_LIST_SCHEME(name) name##_scheme(),
  static const std::vector<SchemeEntry> registry = {COPYTASK_POSITIONAL_SCHEMES(COPYTASK_LIST_SCHEME)};
  return registry;
}

}  // namespace copytask
