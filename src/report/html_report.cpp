// The report page: reads the study files, assembles the sections under one stylesheet,
// and writes the page atomically.
#include "report/html_report.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <functional>
#include <stdexcept>

#include "util/atomic_files.h"
#include "util/gzip_files.h"
#include "report/report_sections.h"
#include "report/svg.h"

namespace copytask {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {
// Inline, so the page needs nothing from outside; system fonts only.
constexpr const char* kStyle = R"css(
:root { --ink: #1d2125; --muted: #5f6873; --rule: #dfe3e8; --soft: #f5f7f9; --accent: #2f5d8a; }
* { box-sizing: border-box; }
body { margin: 0; background: #fff; color: var(--ink);
  font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, "Noto Sans", "DejaVu Sans", sans-serif; }
main { max-width: 1100px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 26px; margin: 0 0 8px; letter-spacing: -0.01em; }
h2 { font-size: 20px; margin: 40px 0 12px; padding-bottom: 6px; border-bottom: 2px solid var(--rule); }
h3 { font-size: 16px; margin: 26px 0 8px; }
h4 { font-size: 14px; margin: 16px 0 6px; color: var(--muted); }
h3 code { font-size: 15px; background: var(--soft); padding: 1px 6px; border-radius: 4px; }
h3 .sub { font-weight: 400; color: var(--muted); margin-left: 10px; font-size: 14px; }
code, pre { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 13px; }
pre { background: var(--soft); padding: 10px 12px; border-radius: 6px; overflow-x: auto; white-space: pre-wrap; word-break: break-all; }
pre.command { margin: 0 0 14px; }
.facts { display: flex; flex-wrap: wrap; gap: 8px 10px; margin: 10px 0 14px; }
.fact { background: var(--soft); border: 1px solid var(--rule); border-radius: 6px; padding: 4px 10px; }
.fact-name { color: var(--muted); font-size: 12px; margin-right: 6px; text-transform: uppercase; letter-spacing: 0.04em; }
.fact-value { font-weight: 600; }
nav ul { list-style: none; padding: 0; margin: 8px 0 0; display: flex; flex-wrap: wrap; gap: 6px 18px; }
nav a { color: var(--accent); text-decoration: none; }
nav a:hover { text-decoration: underline; }
.warning { background: #fff4e5; border-left: 4px solid #e8950c; padding: 8px 12px; margin: 10px 0; }
.note { color: var(--muted); font-size: 13.5px; }
.note.missing { background: var(--soft); border-left: 4px solid #aab3bd; padding: 8px 12px; font-style: normal; }
.error { background: #fdecec; border-left: 4px solid #c73a3a; padding: 8px 12px; }
figure { margin: 14px 0 18px; }
figcaption, .caption { color: var(--muted); font-size: 13.5px; margin-top: 4px; max-width: 900px; }
.fig-title { color: var(--ink); font-weight: 600; }
svg.chart { display: block; max-width: 100%; height: auto; font-family: inherit; overflow: visible; }
.fig-row { display: flex; flex-wrap: wrap; gap: 10px 28px; align-items: flex-start; }
.fig-row figure { margin: 8px 0; }
.attention-figure figcaption { max-width: 300px; }
.probe-line { margin: 4px 0 6px; }
.tokens { display: inline-flex; flex-wrap: wrap; gap: 2px; vertical-align: middle; }
.tok { display: inline-block; min-width: 1.5em; text-align: center; padding: 0 3px; border: 1px solid var(--rule);
  border-radius: 4px; background: var(--soft); font-family: ui-monospace, Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: 13px; }
.tok.wrong { background: #fbe0e0; border-color: #d66; color: #a11; font-weight: 600; }
.swatch { display: inline-block; width: 11px; height: 11px; border-radius: 2px; margin-right: 6px; vertical-align: baseline; }
.table-wrap { overflow-x: auto; margin: 8px 0 12px; }
table { border-collapse: collapse; font-size: 13.5px; font-variant-numeric: tabular-nums; }
th, td { padding: 3px 9px; border-bottom: 1px solid var(--rule); text-align: left; white-space: nowrap; }
th { background: var(--soft); font-weight: 600; font-size: 12.5px; color: #38414a; }
td.num { text-align: right; }
tbody tr:nth-child(even) { background: #fafbfc; }
table.run td, table.shards td { white-space: normal; overflow-wrap: anywhere; max-width: 820px; }
.na { color: #9aa3ad; }
details { margin: 6px 0 14px; }
summary { cursor: pointer; color: var(--accent); font-size: 14px; }
.config-groups { display: flex; flex-wrap: wrap; gap: 0 24px; align-items: flex-start; }
.intro { max-width: 900px; }
footer { margin-top: 48px; color: var(--muted); font-size: 12.5px; border-top: 1px solid var(--rule); padding-top: 10px; }
)css";

// A section that cannot be drawn (a file of an unexpected shape) says so instead of
// taking the whole report down with it.
std::string guarded(const char* name, const std::function<std::string()>& build) {
  try {
    return build();
  } catch (const std::exception& error) {
    return html::element("section", "",
                         html::text_element("p", " class=\"error\"",
                                            std::string("The ") + name + " section could not be drawn: " + error.what()));
  }
}

// A study file, plain or gzipped (util/gzip_files.h: path ending in .gz).
json read_json_file(const fs::path& path) {
  const std::string text = file_read_stored(path.string());
  try {
    return json::parse(text);
  } catch (const json::parse_error& error) {
    throw std::runtime_error(path.string() + " is not valid JSON: " + error.what());
  }
}

// The study file `name` in `dir`, plain or gzipped beside; null when neither is there.
json read_optional(const fs::path& dir, const std::string& name) {
  const std::string path = stored_file(dir.string(), name);
  return path.empty() ? json() : read_json_file(path);
}

// A study file through its typed record (records/); throws naming the file and how to mend it.
template <typename Record>
Record record_read(const fs::path& path) {
  const json file = read_json_file(path);
  try {
    return file.get<Record>();
  } catch (const json::exception& error) {
    throw std::runtime_error(path.string() + " is not of its record's shape (" + error.what() +
                             "); collect the study again from its members (copytask report on the folder), "
                             "or restore the file");
  }
}

// record_read of the study file `name` in `dir`, plain or gzipped, that may be missing: empty then.
template <typename Record>
std::optional<Record> optional_record_read(const fs::path& dir, const std::string& name) {
  const std::string path = stored_file(dir.string(), name);
  if (path.empty()) return std::nullopt;
  return record_read<Record>(path);
}

// metrics.jsonl, one object per line. A last line without its newline is what a crash
// mid-append leaves (the file is append-only); it is skipped, any other bad line is an error.
std::vector<MetricsLine> read_metrics(const fs::path& dir) {
  std::vector<MetricsLine> lines;
  const std::string path = stored_file(dir.string(), "metrics.jsonl");
  if (path.empty()) return lines;
  const std::string text = file_read_stored(path);
  size_t start = 0, number = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    const bool complete = end != std::string::npos;
    if (!complete) end = text.size();
    const std::string line = text.substr(start, end - start);
    ++number;
    start = end + 1;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    json parsed;
    try {
      parsed = json::parse(line);
    } catch (const json::parse_error& error) {
      if (!complete) break;  // a line being appended while the report is written
      throw std::runtime_error(path + " line " + std::to_string(number) + " is not valid JSON: " + error.what());
    }
    try {
      lines.push_back(parsed.get<MetricsLine>());
    } catch (const json::exception& error) {
      throw std::runtime_error(path + " line " + std::to_string(number) + " is not a metrics line (" +
                               error.what() + "); delete the line or the file, and collect the study again");
    }
  }
  return lines;
}
}  // namespace

std::string report_html(const ReportInputs& inputs) {
  const report::StudyView view(inputs);
  std::string body = guarded("overview", [&] { return report::section_overview(view); });
  body += guarded("accuracy", [&] { return report::section_accuracy(view); });
  body += guarded("training curves", [&] { return report::section_curves(view); });
  body += guarded("content length", [&] { return report::section_by_length(view); });
  body += guarded("length generalization", [&] { return report::section_length_generalization(view); });
  body += guarded("why", [&] { return report::section_why(view); });
  body += guarded("attention", [&] { return report::section_attention(view); });
  body += guarded("positional", [&] { return report::section_positional(view); });
  body += guarded("metadata", [&] { return report::section_metadata(view); });
  std::string generator = "Written by copytask";
  if (inputs.run && !inputs.run->version.empty()) generator += " " + inputs.run->version;
  generator += ". A self-contained page: no scripts, nothing loaded from elsewhere. Hover over a mark for its numbers.";
  body += html::text_element("footer", "", generator);

  const std::string title = "copytask study report" + (inputs.study.empty() ? "" : ": " + inputs.study);
  return "<!DOCTYPE html>\n" +
         html::element("html", " lang=\"en\"",
                       html::element("head", "",
                                     "<meta charset=\"utf-8\">"
                                     "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">" +
                                         html::text_element("title", "", title) +
                                         html::element("style", "", kStyle)) +
                           html::element("body", "", html::element("main", "", body))) +
         "\n";
}

void report_html_write(const std::string& study_dir, const std::string& out_file) {
  const fs::path dir(study_dir);
  const fs::path config = dir / "config.json";
  if (!fs::exists(config))
    throw std::runtime_error(config.string() + " not found: is " + study_dir + " a study folder (what train or compare wrote)?");
  ReportInputs inputs;
  inputs.study = study_dir;
  inputs.config = read_json_file(config);
  inputs.run = optional_record_read<RunInfo>(dir, "run.json");
  inputs.results = optional_record_read<StudyResults>(dir, "results.json");
  inputs.attention = read_optional(dir, "attention.json");
  inputs.positional = optional_record_read<PositionalStudy>(dir, "positional.json");
  inputs.metrics = read_metrics(dir);
  if (fs::is_directory(dir / "shards")) {
    std::vector<fs::path> shards;
    for (const auto& entry : fs::directory_iterator(dir / "shards"))
      if (entry.is_regular_file() && entry.path().extension() == ".json") shards.push_back(entry.path());
    std::sort(shards.begin(), shards.end());
    for (const auto& shard : shards) inputs.shard_runs.push_back(record_read<RunInfo>(shard));
  }
  file_write_atomic(out_file, report_html(inputs));
}

}  // namespace copytask
