#pragma once
// A study's results.csv: results.json as one tidy row per (arm, scheme, seed, task kind,
// length, metric, value), the long form pandas, R and seaborn read directly
// (docs/output-files.md names every metric).
#include <cstdint>
#include <string>
#include <vector>

#include "records/study_results.h"

namespace copytask {

struct TidyRow {
  std::string arm;     // the arm's name ("alibi+causal")
  std::string scheme;  // its positional scheme (model.positional: "alibi")
  bool causal = false;
  int64_t seed = 0;
  std::string task;    // task.kind
  int64_t length = -1; // content length k; -1 (an empty cell) for a number over the whole split
  std::string metric;
  double value = 0;
};

// The columns, in the file's order.
inline const char* const kResultsCsvHeader = "arm,scheme,causal,seed,task,length,metric,value";

// Every run's numbers in the arms' order, then seed order: the whole-split numbers
// (test_exact, test_token, train_exact, train_token, final_loss, test_loss), the test split
// by length (test_exact_by_length), the length-generalization sets (length_exact,
// length_token) and each of RoPE's rescalings (length_exact_<method>, length_token_<method>);
// a length a member could not be evaluated at has no row.
std::vector<TidyRow> results_tidy_rows(const StudyResults& results);

// The header line and one line per row; a text field with a comma, quote or line break is
// quoted (RFC 4180); numbers in the shortest form that reads back to the same double.
std::string results_csv(const std::vector<TidyRow>& rows);

}  // namespace copytask
