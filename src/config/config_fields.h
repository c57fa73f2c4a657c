#pragma once
// Every config key, listed once: where it lives in Config, who may change it, and what it
// means. This table drives reading a config from JSON, writing it, which keys a compare
// scheme or grid may vary, and `copytask keys` (the key table of docs/configuration.md,
// which a test keeps equal to it) and each key's own range check (config_fields_check).
// The rules between keys (max_len within context, batch_size within the train split, a
// scheme's needs) are config_validate's.
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"

namespace copytask {

// Who may set a key to different values within one study.
enum class KeyScope {
  study,    // the whole study's (task.*, eval.*, report.*, compare.*): one value for every member
  scheme,   // may differ between schemes and grid points (model.*, train.* but below)
  machine,  // where it runs (train.device, train.threads): may differ between shards, not schemes
};

struct ConfigField {
  std::string key;      // dotted: "model.heads"
  KeyScope scope = KeyScope::study;
  bool positional_option = false;  // one of PositionalOptions (a per-member option of a batch)
  // An older name of other keys (model.random_positions): read from a config and set
  // through them, never written (config_to_json leaves it out).
  bool old_form = false;
  std::string meaning;  // one line for `copytask keys` and the docs
  // The key's own range: allowed(value) is false where the value is out of it, and
  // `rule` then says what is allowed ("must be 1..4096"). No check where allowed is empty.
  std::string rule;
  std::function<bool(const nlohmann::json&)> allowed;
  std::function<nlohmann::json(const Config&)> get;
  // Sets the field from a value already checked to have the default's type.
  std::function<void(Config&, const nlohmann::json&)> set;

  std::string section() const { return key.substr(0, key.find('.')); }
  std::string leaf() const { return key.substr(key.find('.') + 1); }
};

// Every field, in the order the docs list them.
const std::vector<ConfigField>& config_fields();

// The field of a dotted key, or nullptr.
const ConfigField* config_field(const std::string& key);

// Checks every key against its own range, in the table's order; throws ConfigError
// "<key> = <value>: <rule>" for the first out of range.
void config_fields_check(const Config& config);

// A value as an error message shows it: integers and strings as written, numbers without
// trailing zeros (0.001, 1), strings in quotes.
std::string config_value_text(const nlohmann::json& value);

// The key table as Markdown: key, default, allowed (its own range), meaning (`copytask keys`).
std::string config_keys_markdown();

}  // namespace copytask
