#pragma once
// The checks a study passes before any work (docs/design.md: bad input stops before any
// work): the output folder, the machine's memory, the training step each arm asks for.
// Each throws ConfigError saying what to change.
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "study/study_plan.h"

namespace copytask {

// Checks `out_dir` before any work: a new folder (creatable and writable), or one that
// holds the same study (then the run resumes it). Throws ConfigError otherwise, naming the
// keys that differ; the message starts with the folder (the command line says which option). train.device and train.threads may differ (shards on other machines).
void study_check_out_dir(const std::string& out_dir, const nlohmann::json& manifest);

// Checks before any work that this shard's study fits the machine: the memory of the data
// and of its largest batch (train/memory_estimate.h) against the host's available memory
// (and a GPU's free memory). Throws ConfigError with the estimate, the machine's memory and
// what to change when it does not fit.
void study_check_memory(const std::vector<StudyArm>& schemes, const Shard& shard, const c10::Device& device);

// Checks before any work that every arm's train.step can train on `device` (the fused step
// cannot on a GPU): throws ConfigError naming the scheme (when there are several), the key
// and what to set instead.
void study_check_training_steps(const std::vector<StudyArm>& schemes, const c10::Device& device);

}  // namespace copytask
