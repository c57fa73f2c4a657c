// Looking schemes up in the registry (schemes/registry.cpp), a member's positional (a scheme
// with its options attached), the rules every scheme shares, and the pair rotation that the
// LibTorch model applies with a rotation table.
#include "model/positional.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "model/hooks/registry.h"

namespace copytask {

void PositionalScheme::attach(const std::string& name, std::shared_ptr<PositionalScheme> option) {
  register_module(name, option);
  options_.push_back(std::move(option));
}

std::vector<PositionalScheme*> PositionalScheme::components() {
  std::vector<PositionalScheme*> out{this};
  for (const auto& option : options_) out.push_back(option.get());
  return out;
}

PositionalScheme* PositionalScheme::owner_of(const Hook& hook) {
  for (PositionalScheme* component : components())
    for (const Hook* own : component->hooks())
      if (own == &hook) return component;
  return nullptr;
}

std::vector<const Hook*> PositionalScheme::member_hooks() {
  std::vector<const Hook*> out;
  for (const Hook* hook : hook_registry())
    if (owner_of(*hook)) out.push_back(hook);
  return out;
}

bool PositionalScheme::learned_for(const Hook& hook) {
  PositionalScheme* owner = owner_of(hook);
  return owner && owner->learned();
}

const std::vector<std::string>& positional_names() {
  // Made again when a scheme was registered since (positional_scheme_register).
  static std::vector<std::string> names;
  if (names.size() != positional_registry().size()) {
    names.clear();
    for (const auto& entry : positional_registry()) names.push_back(entry.name);
  }
  return names;
}

const SchemeEntry* positional_entry(const std::string& name) {
  for (const auto& entry : positional_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

namespace {
// Whether a scheme's hooks read positions (so position IDs change anything).
bool reads_positions(const std::string& name, const PositionalOptions& options) {
  const PositionalShape shape;  // any sizes the scheme accepts: only its hooks are asked
  PositionalOptions plain = options;
  plain.dape = plain.length_scale = false;
  plain.position_ids = "sequential";
  plain.position_range = 0;
  try {
    auto scheme = positional_scheme_make(name, plain, shape);
    for (const Hook* hook : scheme->hooks())
      if (hook->reads_positions()) return true;
  } catch (const std::exception&) {
    return true;  // a scheme that cannot be built at these sizes says so through its own rule
  }
  return false;
}
}  // namespace

SchemeProblem positional_problem(const ModelConfig& model) {
  const SchemeEntry* entry = positional_entry(model.positional);
  if (!entry) return {"model.positional", "\"" + model.positional + "\"", "unknown positional scheme"};
  const std::string own = entry->incompatibility(model);
  if (!own.empty()) return {"model.positional", "\"" + model.positional + "\"", own};
  for (const auto& option : positional_option_registry()) {
    if (!option.enabled(model.positional_options)) continue;
    const std::string why = option.incompatibility(model);
    if (!why.empty()) return {"model." + option.key, "true", why};
  }
  const std::string& ids = model.positional_options.position_ids;
  if (position_ids_vary(model.positional_options) && !reads_positions(model.positional, model.positional_options))
    return {"model.position_ids", "\"" + ids + "\"",
            "applies to a scheme that reads positions; model.positional = " + model.positional +
                " reads none (its positions, if any, come from the content): leave model.position_ids sequential"};
  return {};
}

void positional_rules_install() {
  SchemeRules rules;
  rules.names = positional_names();
  rules.incompatibility = positional_problem;
  scheme_rules_set(std::move(rules));
}

std::shared_ptr<PositionalScheme> positional_scheme_make(const std::string& name, const PositionalOptions& options,
                                                         const PositionalShape& shape) {
  const SchemeEntry* entry = positional_entry(name);
  if (!entry) throw std::invalid_argument("unknown positional scheme '" + name + "'");
  auto scheme = entry->make(options, shape);
  for (const auto& option : positional_option_registry())
    if (option.enabled(options)) scheme->attach(option.key, option.make(options, shape));
  return scheme;
}

unsigned positional_steps(const std::string& name, const PositionalOptions& options) {
  const SchemeEntry* entry = positional_entry(name);
  unsigned steps = entry ? entry->steps : 0u;
  for (const auto& option : positional_option_registry())
    if (option.enabled(options)) steps &= option.steps;
  return steps;
}

double positional_activation_floats(const ModelConfig& model, double T) {
  double floats = 0;
  const SchemeEntry* entry = positional_entry(model.positional);
  if (entry && entry->activation_floats) floats += entry->activation_floats(model, T);
  for (const auto& option : positional_option_registry())
    if (option.enabled(model.positional_options) && option.activation_floats) floats += option.activation_floats(model, T);
  return floats;
}

torch::Tensor rotate_pairs(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin) {
  auto sizes = x.sizes().vec();
  auto pairs_shape = sizes;
  pairs_shape.back() = sizes.back() / 2;
  pairs_shape.push_back(2);
  auto pairs = x.reshape(pairs_shape);  // (..., P, Dh/2, 2)
  auto a = pairs.select(-1, 0);         // (..., P, Dh/2) components 2i
  auto b = pairs.select(-1, 1);         // (..., P, Dh/2) components 2i+1
  auto rotated = torch::stack({a * cos - b * sin, a * sin + b * cos}, -1);  // (..., P, Dh/2, 2)
  return rotated.reshape(sizes);        // (..., P, Dh)
}

}  // namespace copytask
