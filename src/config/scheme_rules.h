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

// Why a model config cannot run: the key to change, its value as the user wrote it, and
// what is wrong and how to fix it. Empty `problem` when it can run.
struct SchemeProblem {
  std::string key, value, problem;
};

struct SchemeRules {
  std::vector<std::string> names;  // as model.positional names them, in the registry's order
  // Whether the model config's scheme (model.positional) can run with its options
  // (model.dape, model.length_scale, model.random_positions, ...), sizes and causal flag.
  std::function<SchemeProblem(const ModelConfig&)> incompatibility;
};

void scheme_rules_set(SchemeRules rules);
const SchemeRules& scheme_rules();

}  // namespace copytask
