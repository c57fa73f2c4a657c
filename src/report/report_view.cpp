// StudyView (scheme order, colours, causal flags, token names) and the small JSON and HTML
// helpers every section of the report shares.
#include <cctype>
#include <cmath>
#include <limits>

#include "report/report_sections.h"
#include "report/svg.h"

namespace copytask::report {
using nlohmann::json;

const json* member(const json& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  const auto it = j.find(std::string(key));
  return it == j.end() ? nullptr : &*it;
}

double number(const json* j) {
  return j && j->is_number() ? j->get<double>() : std::numeric_limits<double>::quiet_NaN();
}

double number_at(const json& j, std::string_view key) { return number(member(j, key)); }

std::string display(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_null()) return "";
  return value.dump();
}

std::string display_at(const json& j, std::string_view key) {
  const json* value = member(j, key);
  return value ? display(*value) : "";
}

std::vector<double> numbers(const json* j) {
  std::vector<double> out;
  if (!j || !j->is_array()) return out;
  for (const auto& v : *j) out.push_back(number(&v));
  return out;
}

std::vector<std::vector<double>> matrix(const json* j) {
  std::vector<std::vector<double>> out;
  if (!j || !j->is_array()) return out;
  for (const auto& row : *j) {
    if (!row.is_array()) return {};
    out.push_back(numbers(&row));
  }
  return out;
}

// ---- StudyView -------------------------------------------------------------------------------

StudyView::StudyView(const ReportInputs& inputs) : inputs_(inputs) {
  auto add = [this](const std::string& name) {
    if (index_.count(name)) return;
    index_[name] = schemes_.size();
    schemes_.push_back(name);
  };
  if (inputs.results && !inputs.results->scheme_order.empty()) {
    for (const auto& name : inputs.results->scheme_order) add(name);
  } else if (const json* compare = member(inputs.config, "compare")) {
    if (const json* schemes = member(*compare, "schemes"); schemes && schemes->is_array())
      for (const auto& scheme : *schemes)
        if (const json* name = member(scheme, "name"); name && name->is_string()) add(name->get<std::string>());
  }
  // Schemes present in the files but not in the order (e.g. a `train` study's single
  // scheme) come after, so nothing recorded is silently left out.
  if (inputs.results)
    for (const auto& [name, scheme] : inputs.results->schemes) add(name);
  if (const json* schemes = member(inputs.attention, "schemes"); schemes && schemes->is_object())
    for (const auto& item : schemes->items()) add(item.key());
  if (inputs.positional)
    for (const auto& [name, scheme] : inputs.positional->schemes) add(name);
  for (const auto& line : inputs.metrics) add(line.scheme);

  if (const json* task = member(inputs.config, "task")) {
    const double vocab = number_at(*task, "vocab_size");
    if (std::isfinite(vocab)) vocab_size_ = static_cast<int64_t>(vocab);
  }
}

std::string StudyView::colour(const std::string& scheme) const {
  const auto it = index_.find(scheme);
  return html::scheme_colour(it == index_.end() ? schemes_.size() : it->second);
}

namespace {
// The value of `key` in the config's compare.schemes entry named `scheme`, or nullptr.
const json* scheme_override(const json& config, const std::string& scheme, std::string_view key) {
  const json* compare = member(config, "compare");
  const json* schemes = compare ? member(*compare, "schemes") : nullptr;
  if (!schemes || !schemes->is_array()) return nullptr;
  for (const auto& entry : *schemes)
    if (const json* name = member(entry, "name"); name && name->is_string() && name->get<std::string>() == scheme)
      return member(entry, key);
  return nullptr;
}

// The scheme's entry in a typed file (results.json's or positional.json's), or nullptr.
template <typename File>
const auto* scheme_entry(const std::optional<File>& file, const std::string& scheme) {
  using Entry = typename decltype(file->schemes)::mapped_type;
  if (!file) return static_cast<const Entry*>(nullptr);
  const auto found = file->schemes.find(scheme);
  return found == file->schemes.end() ? static_cast<const Entry*>(nullptr) : &found->second;
}
}  // namespace

bool StudyView::causal(const std::string& scheme) const {
  if (const auto* entry = scheme_entry(inputs_.results, scheme)) return entry->causal;
  if (const auto* entry = scheme_entry(inputs_.positional, scheme)) return entry->causal;
  if (const json* flag = scheme_override(inputs_.config, scheme, "model.causal"); flag && flag->is_boolean())
    return flag->get<bool>();
  if (const json* model = member(inputs_.config, "model"))
    if (const json* flag = member(*model, "causal"); flag && flag->is_boolean()) return flag->get<bool>();
  return false;
}

std::string StudyView::positional(const std::string& scheme) const {
  if (const auto* entry = scheme_entry(inputs_.results, scheme); entry && !entry->positional.empty())
    return entry->positional;
  if (const auto* entry = scheme_entry(inputs_.positional, scheme); entry && !entry->positional.empty())
    return entry->positional;
  if (const json* kind = scheme_override(inputs_.config, scheme, "model.positional"); kind && kind->is_string())
    return kind->get<std::string>();
  return "";
}

std::string StudyView::position_ids(const std::string& scheme) const {
  auto read = [](const json* ids, const json* old) -> std::string {
    if (ids && ids->is_string()) return ids->get<std::string>();
    if (old && old->is_number_integer() && old->get<int64_t>() > 0) return "random";
    return "";
  };
  std::string own = read(scheme_override(inputs_.config, scheme, "model.position_ids"),
                         scheme_override(inputs_.config, scheme, "model.random_positions"));
  if (!own.empty()) return own;
  if (const json* model = member(inputs_.config, "model")) {
    const std::string base = read(member(*model, "position_ids"), member(*model, "random_positions"));
    if (!base.empty()) return base;
  }
  return "sequential";
}

std::string StudyView::format(const std::string& scheme) const {
  if (const auto* entry = scheme_entry(inputs_.results, scheme); entry && !entry->format.empty()) return entry->format;
  return "placeholders";
}

std::string StudyView::token_name(int64_t token) const {
  if (token == 0) return "_";
  if (vocab_size_ > 1 && token == vocab_size_ - 1) return "\u25B8";
  return std::to_string(token);
}

// ---- HTML pieces -------------------------------------------------------------------------------

Cell text_cell(std::string_view text) { return {html::escape(text), false}; }

Cell number_cell(double value, int decimals) {
  return {std::isnan(value) ? "<span class=\"na\">n/a</span>" : html::fixed(value, decimals), true};
}

Cell scheme_cell(const StudyView& view, const std::string& scheme) {
  return {"<span class=\"swatch\" style=\"background:" + html::escape(view.colour(scheme)) + "\"></span>" +
              html::escape(scheme),
          false};
}

std::string table(const std::vector<std::string>& header, const std::vector<std::vector<Cell>>& rows,
                  const std::string& css_class) {
  std::string head;
  for (const auto& name : header) head += html::text_element("th", "", name);
  std::string body;
  for (const auto& row : rows) {
    std::string cells;
    for (const auto& cell : row) cells += html::element("td", cell.numeric ? " class=\"num\"" : "", cell.html);
    body += html::element("tr", "", cells);
  }
  return html::element(
      "div", " class=\"table-wrap\"",
      html::element("table", css_class.empty() ? "" : html::attr("class", css_class),
                    html::element("thead", "", html::element("tr", "", head)) + html::element("tbody", "", body)));
}

std::string note(std::string_view text) { return html::text_element("p", " class=\"note\"", text); }

std::string not_recorded(std::string_view file, std::string_view what) {
  return html::element("p", " class=\"note missing\"",
                       html::text_element("code", "", file) + " not recorded: " + html::escape(what));
}

std::string figure(const std::string& svg, const std::string& caption_html, const std::string& css_class) {
  return html::element("figure", css_class.empty() ? "" : html::attr("class", css_class),
                       svg + (caption_html.empty() ? "" : html::element("figcaption", "", caption_html)));
}

std::string details(std::string_view summary, const std::string& content_html) {
  return html::element("details", "", html::text_element("summary", "", summary) + content_html);
}

std::string section(std::string_view id, std::string_view title, const std::string& content_html) {
  return html::element("section", html::attr("id", id), html::text_element("h2", "", title) + content_html);
}

std::string id_part(std::string_view text, size_t index) {
  std::string out;
  for (const char c : text) {
    if (std::isalnum(static_cast<unsigned char>(c))) out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    else if (!out.empty() && out.back() != '-') out += '-';
  }
  while (!out.empty() && out.back() == '-') out.pop_back();
  return (out.empty() ? "s" : out) + "-" + std::to_string(index);
}

}  // namespace copytask::report
