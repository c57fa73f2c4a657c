#pragma once
// A member's scores from one evaluation, as plain numbers: what train/evaluate.h computes
// and report/results.h writes. Here, below both, so the report side builds without LibTorch.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

namespace copytask {

// A mean of the measurements of why over an evaluation's outputs (at most a few hundred a
// length) or over seeds, as the records keep it: 6 significant digits. The float32
// measurements' digits past those carry no information, and a study's files of per-block,
// per-head numbers at every evaluation and length were two thirds digits.
inline constexpr int kMeasurementDigits = 6;
inline double measurement_rounded(double value) {
  if (!std::isfinite(value) || value == 0) return value;
  char text[32];
  std::snprintf(text, sizeof text, "%.*g", kMeasurementDigits, value);
  return std::strtod(text, nullptr);
}

// One split (train or test), every position of every example.
struct SplitScores {
  double loss = 0;   // mean cross-entropy over all N*T positions
  double exact = 0;  // fraction of examples with all T output tokens right
  double token = 0;  // fraction of the N*T output tokens right
  // exact match by content length k (index k; -1 where the split has no example of that length)
  std::vector<double> exact_by_length;
  int64_t examples = 0;  // N: the split's inputs
};

// One content length k of the length-generalization sets, over the copy's k positions
// only; exact and token NaN with `skipped` saying why where the member cannot run there.
struct LengthScores {
  int64_t length = 0, context = 0, count = 0;
  bool trained = false;
  double exact = 0, token = 0;
  std::string skipped;
  // Why it copies or fails, over the k outputs of every example (empty where skipped):
  std::vector<double> token_by_output;                // [j] share of output j right
  std::vector<std::vector<double>> source_attention;  // [block][head] mean weight an output row puts on its source
  std::vector<std::vector<double>> entropy;           // [block][head] mean entropy (nats) of the output rows
  std::vector<std::pair<std::string, double>> errors; // {kind, share of the outputs wrong so} (task/output_errors.h)
};

}  // namespace copytask
