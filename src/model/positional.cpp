// Looking schemes up in the registry (schemes/registry.cpp), and the pair rotation that
// the LibTorch model applies with a rotation table.
#include "model/positional.h"

#include <stdexcept>

#include <torch/torch.h>

#include "config/scheme_rules.h"

namespace copytask {

const std::vector<std::string>& positional_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& entry : positional_registry()) out.push_back(entry.name);
    return out;
  }();
  return names;
}

const SchemeEntry* positional_entry(const std::string& name) {
  for (const auto& entry : positional_registry())
    if (entry.name == name) return &entry;
  return nullptr;
}

void positional_rules_install() {
  SchemeRules rules;
  rules.names = positional_names();
  rules.incompatibility = [](const std::string& name, const PositionalOptions& options, int64_t embed, int64_t heads) {
    const SchemeEntry* entry = positional_entry(name);
    return entry ? entry->incompatibility(options, embed, heads) : "unknown positional scheme '" + name + "'";
  };
  scheme_rules_set(std::move(rules));
}

std::shared_ptr<PositionalScheme> positional_scheme_make(const std::string& name, const PositionalOptions& options,
                                                         const PositionalShape& shape) {
  const SchemeEntry* entry = positional_entry(name);
  if (!entry) throw std::invalid_argument("unknown positional scheme '" + name + "'");
  return entry->make(options, shape);
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
