#pragma once
// The sections of the HTML report, each built from the study files read through their
// records (records/). A section never fails the report: a file that is missing gives a
// "not recorded" note, and a part kept as JSON (a summary, a per-length entry, an analysis,
// attention.json) whose shape is unexpected gives a note saying what could not be drawn
// (report_html catches).
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "report/report_inputs.h"

namespace copytask::report {

// What all sections agree on: which schemes, in which order, in which colour.
class StudyView {
 public:
  explicit StudyView(const ReportInputs& inputs);

  const ReportInputs& inputs() const { return inputs_; }
  // Chart order: results.json "scheme_order" when present, else the order of
  // compare.schemes, then any other scheme found in the files (so none is dropped).
  const std::vector<std::string>& schemes() const { return schemes_; }
  std::string colour(const std::string& scheme) const;
  // Whether the scheme trained with a causal mask (results.json, else positional.json,
  // else the scheme's config override, else model.causal).
  bool causal(const std::string& scheme) const;
  // The scheme's positional encoding kind, "" when unknown.
  std::string positional(const std::string& scheme) const;
  // The position IDs its tokens carried (model.position_ids: the scheme's config override,
  // else the study's; model.random_positions > 0 in an older study is "random").
  std::string position_ids(const std::string& scheme) const;
  // How its output was asked for (task.format, results.json's "format"): placeholders when unsaid.
  std::string format(const std::string& scheme) const;
  // task.vocab_size, 0 when unknown: names the <copy> token (vocab_size - 1).
  int64_t vocab_size() const { return vocab_size_; }
  // "_" for padding, "▸" for <copy>, else the token id.
  std::string token_name(int64_t token) const;

 private:
  const ReportInputs& inputs_;
  std::vector<std::string> schemes_;
  std::map<std::string, size_t> index_;
  int64_t vocab_size_ = 0;
};

// Each returns one <section> with its heading, charts, captions and tables.
std::string section_overview(const StudyView& view);    // title, key facts, warnings
std::string section_accuracy(const StudyView& view);    // bars + dots + CI, tables
std::string section_curves(const StudyView& view);      // test exact-match and train loss vs step
std::string section_by_length(const StudyView& view);   // test exact-match by content length
std::string section_length_generalization(const StudyView& view);  // exact match against length, beyond training
std::string section_why(const StudyView& view);         // source attention, errors, entropy by length
std::string section_attention(const StudyView& view);   // maps per probe and scheme
std::string section_positional(const StudyView& view);  // similarity, PCA, kernels, biases
std::string section_metadata(const StudyView& view);    // run.json, shards, config

// ---- Reading JSON defensively ----------------------------------------------------------------
// The member `key` of `j` when `j` is an object that has it, else nullptr.
const nlohmann::json* member(const nlohmann::json& j, std::string_view key);
// A number (NaN when absent, null or not a number).
double number(const nlohmann::json* j);
double number_at(const nlohmann::json& j, std::string_view key);
// A value as display text: strings without quotes, null as "", the rest as compact JSON.
std::string display(const nlohmann::json& value);
// display() of the member `key` of `j`; "" when there is none.
std::string display_at(const nlohmann::json& j, std::string_view key);
// A JSON array of numbers as doubles (NaN for non-numbers); empty when not an array.
std::vector<double> numbers(const nlohmann::json* j);
// A JSON array of arrays of numbers; empty when not one.
std::vector<std::vector<double>> matrix(const nlohmann::json* j);

// ---- HTML pieces ----------------------------------------------------------------------------
struct Cell {
  std::string html;
  bool numeric = false;
};
Cell text_cell(std::string_view text);
Cell number_cell(double value, int decimals);
// The scheme name with its colour swatch, as in every chart.
Cell scheme_cell(const StudyView& view, const std::string& scheme);
std::string table(const std::vector<std::string>& header, const std::vector<std::vector<Cell>>& rows,
                  const std::string& css_class = "");
std::string note(std::string_view text);                        // <p class="note">
std::string not_recorded(std::string_view file, std::string_view what);  // the missing-file note
std::string figure(const std::string& svg, const std::string& caption_html, const std::string& css_class = "");
std::string details(std::string_view summary, const std::string& content_html);
std::string section(std::string_view id, std::string_view title, const std::string& content_html);
// A string usable inside an id: letters, digits and '-' only, plus an index for uniqueness.
std::string id_part(std::string_view text, size_t index);

}  // namespace copytask::report
