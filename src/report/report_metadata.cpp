// The metadata section of the report: run.json (and each shard's), the resolved config as
// tables, the schemes with their overrides, and the config as JSON to copy.
#include <set>

#include "report/report_sections.h"
#include "report/svg.h"

namespace copytask::report {
using nlohmann::json;

namespace {
// Key/value rows of a flat JSON object; nested values shown as compact JSON.
std::string object_table(const json& object, const std::string& css_class) {
  std::vector<std::vector<Cell>> rows;
  for (const auto& item : object.items()) rows.push_back({text_cell(item.key()), text_cell(display(item.value()))});
  return table({"key", "value"}, rows, css_class);
}

// One row per shard, one column per key any shard has.
std::string shards_table(const std::vector<RunInfo>& records) {
  std::vector<json> shards(records.begin(), records.end());
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const auto& shard : shards)
    if (shard.is_object())
      for (const auto& item : shard.items())
        if (seen.insert(item.key()).second) keys.push_back(item.key());
  std::vector<std::string> header = {"shard"};
  header.insert(header.end(), keys.begin(), keys.end());
  std::vector<std::vector<Cell>> rows;
  for (size_t s = 0; s < shards.size(); ++s) {
    std::vector<Cell> row = {number_cell(static_cast<double>(s + 1), 0)};
    for (const auto& key : keys) {
      const json* value = member(shards[s], key);
      row.push_back(text_cell(value ? display(*value) : ""));
    }
    rows.push_back(std::move(row));
  }
  return table(header, rows, "shards");
}
}  // namespace

std::string section_metadata(const StudyView& view) {
  const ReportInputs& in = view.inputs();
  std::string content = html::text_element("h3", "", "Run");
  content += in.run ? object_table(json(*in.run), "run") : not_recorded("run.json", "no run metadata.");
  if (!in.shard_runs.empty())
    content += html::text_element("h3", "", "Shards (" + std::to_string(in.shard_runs.size()) + ")") +
               shards_table(in.shard_runs);

  content += html::text_element("h3", "", "Config");
  if (!in.config.is_object()) return section("metadata", "Config and run", content + not_recorded("config.json", "no config."));
  // The resolved config, one table per group side by side.
  std::string groups;
  for (const auto& item : in.config.items()) {
    if (item.key() == "compare") continue;
    groups += html::element("div", " class=\"config-group\"",
                            html::text_element("h4", "", item.key()) +
                                (item.value().is_object() ? object_table(item.value(), "config")
                                                          : html::text_element("p", "", display(item.value()))));
  }
  content += html::element("div", " class=\"config-groups\"", groups);
  if (const json* compare = member(in.config, "compare")) {
    const json* schemes = member(*compare, "schemes");
    if (schemes && schemes->is_array()) {
      std::vector<std::vector<Cell>> rows;
      for (const auto& scheme : *schemes) {
        const json* name = member(scheme, "name");
        std::string overrides;
        if (scheme.is_object())
          for (const auto& item : scheme.items())
            if (item.key() != "name") overrides += (overrides.empty() ? "" : ", ") + item.key() + " = " + display(item.value());
        const std::string scheme_name = name ? display(*name) : "";
        rows.push_back({scheme_cell(view, scheme_name), text_cell(overrides)});
      }
      content += html::text_element("h4", "", "compare.schemes") + table({"scheme", "overrides"}, rows, "schemes");
    }
    for (const auto& item : compare->items())
      if (item.key() != "schemes")
        content += html::text_element("h4", "", "compare." + item.key()) +
                   html::element("pre", "", html::escape(item.value().dump(2)));
  }
  content += details("config.json as JSON", html::element("pre", " class=\"json\"", html::escape(in.config.dump(2))));
  return section("metadata", "Config and run", content);
}

}  // namespace copytask::report
