#pragma once
// The plan of a study: its arms (schemes x grid points, each with its resolved config), its
// members (arm x seed, in the study's fixed order), a shard's share of them, the batches
// they train in, the options of a run, and study.json, the manifest that names it all.
// What a run does with the plan is study/study.h; the checks before any work,
// study/study_checks.h.
#include <string>
#include <vector>

#include <c10/core/Device.h>
#include <nlohmann/json.hpp>

#include "config/config.h"
#include "model/member.h"
#include "study/study_progress.h"

namespace copytask {

// An arm of a study: one entry of compare.schemes at one grid point (or train's one
// scheme), with its resolved config. Its name (e.g. "alibi+causal", "rope@model.heads=2")
// is what the files call a "scheme"; the positional method it uses is
// config.model.positional. (In the code, "scheme" is the positional method only.)
struct StudyArm {
  std::string name;
  Config config;  // validated
  nlohmann::json overrides = nlohmann::json::object();  // what makes it from the base config
};

// One model to train: an arm and one of its seeds; `index` is its place in the study's
// fixed order (arm by arm, seed by seed), which decides its shard.
struct StudyMember {
  const StudyArm* arm = nullptr;
  int64_t seed = 0;
  int64_t index = 0;
  std::string name() const;  // "rope/seed-0"
};

// `--shard i/n`: this invocation trains the members whose index % n == i - 1.
struct Shard {
  int64_t index = 1, count = 1;
  bool whole() const { return count == 1; }
  std::string str() const { return std::to_string(index) + "/" + std::to_string(count); }
};

struct StudyOptions {
  std::string command = "compare";  // train | compare
  std::string out_dir;
  std::string command_line;  // recorded in run.json
  c10::Device device{c10::kCPU};
  int threads = 1;
  StudyProgress progress;  // where progress goes (src/cli/ prints it); none by default
  Shard shard;
};

// `train`: the base config's own scheme (named e.g. "rope" or "alibi+causal").
std::vector<StudyArm> study_arms_for_train(const Config& config);
// `compare`: every compare.schemes entry applied to the base, crossed with compare.grid
// (names like "alibi@model.heads=2"); throws ConfigError naming the scheme and grid point.
std::vector<StudyArm> study_arms_for_compare(const Config& config);

// Every member of the study, scheme by scheme, seed by seed.
std::vector<StudyMember> study_members(const std::vector<StudyArm>& schemes);
// The members of one shard.
std::vector<StudyMember> shard_members(const std::vector<StudyMember>& members, const Shard& shard);

// The batches that train `members`, in order: members whose configs differ only in
// model.positional, model.causal and the seed share a batch.
std::vector<std::vector<StudyMember>> study_batches(const std::vector<StudyMember>& members);
// A batch's member specs, for the encoder.
std::vector<MemberSpec> study_batch_specs(const std::vector<StudyMember>& batch);

// study.json: what the folder's study is (command, base config, every scheme's config), so
// collect, eval and predict can read it without the command line that made it.
nlohmann::json study_manifest(const std::string& command, const Config& base, const std::vector<StudyArm>& schemes);
// The schemes of a study folder's study.json; throws ConfigError when it is missing or bad.
std::vector<StudyArm> study_arms_from_manifest(const nlohmann::json& manifest);

}  // namespace copytask
