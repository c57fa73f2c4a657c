// Config <-> JSON, the --config file and key=value overrides. Every key and type is
// checked against the defaults, so an unknown key or a wrong type never passes silently.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "config/compare_json.h"
#include "config/config.h"
#include "config/config_fields.h"

namespace copytask {
namespace {

using nlohmann::json;

std::string type_name(const json& value) {
  if (value.is_boolean()) return "a boolean";
  if (value.is_number_integer() || value.is_number_unsigned()) return "an integer";
  if (value.is_number_float()) return "a number";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "a list";
  if (value.is_object()) return "an object";
  return "null";
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "did you mean 'model.heads'?" plus the keys allowed at that level.
std::string unknown_key_message(const std::string& key, const json& level,
                                const std::string& prefix) {
  std::string leaf = key.substr(prefix.size());
  std::string best;
  size_t best_distance = 4;  // suggest only close matches
  std::string allowed;
  for (const auto& item : level.items()) {
    allowed += (allowed.empty() ? "" : ", ") + prefix + item.key();
    size_t distance = edit_distance(leaf, item.key());
    if (distance < best_distance) {
      best_distance = distance;
      best = prefix + item.key();
    }
  }
  std::string message = "unknown key '" + key + "'";
  if (!best.empty()) message += "; did you mean '" + best + "'?";
  message += " Allowed keys here: " + allowed;
  return message;
}

// Checks that `value` may replace `expected` (a default) at `key`, and returns it in the
// default's type: an integer key accepts an integral number (1e4), a number key an integer.
json checked_leaf(const std::string& key, const json& expected, const json& value) {
  auto wrong = [&](const std::string& wanted) {
    return ConfigError(key + " = " + json_shown(value) + ": expected " + wanted + ", got " +
                       type_name(value));
  };
  if (expected.is_boolean()) {
    if (!value.is_boolean()) throw wrong("true or false");
    return value;
  }
  if (expected.is_number_integer() || expected.is_number_unsigned()) {
    if (value.is_number_integer() || value.is_number_unsigned()) return value;
    if (value.is_number_float()) {
      double number = value.get<double>();
      if (std::isfinite(number) && number == std::floor(number) && std::fabs(number) < 9e15)
        return json(static_cast<int64_t>(number));
    }
    throw wrong("an integer");
  }
  if (expected.is_number_float()) {
    if (!value.is_number()) throw wrong("a number");
    return json(value.get<double>());
  }
  if (expected.is_string()) {
    if (!value.is_string()) throw wrong("a string");
    return value;
  }
  if (expected.is_array()) {
    if (!value.is_array()) throw wrong("a list, e.g. [0, 1, 2]");
    // The lists whose default is empty are lists of numbers (model.alibi_slopes,
    // model.alibi_right_slopes), but eval.rope_rescaling, a list of names.
    if (expected.empty())
      return checked_leaf(key, json::array({key == "eval.rope_rescaling" ? json("pi") : json(0.5)}), value);
    json out = json::array();
    for (size_t i = 0; i < value.size(); ++i)
      out.push_back(checked_leaf(key + "[" + std::to_string(i) + "]", expected[0], value[i]));
    return out;
  }
  if (expected.is_object()) {
    if (!value.is_object()) throw wrong("an object");
    return value;  // list items such as compare.schemes entries: checked by their parser
  }
  throw wrong(type_name(expected));
}

// Merges `patch` into `target` (the defaults or a config), refusing unknown keys and types.
void merge_checked(json& target, const json& patch, const std::string& prefix) {
  if (!patch.is_object())
    throw ConfigError((prefix.empty() ? std::string("the config") : prefix.substr(0, prefix.size() - 1)) +
                      " must be a JSON object, got " + type_name(patch));
  for (const auto& item : patch.items()) {
    const std::string key = prefix + item.key();
    if (!target.contains(item.key())) throw ConfigError(unknown_key_message(key, target, prefix));
    json& slot = target[item.key()];
    bool is_section = slot.is_object() && prefix.empty();
    if (is_section) {
      merge_checked(slot, item.value(), key + ".");
    } else {
      slot = checked_leaf(key, slot, item.value());
    }
  }
}

// Dotted key -> nested patch: "model.heads", 2 -> {"model": {"heads": 2}}.
json nested_patch(const std::string& dotted_key, const json& value) {
  if (dotted_key.empty()) throw ConfigError("an override has an empty key; write key=value, e.g. model.heads=2");
  std::vector<std::string> parts;
  std::stringstream stream(dotted_key);
  std::string part;
  while (std::getline(stream, part, '.')) {
    if (part.empty())
      throw ConfigError("key '" + dotted_key + "' has an empty part; write e.g. model.heads");
    parts.push_back(part);
  }
  if (dotted_key.back() == '.')
    throw ConfigError("key '" + dotted_key + "' ends with '.'; write e.g. model.heads");
  json patch = value;
  for (auto it = parts.rbegin(); it != parts.rend(); ++it) patch = json{{*it, patch}};
  return patch;
}

// ", task.context, task.kind, ...": the task keys a scheme or grid point may set, from the
// field table's scopes (for the messages that say what may vary).
std::string scheme_task_keys() {
  std::string keys;
  for (const auto& field : config_fields())
    if (field.section() == "task" && field.scope == KeyScope::scheme) keys += ", " + field.key;
  return keys;
}

// Whether a scheme or grid point may set `key` (the field table's scope). An unknown key
// under model. or train. passes here, to be reported with a suggestion by the type check.
bool may_vary_per_scheme(const std::string& key) {
  if (const ConfigField* field = config_field(key)) return field->scope == KeyScope::scheme;
  return key.rfind("model.", 0) == 0 || key.rfind("train.", 0) == 0;
}

// A compare.schemes entry: {"name": ..., "<dotted key>": value, ...}. Only model.* and
// train.* may vary between schemes: the data (task.*), the device and the threads are
// the whole study's.
SchemeSpec scheme_from_json(const json& entry, size_t index, const json& defaults) {
  const std::string where = "compare.schemes[" + std::to_string(index) + "]";
  if (!entry.is_object())
    throw ConfigError(where + " = " + json_shown(entry) +
                      ": expected an object like {\"name\": \"rope\", \"model.positional\": \"rope\"}");
  if (!entry.contains("name") || !entry["name"].is_string())
    throw ConfigError(where + " has no \"name\" (a string); every scheme needs a name, e.g. \"rope\"");
  SchemeSpec scheme;
  scheme.name = entry["name"].get<std::string>();
  for (const auto& item : entry.items()) {
    if (item.key() == "name") continue;
    const std::string& key = item.key();
    if (!may_vary_per_scheme(key)) {
      throw ConfigError(where + " (\"" + scheme.name + "\"): key '" + key +
                        "' cannot vary between schemes; a scheme may override model.* and train.* keys" + scheme_task_keys() +
                        " (but not train.device, train.threads or train.cuda_graph, which hold for the whole study)");
    }
    // Check the key and type now, so a typo is reported with the scheme's name.
    json probe = defaults;
    try {
      merge_checked(probe, nested_patch(key, item.value()), "");
    } catch (const ConfigError& error) {
      throw ConfigError(where + " (\"" + scheme.name + "\"): " + error.what());
    }
    scheme.overrides[key] = item.value();
  }
  return scheme;
}

// compare.grid: {"<dotted key>": [values...]}. The same keys as a scheme may override,
// except train.seeds (the seeds are already an axis of every study).
json grid_from_json(const json& grid, const json& defaults) {
  if (!grid.is_object())
    throw ConfigError("compare.grid = " + json_shown(grid) + ": expected an object like {\"model.heads\": [1, 2, 4]}");
  for (const auto& item : grid.items()) {
    const std::string& key = item.key();
    const std::string where = "compare.grid[\"" + key + "\"]";
    // The seeds are already an axis of every study.
    if (!may_vary_per_scheme(key) || key == "train.seeds")
      throw ConfigError(where + ": key '" + key + "' cannot be a grid axis; a grid may vary model.* and train.* keys" +
                        scheme_task_keys() + " (but not train.seeds, train.device or train.threads)");
    if (!item.value().is_array() || item.value().empty())
      throw ConfigError(where + " = " + json_shown(item.value()) + ": expected a non-empty list of values, e.g. [1, 2, 4]");
    for (const auto& value : item.value()) {
      json probe = defaults;
      try {
        merge_checked(probe, nested_patch(key, value), "");
      } catch (const ConfigError& error) {
        throw ConfigError(where + ": " + error.what());
      }
    }
  }
  return grid;
}

// Every field from its section (the merged JSON holds every key, checked against the
// defaults' types), then FIRE's threshold resolved.
Config config_from_checked_json(const json& j) {
  Config c;
  for (const auto& field : config_fields()) field.set(c, j.at(field.section()).at(field.leaf()));
  // FIRE's threshold defaults to the training context: resolved here, so every resolved
  // config (printed, saved with the results) carries the number the model starts from.
  PositionalOptions& o = c.model.positional_options;
  if (o.fire_threshold == 0) o.fire_threshold = static_cast<double>(c.task.context);
  // The position IDs' range defaults to the longest evaluated context, likewise.
  if (position_ids_vary(o) && o.position_range == 0) o.position_range = longest_eval_context(c.eval, c.task);
  // train.step = fused, the old name of fused-cpu (the CPU's hand-written step, beside
  // fused-gpu): read from saved configs and given keys, resolved so that no config says it.
  if (c.train.step == "fused") c.train.step = "fused-cpu";
  return c;
}

// A config as JSON with the old forms of keys beside (model.random_positions = 0, which
// sets nothing): what a file or an override is merged into, so that it may give them.
json with_old_forms(json out) {
  for (const auto& field : config_fields())
    if (field.old_form) out[field.section()][field.leaf()] = field.get(Config{});
  return out;
}

const json& defaults_json() {
  static const json defaults = with_old_forms(config_to_json(Config{}));
  return defaults;
}

json parse_json_text(const std::string& text, const std::string& origin) {
  try {
    return json::parse(text, nullptr, /*allow_exceptions=*/true, /*ignore_comments=*/true);
  } catch (const json::parse_error& error) {
    throw ConfigError(origin + " is not valid JSON: " + error.what() +
                      " (byte " + std::to_string(error.byte) + "); fix the syntax there");
  } catch (const json::exception& error) {
    // A number beyond a double's range (1e999) is out_of_range, not a parse error.
    throw ConfigError(origin + " holds a value copytask cannot read: " + error.what() +
                      "; numbers must fit a double (at most about 1.8e308)");
  }
}

}  // namespace

const std::vector<std::string>& positional_option_keys() {
  static const std::vector<std::string> keys = [] {
    std::vector<std::string> out;
    for (const auto& field : config_fields())
      if (field.positional_option) out.push_back(field.leaf());
    return out;
  }();
  return keys;
}

bool PositionalOptions::operator==(const PositionalOptions& other) const {
  Config a, b;
  a.model.positional_options = *this;
  b.model.positional_options = other;
  for (const auto& field : config_fields())
    if (field.positional_option && field.get(a) != field.get(b)) return false;
  return true;
}

CompareConfig Config::default_compare() {
  CompareConfig compare;
  auto scheme = [](const std::string& name, const std::string& positional, bool causal) {
    SchemeSpec spec{name, json::object()};
    spec.overrides["model.positional"] = positional;
    spec.overrides["model.causal"] = causal;
    return spec;
  };
  compare.schemes = {scheme("none", "none", false),     scheme("sinusoidal", "sinusoidal", false),
                     scheme("learned", "learned", false), scheme("rope", "rope", false),
                     scheme("alibi", "alibi", false),   scheme("alibi+causal", "alibi", true)};
  return compare;
}

json config_to_json(const Config& c) {
  json out = json::object();
  for (const auto& field : config_fields())
    if (!field.old_form) out[field.section()][field.leaf()] = field.get(c);
  return out;
}

json scheme_spec_to_json(const SchemeSpec& scheme) {
  json out = {{"name", scheme.name}};
  for (const auto& item : scheme.overrides.items()) out[item.key()] = item.value();
  return out;
}

SchemeSpec scheme_spec_from_json(const json& entry, size_t index) { return scheme_from_json(entry, index, defaults_json()); }

json compare_grid_checked(const json& grid) { return grid_from_json(grid, defaults_json()); }

Config config_from_json(const json& j) {
  json merged = defaults_json();
  merge_checked(merged, j, "");
  return config_from_checked_json(merged);
}

Config config_with_overrides(const Config& config, const json& dotted_overrides,
                             const std::string& origin) {
  json merged = with_old_forms(config_to_json(config));
  // A position range the base took by default is the default again here, so that a scheme
  // with a longer context or another task kind gets its own longest evaluated context.
  const PositionalOptions& o = config.model.positional_options;
  if (position_ids_vary(o) && o.position_range == longest_eval_context(config.eval, config.task) &&
      !dotted_overrides.contains("model.position_range") && !dotted_overrides.contains("model.random_positions"))
    merged["model"]["position_range"] = 0;
  for (const auto& item : dotted_overrides.items()) {
    try {
      merge_checked(merged, nested_patch(item.key(), item.value()), "");
    } catch (const ConfigError& error) {
      throw ConfigError(origin + ": " + error.what());
    }
  }
  return config_from_checked_json(merged);
}

json config_overrides_parse(const std::vector<std::string>& overrides) {
  json dotted = json::object();
  for (const auto& override_text : overrides) {
    size_t equals = override_text.find('=');
    if (equals == std::string::npos)
      throw ConfigError("'" + override_text + "' is not key=value; write e.g. model.heads=2");
    std::string key = override_text.substr(0, equals);
    std::string value_text = override_text.substr(equals + 1);
    json value;
    try {
      value = json::parse(value_text);
    } catch (const json::parse_error&) {
      value = value_text;  // not JSON: a plain string such as rope
    } catch (const json::exception&) {
      // JSON, but a number beyond a double's range (1e999): refused, not taken as a string.
      throw ConfigError(key + " = " + value_text + ": the number is too large for a double (at most about 1.8e308)");
    }
    dotted[key] = value;
  }
  return dotted;
}

Config config_resolve(const std::optional<std::string>& file_path,
                      const std::vector<std::string>& overrides) {
  json merged = defaults_json();
  if (file_path) {
    std::ifstream file(*file_path);
    if (!file)
      throw ConfigError("--config " + *file_path + ": cannot open the file; check the path (configs/ has ready ones)");
    std::stringstream text;
    text << file.rdbuf();
    json from_file = parse_json_text(text.str(), "--config " + *file_path);
    try {
      merge_checked(merged, from_file, "");
    } catch (const ConfigError& error) {
      throw ConfigError("in " + *file_path + ": " + error.what());
    }
  }
  // In the order given: a later override of the same key wins.
  for (const auto& override_text : overrides) {
    const json one = config_overrides_parse({override_text});
    merge_checked(merged, nested_patch(one.begin().key(), one.begin().value()), "");
  }
  Config config = config_from_checked_json(merged);
  config_validate(config);
  return config;
}

}  // namespace copytask
