#pragma once
// A study: schemes x seeds trained on one shared copy task, written to one folder
// (DESIGN.md section 5): config.json, run.json, results.json, attention.json,
// metrics.jsonl and checkpoints/<scheme>.pt. Schemes whose configs differ only in the
// positional scheme, the causal flag and the seeds train together as one batch of members.
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "model/member.h"

namespace copytask {

struct StudyScheme {
  std::string name;
  Config config;  // validated
  nlohmann::json overrides = nlohmann::json::object();  // what makes it from the base config
};

struct StudyOptions {
  std::string out_dir;
  std::string command_line;  // recorded in run.json
  c10::Device device{c10::kCPU};
  int threads = 1;
  bool progress_line = false;  // a live progress line on stderr (a terminal)
};

// `train`: the base config's own scheme (named e.g. "rope" or "alibi+causal").
std::vector<StudyScheme> study_schemes_for_train(const Config& config);
// `compare`: every compare.schemes entry applied to the base; throws ConfigError.
std::vector<StudyScheme> study_schemes_for_compare(const Config& config);

// The batches a study trains, in the order the schemes were listed: schemes whose configs
// differ only in model.positional, model.causal and train.seeds share a batch.
std::vector<std::vector<const StudyScheme*>> study_batches(const std::vector<StudyScheme>& schemes);

// The members of a batch: each scheme's seeds, scheme by scheme.
std::vector<MemberSpec> study_batch_members(const std::vector<const StudyScheme*>& batch);

// Throws ConfigError when `out_dir` already holds a study (nothing finished is overwritten).
void study_check_out_dir(const std::string& out_dir);

// Runs the study and returns results.json's content. Writes run.json with status
// "interrupted" or "failed" before rethrowing when it stops early; results of the batches
// that finished are kept.
nlohmann::json study_run(const Config& base, const std::vector<StudyScheme>& schemes, const StudyOptions& options);

}  // namespace copytask
