#pragma once
// A study folder opened again after training: its manifest (study.json), its complete
// members, and their models reloaded from model.pt, for `copytask eval` and `predict`.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "model/encoder.h"
#include "study/study_plan.h"

namespace copytask {

struct SavedStudy {
  std::string dir;
  Config base;
  std::vector<StudyArm> schemes;  // every scheme of the study, complete or not
};

// Throws ConfigError naming the folder when it is not a study (no or bad study.json).
SavedStudy saved_study_open(const std::string& dir);

// The study's complete members (those with a result.json), in the study's order.
std::vector<StudyMember> saved_members(const SavedStudy& study);

// The member a name names: "rope/seed-0", "rope/0", or "rope" (its first complete seed).
// Throws ConfigError listing the names that exist.
StudyMember saved_member_find(const SavedStudy& study, const std::string& name);

// A batch's model (study_batches) with every member's parameters loaded from its model.pt.
// Throws CheckpointError naming the file when one is missing or does not fit.
Encoder saved_batch_load(const SavedStudy& study, const std::vector<StudyMember>& batch, const torch::Device& device);

}  // namespace copytask
