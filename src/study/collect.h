#pragma once
// Collecting a study: its complete members (study/member_files.h), trained by any number of
// shards or reruns, become the study's files, each rewritten whole:
//   results.json     per scheme: runs, summaries; plus "scheme_order" and "complete"
//                    {"runs", "expected", "missing": ["rope/seed-3", ...]} (records/study_results.h)
//   results.csv      the same runs, one tidy row per number (records/results_csv.h)
//   attention.json   {"probes", "inputs", "schemes": {name: {"seeds", "causal",
//                     "probes": [{"attention": [member][layer][head][T][T], "output": [member][T]}]}}}
//   positional.json  {"context", "schemes": {name: {"positional", "causal", "runs": [member entries]}}}
//                    (records/positional_record.h)
//   metrics.jsonl    every member's evaluations, scheme by scheme, seed by seed (records/metrics_line.h)
//   report.html      the report of all of it (report/html_report.h)
#include <string>

#include <nlohmann/json.hpp>

namespace copytask {

// Returns results.json's content. Throws ConfigError when the folder holds no study.json.
nlohmann::json study_collect(const std::string& study_dir);

}  // namespace copytask
