#pragma once
// Collecting a study: its complete members (study/member_files.h), trained by any number of
// shards or reruns, become the study's files, each rewritten whole:
//   results.json     per scheme: runs, summaries; plus "scheme_order" and "complete"
//                    {"runs", "expected", "missing": ["rope/seed-3", ...]}
//   attention.json   {"probes", "inputs", "schemes": {name: {"seeds", "causal",
//                     "probes": [{"attention": [member][layer][head][T][T], "output": [member][T]}]}}}
//   positional.json  {"context", "schemes": {name: {"positional", "causal", "runs": [member entries]}}}
//   metrics.jsonl    every member's evaluations, scheme by scheme, seed by seed
//   report.html      the report of all of it (report/html_report.h)
#include <string>

#include <nlohmann/json.hpp>

namespace copytask {

// Returns results.json's content. Throws ConfigError when the folder holds no study.json.
nlohmann::json study_collect(const std::string& study_dir);

}  // namespace copytask
