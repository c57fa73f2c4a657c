#pragma once
// What the report is drawn from: the study folder's files, read (html_report.h) and handed
// to every section (report_sections.h).
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "records/metrics_line.h"
#include "records/positional_record.h"
#include "records/run_info.h"
#include "records/study_results.h"

namespace copytask {

// The study files, parsed. A missing optional file is a null json, an empty optional or an
// empty vector. Each study file through its typed record (records/); config.json and
// attention.json, and the parts of a record kept as JSON (results.json's summaries, a
// run's per-length entries, a member's positional analysis), read defensively by each
// section: an unexpected shape there gives a note, never a failed page.
struct ReportInputs {
  std::string study;  // the study folder as the report was asked for it: the page's title
  nlohmann::json config, attention;
  std::optional<StudyResults> results;
  std::optional<PositionalStudy> positional;
  std::optional<RunInfo> run;
  std::vector<RunInfo> shard_runs;
  std::vector<MetricsLine> metrics;
};

}  // namespace copytask
