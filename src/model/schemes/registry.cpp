// The registry of positional schemes: one line per scheme below, naming the function in
// its file (src/model/schemes/<name>.cpp) that returns its SchemeEntry; and of the options
// that attach to a scheme (model.dape, model.length_scale), each naming its OptionEntry.
// The order is the order the command line and docs/configuration.md list them in.
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
  SCHEME(fire)                              \
  SCHEME(xpos)                              \
  SCHEME(cope)                              \
  SCHEME(fox)

#define COPYTASK_POSITIONAL_OPTIONS(OPTION) \
  OPTION(dape)                              \
  OPTION(length_scale)

namespace copytask {

#define COPYTASK_DECLARE_SCHEME(name) SchemeEntry name##_scheme();
COPYTASK_POSITIONAL_SCHEMES(COPYTASK_DECLARE_SCHEME)
#define COPYTASK_DECLARE_OPTION(name) OptionEntry name##_option();
COPYTASK_POSITIONAL_OPTIONS(COPYTASK_DECLARE_OPTION)

const std::vector<SchemeEntry>& positional_registry() {
#define COPYTASK_LIST_SCHEME(name) name##_scheme(),
  static const std::vector<SchemeEntry> registry = {COPYTASK_POSITIONAL_SCHEMES(COPYTASK_LIST_SCHEME)};
  return registry;
}

const std::vector<OptionEntry>& positional_option_registry() {
#define COPYTASK_LIST_OPTION(name) name##_option(),
  static const std::vector<OptionEntry> registry = {COPYTASK_POSITIONAL_OPTIONS(COPYTASK_LIST_OPTION)};
  return registry;
}

}  // namespace copytask
