#pragma once
// The HTML report of a study (docs/design.md section 5, `copytask report`): one self-contained
// page, inline SVG only (no scripts, no network, no external CSS or fonts), with the
// accuracy per scheme and seed, the training curves, exact-match by content length, the
// attention maps of the probes, the positional encodings, and the config and run metadata.
#include <string>

#include "report/report_inputs.h"

namespace copytask {

// Reads the study files in `study_dir` (config.json, run.json, results.json, metrics.jsonl,
// attention.json, positional.json, shards/*.json) and writes the report to `out_file`
// atomically. Throws std::runtime_error naming the file when config.json is missing, a
// file is not valid JSON, or a study file (or a metrics line) is not of its record's
// shape. Other files may be missing: their sections say "not recorded".
void report_html_write(const std::string& study_dir, const std::string& out_file);

// The page as a string from already-parsed inputs (for unit tests).
std::string report_html(const ReportInputs& inputs);

}  // namespace copytask
