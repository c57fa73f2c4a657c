#pragma once
// The whole-split metrics: the numbers a member has for a whole split (test exact match,
// train loss, ...), in one list. Each row says its names in the files, the split it measures,
// how it is computed from that split's scores, how results.json summarizes it over seeds and
// its column head in the report; the record's to_json/from_json, results.json's summaries,
// results.csv, metrics.jsonl, eval's identical check and the report's run table all read the
// list. A new metric is one row here plus, where the scores lack it, its computation in the
// evaluation (records/scores.h's SplitScores, train/evaluate.cpp).
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "records/scores.h"

namespace copytask {

// How results.json summarizes a metric over seeds (report/stats.h).
enum class SplitSummary {
  share,        // a share of the split's inputs: summarize_share, its interval widened by the finite test's
  nonnegative,  // a plain summary, its interval clipped to [0, inf) (a loss)
  none,         // not summarized (each run keeps it)
};

struct SplitMetric {
  std::string name;       // its key in result.json and results.json (runs and summaries), its metric in results.csv
  std::string line_name;  // its key in metrics.jsonl, where the name there differs ("" = name)
  std::string split;      // "test" or "train": the split it is measured on
  std::string label;      // the report's column head
  SplitSummary summary = SplitSummary::share;
  // Every record since the first files has it: a file without it is refused (naming it). A
  // metric added later is optional: an older file without it reads as a record without it.
  bool required = false;
  std::function<double(const SplitScores&)> of;  // from the split's scores

  const std::string& line_key() const { return line_name.empty() ? name : line_name; }
};

// The list, in its order (results.csv's rows and the report's columns follow it).
const std::vector<SplitMetric>& split_metrics();

// A metric added to the list for as long as the scope lives, then removed: a test's own
// metric, seen in every file the list drives, without leaking into other tests.
class SplitMetricScope {
 public:
  explicit SplitMetricScope(SplitMetric metric);
  ~SplitMetricScope();
  SplitMetricScope(const SplitMetricScope&) = delete;
  SplitMetricScope& operator=(const SplitMetricScope&) = delete;

 private:
  std::string name_;
};

// Every metric of the list from a member's test and train scores, by name (or by line name).
std::map<std::string, double> split_metric_values(const SplitScores& test, const SplitScores& train,
                                                  bool line_names = false);

}  // namespace copytask
