#pragma once
// A member's scores from one evaluation, as plain numbers: what train/evaluate.h computes
// and report/results.h writes. Here, below both, so the report side builds without LibTorch.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace copytask {

// One split (train or test), every position of every example.
struct SplitScores {
  double loss = 0;   // mean cross-entropy over all N*T positions
  double exact = 0;  // fraction of examples with all T output tokens right
  double token = 0;  // fraction of the N*T output tokens right
  // exact match by content length k (index k; -1 where the split has no example of that length)
  std::vector<double> exact_by_length;
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
