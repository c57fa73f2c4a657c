// Scheme helpers and the flattened view of a config.
#include "config/config.h"

namespace copytask {

std::string json_shown(const nlohmann::json& value) {
  return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string scheme_name_of(const ModelConfig& model) {
  return model.positional + (model.causal ? "+causal" : "");
}

Config config_for_scheme(const Config& base, const SchemeSpec& scheme) {
  Config config = config_with_overrides(base, scheme.overrides, "compare scheme '" + scheme.name + "'");
  try {
    config_validate(config);
  } catch (const ConfigError& error) {
    throw ConfigError("compare scheme '" + scheme.name + "': " + error.what());
  }
  return config;
}

std::vector<nlohmann::json> grid_combinations(const nlohmann::json& grid) {
  std::vector<nlohmann::json> points = {nlohmann::json::object()};
  for (const auto& axis : grid.items()) {
    std::vector<nlohmann::json> crossed;
    for (const auto& point : points)
      for (const auto& value : axis.value()) {
        nlohmann::json next = point;
        next[axis.key()] = value;
        crossed.push_back(next);
      }
    points = crossed;
  }
  return points;
}

std::string grid_point_name(const std::string& scheme, const nlohmann::json& point) {
  std::string name = scheme;
  for (const auto& item : point.items())
    name += "@" + item.key() + "=" + (item.value().is_string() ? item.value().get<std::string>() : json_shown(item.value()));
  return name;
}

namespace {
void flatten_into(const nlohmann::json& value, const std::string& key,
                  std::vector<std::pair<std::string, std::string>>& out) {
  if (value.is_object() && key.find('.') == std::string::npos) {
    for (const auto& item : value.items())
      flatten_into(item.value(), key.empty() ? item.key() : key + "." + item.key(), out);
  } else if (key == "compare.schemes") {
    for (const auto& scheme : value) {
      std::string overrides;
      for (const auto& item : scheme.items())
        if (item.key() != "name") overrides += (overrides.empty() ? "" : " ") + item.key() + "=" + json_shown(item.value());
      out.emplace_back("compare.schemes[" + scheme.at("name").get<std::string>() + "]", overrides);
    }
  } else {
    out.emplace_back(key, value.is_string() ? value.get<std::string>() : json_shown(value));
  }
}
}  // namespace

std::vector<std::pair<std::string, std::string>> config_flatten(const Config& config) {
  std::vector<std::pair<std::string, std::string>> out;
  flatten_into(config_to_json(config), "", out);
  return out;
}

}  // namespace copytask
