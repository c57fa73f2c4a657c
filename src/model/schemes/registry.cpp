// The registry of positional schemes: one line per scheme below, naming the function in
// its file (src/model/schemes/<name>.cpp) that returns its SchemeEntry; and of the options
// that attach to a scheme (model.dape, model.length_scale), each naming its OptionEntry.
// The order is the order the command line and docs/configuration.md list them in.
#include "model/positional.h"

#include <deque>
#include <stdexcept>
#include <utility>

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
  SCHEME(fox)                               \
  SCHEME(pope)

#define COPYTASK_POSITIONAL_OPTIONS(OPTION) \
  OPTION(dape)                              \
  OPTION(length_scale)

namespace copytask {

#define COPYTASK_DECLARE_SCHEME(name) SchemeEntry name##_scheme();
COPYTASK_POSITIONAL_SCHEMES(COPYTASK_DECLARE_SCHEME)
#define COPYTASK_DECLARE_OPTION(name) OptionEntry name##_option();
COPYTASK_POSITIONAL_OPTIONS(COPYTASK_DECLARE_OPTION)

namespace {
// A deque: registering a scheme later leaves the entries already handed out where they are.
std::deque<SchemeEntry>& scheme_registry() {
#define COPYTASK_LIST_SCHEME(name) name##_scheme(),
  static std::deque<SchemeEntry> registry = {COPYTASK_POSITIONAL_SCHEMES(COPYTASK_LIST_SCHEME)};
  return registry;
}
}  // namespace

const std::deque<SchemeEntry>& positional_registry() { return scheme_registry(); }

void positional_scheme_register(SchemeEntry entry) {
  for (const auto& known : scheme_registry())
    if (known.name == entry.name)
      throw std::logic_error("positional scheme '" + entry.name + "' is registered twice");
  scheme_registry().push_back(std::move(entry));
}

const std::vector<OptionEntry>& positional_option_registry() {
#define COPYTASK_LIST_OPTION(name) name##_option(),
  static const std::vector<OptionEntry> registry = {COPYTASK_POSITIONAL_OPTIONS(COPYTASK_LIST_OPTION)};
  return registry;
}

}  // namespace copytask
