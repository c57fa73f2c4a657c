#include "cli/progress_line.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "util/log.h"

namespace copytask {
namespace {

using Clock = std::chrono::steady_clock;

std::string test_exact_text(const EvaluationProgress& evaluation) {
  std::string line;
  for (const auto& [name, exact] : evaluation.test_exact)
    line += text_format("{}{} {:.3f}", line.empty() ? "" : ", ", name, exact);
  return line;
}

// The live line of one batch: step, mean loss, rate, time left and the latest evaluation.
class ProgressLine {
 public:
  void update(const StepProgress& progress) {
    if (progress.batch.index != batch_ || !started_) restart(progress.batch.index);
    const auto now = Clock::now();
    const int64_t steps = progress.batch.steps;
    if (progress.step != steps && now - last_ < std::chrono::milliseconds(100)) return;
    last_ = now;
    const double elapsed = std::chrono::duration<double>(now - start_).count();
    const double rate = progress.step / std::max(elapsed, 1e-9);
    const std::string label = "[" + std::to_string(progress.batch.index + 1) + "/" + std::to_string(progress.batch.count) + "]";
    std::fprintf(stderr, "\r%s step %lld/%lld  loss %.4f  %.1f steps/s  eta %.0fs  %s   ", label.c_str(),
                 static_cast<long long>(progress.step), static_cast<long long>(steps),
                 progress.member_loss->mean().item<double>(), rate, (steps - progress.step) / std::max(rate, 1e-9),
                 evaluation_.c_str());
    if (progress.step == steps) std::fprintf(stderr, "\n");
    std::fflush(stderr);
  }
  void evaluated(const EvaluationProgress& evaluation) {
    if (evaluation.batch.index != batch_ || !started_) restart(evaluation.batch.index);
    evaluation_ = "test exact: " + test_exact_text(evaluation);
  }

 private:
  void restart(size_t batch) {
    batch_ = batch;
    started_ = true;
    start_ = Clock::now();
    last_ = {};
    evaluation_.clear();
  }
  bool started_ = false;
  size_t batch_ = 0;
  Clock::time_point start_, last_{};
  std::string evaluation_;
};

void log_evaluation(const EvaluationProgress& evaluation) {
  log_info("step {}/{} ({:.1f}s) test exact: {}", evaluation.step, evaluation.batch.steps, evaluation.seconds,
               test_exact_text(evaluation));
}

}  // namespace

StudyProgress study_progress_printer(bool terminal) {
  StudyProgress progress;
  if (!terminal) {
    progress.on_evaluation = log_evaluation;
    return progress;
  }
  auto line = std::make_shared<ProgressLine>();
  progress.on_step = [line](const StepProgress& step) { line->update(step); };
  // On a terminal the live line shows each evaluation; the log keeps the batch's last.
  progress.on_evaluation = [line](const EvaluationProgress& evaluation) {
    line->evaluated(evaluation);
    if (evaluation.step == evaluation.batch.steps) log_evaluation(evaluation);
  };
  return progress;
}

}  // namespace copytask
