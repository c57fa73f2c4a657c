#pragma once
// One batch of a study: what every batch shares (the task's data on the device, the
// length sets, the probes), and training a batch of members into their folders.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "records/run_info.h"
#include "study/study_plan.h"
#include "train/trainer.h"

namespace copytask {

// What the batches of one task train and are probed on (schemes may change the task keys of
// scheme scope, config/config_fields.cpp, and not eval.* or report.*; a study prepares one per task).
struct StudyInputs {
  TrainData data;                 // train/test splits and the length sets, on the device
  nlohmann::json probe_inputs;    // [P][T] the probes' full inputs (<copy> and padding added)
  nlohmann::json probe_targets;   // [P][T] what each should output, under the task's kind
  torch::Tensor probe_tensor;     // (P, T) the same, on the device
  int64_t probe_count = 0;
  int64_t context = 0;            // T
};
// Generates the task of `config` (its task.*, eval.* and report.probes) and the length
// sets (under eval.inputs = per-seed, one per seed of `seeds`: the seeds of the members
// these inputs serve) and uploads them; logs what they hold.
StudyInputs study_inputs_prepare(const Config& config, const std::vector<int64_t>& seeds, const c10::Device& device);

// Trains one batch (members that share a config but their scheme and seed) and writes
// each member's folder (study/member_files.h), result.json last. Returns the batch's
// record for run.json.
BatchRecord study_batch_train(const std::vector<StudyMember>& batch, const BatchPosition& position,
                              const StudyInputs& inputs, const std::string& study_dir, const StudyOptions& options);

}  // namespace copytask
