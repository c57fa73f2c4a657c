#pragma once
// The compare section's own JSON forms (config_json.cpp), for the field table: a
// compare.schemes entry {"name": ..., "<dotted key>": value} and a compare.grid
// {"<dotted key>": [values]}. Both check every key and value against the defaults and
// throw ConfigError naming the entry.
#include <nlohmann/json.hpp>

#include "config/config.h"

namespace copytask {

nlohmann::json scheme_spec_to_json(const SchemeSpec& scheme);
SchemeSpec scheme_spec_from_json(const nlohmann::json& entry, size_t index);
nlohmann::json compare_grid_checked(const nlohmann::json& grid);

}  // namespace copytask
