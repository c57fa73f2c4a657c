#include "config/scheme_rules.h"

#include <stdexcept>

namespace copytask {
namespace {
SchemeRules& installed() {
  static SchemeRules rules;
  return rules;
}
}  // namespace

void scheme_rules_set(SchemeRules rules) { installed() = std::move(rules); }

const SchemeRules& scheme_rules() {
  if (installed().names.empty())
    throw std::logic_error("the positional schemes' rules are not installed: call positional_rules_install() "
                           "(model/positional.h) before checking a config");
  return installed();
}

}  // namespace copytask
