#pragma once
// What a config check needs to know of the positional schemes: their names and why a
// config cannot run one. The schemes themselves live in the model layer, which needs
// LibTorch; config does not, so the model installs these rules (positional_rules_install
// in model/positional.h) before any config is checked: at the start of main and of the
// tests. Checking a config before that is a programming error (std::logic_error).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"

namespace copytask {

struct SchemeRules {
  std::vector<std::string> names;  // as model.positional names them, in the registry's order
  // "" when `name` can run with these options and sizes, else why not
  std::function<std::string(const std::string& name, const PositionalOptions&, int64_t embed, int64_t heads)>
      incompatibility;
};

void scheme_rules_set(SchemeRules rules);
const SchemeRules& scheme_rules();

}  // namespace copytask
