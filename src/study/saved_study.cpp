#include "study/saved_study.h"

#include <filesystem>

#include "util/atomic_files.h"
#include "study/member_files.h"
#include "train/checkpoint.h"

namespace copytask {
namespace fs = std::filesystem;

SavedStudy saved_study_open(const std::string& dir) {
  const fs::path manifest_path = fs::path(dir) / "study.json";
  if (!fs::is_directory(dir)) throw ConfigError(dir + ": no such folder; give a study's output folder");
  if (!fs::exists(manifest_path))
    throw ConfigError(dir + " holds no study.json: it is not a copytask study folder "
                      "(give the folder that train or compare printed as \"output folder\")");
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(file_read(manifest_path.string()));
  } catch (const std::exception& error) {
    throw ConfigError(manifest_path.string() + " is unreadable or not JSON (" + std::string(error.what()).substr(0, 160) + ")");
  }
  SavedStudy study;
  study.dir = dir;
  study.schemes = study_arms_from_manifest(manifest);
  try {
    study.base = config_from_json(manifest.at("config"));
  } catch (const nlohmann::json::exception& error) {
    throw ConfigError(manifest_path.string() + " has no usable \"config\" (" + error.what() + ")");
  }
  return study;
}

std::vector<StudyMember> saved_members(const SavedStudy& study) {
  std::vector<StudyMember> complete;
  for (const auto& member : study_members(study.schemes))
    if (member_complete(study.dir, member.arm->name, member.seed)) complete.push_back(member);
  return complete;
}

StudyMember saved_member_find(const SavedStudy& study, const std::string& name) {
  const std::vector<StudyMember> members = saved_members(study);
  std::string names;
  for (const auto& member : members) {
    const std::string full = member.name();
    const std::string short_name = member.arm->name + "/" + std::to_string(member.seed);
    if (name == full || name == short_name || name == member.arm->name) return member;
    names += (names.empty() ? "" : ", ") + full;
  }
  if (members.empty()) throw ConfigError(name + ": " + study.dir + " has no complete member yet; train the study first");
  throw ConfigError(name + ": no such complete member; members: " + names);
}

Encoder saved_batch_load(const SavedStudy& study, const std::vector<StudyMember>& batch, const torch::Device& device) {
  // Built on the device (its fixed tables live there too); the saved values replace the init.
  Encoder model(encoder_shape_of(batch.front().arm->config), study_batch_specs(batch), device);
  for (size_t m = 0; m < batch.size(); ++m)
    checkpoint_load(model, static_cast<int64_t>(m),
                    (fs::path(member_dir(study.dir, batch[m].arm->name, batch[m].seed)) / "model.pt").string());
  return model;
}

}  // namespace copytask
