#include "study/study_plan.h"

#include <map>

#include "compat/torch_compat.h"
#include "model/fused_gpu.h"
#include "model/positional.h"
#include "train/step_factory.h"

namespace copytask {

namespace {

// Schemes that may share a batch: equal configs once the per-member keys are removed, and
// the same training steps that can run their schemes (model/positional.h, StepSupport; and
// where the fused GPU step trains, whether its kernels can run them), so that a member never
// trains on a slower step because of a neighbour that needs it (and its numbers never depend
// on its neighbours).
std::string batch_key(const Config& config) {
  nlohmann::json j = config_to_json(config);
  j["steps"] = positional_steps(config.model.positional, config.model.positional_options);
  // On the fused GPU step, the members its kernels can run apart from those that fall back to
  // the device step (model/fused_gpu.h), on the study's device as the commands resolve it
  // (they refuse train.device = cuda without a GPU before any plan is made).
  if (fused_gpu_step_chosen(config.train.step, device_resolve(config.train.device).is_cuda()))
    j["fused_gpu"] = fused_gpu_scheme_problem(config.model.positional, config.model.positional_options,
                                              encoder_shape_of(config), config.model.causal)
                         .empty();
  j["model"].erase("positional");
  j["model"].erase("causal");
  for (const auto& key : positional_option_keys()) j["model"].erase(key);
  j["train"].erase("seeds");
  j.erase("compare");
  j.erase("report");
  return j.dump();
}

}  // namespace

std::string StudyMember::name() const { return arm->name + "/seed-" + std::to_string(seed); }

std::vector<StudyArm> study_arms_for_train(const Config& config) {
  nlohmann::json overrides = {{"model.positional", config.model.positional}, {"model.causal", config.model.causal}};
  return {StudyArm{scheme_name_of(config.model), config, overrides}};
}

std::vector<StudyArm> study_arms_for_compare(const Config& config) {
  std::vector<StudyArm> schemes;
  const std::vector<nlohmann::json> points = grid_combinations(config.compare.grid);
  for (const auto& spec : config.compare.schemes) {
    for (const auto& point : points) {
      SchemeSpec at_point = spec;
      at_point.name = grid_point_name(spec.name, point);
      for (const auto& item : point.items()) at_point.overrides[item.key()] = item.value();
      schemes.push_back({at_point.name, config_for_scheme(config, at_point), at_point.overrides});
    }
  }
  return schemes;
}

std::vector<StudyMember> study_members(const std::vector<StudyArm>& schemes) {
  std::vector<StudyMember> members;
  for (const auto& scheme : schemes)
    for (int64_t seed : scheme.config.train.seeds)
      members.push_back({&scheme, seed, static_cast<int64_t>(members.size())});
  return members;
}

std::vector<StudyMember> shard_members(const std::vector<StudyMember>& members, const Shard& shard) {
  std::vector<StudyMember> mine;
  for (const auto& member : members)
    if (member.index % shard.count == shard.index - 1) mine.push_back(member);
  return mine;
}

std::vector<std::vector<StudyMember>> study_batches(const std::vector<StudyMember>& members) {
  std::vector<std::string> keys;
  std::map<std::string, std::vector<StudyMember>> by_key;
  for (const auto& member : members) {
    const std::string key = batch_key(member.arm->config);
    if (!by_key.count(key)) keys.push_back(key);
    by_key[key].push_back(member);
  }
  std::vector<std::vector<StudyMember>> batches;
  for (const auto& key : keys) batches.push_back(by_key[key]);
  return batches;
}

std::vector<MemberSpec> study_batch_specs(const std::vector<StudyMember>& batch) {
  std::vector<MemberSpec> specs;
  for (const auto& member : batch)
    specs.push_back(MemberSpec{member.arm->name, member.seed, member.arm->config.model.positional,
                               member.arm->config.model.causal, member.arm->config.model.positional_options});
  return specs;
}

nlohmann::json study_manifest(const std::string& command, const Config& base, const std::vector<StudyArm>& schemes) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& scheme : schemes)
    list.push_back({{"name", scheme.name}, {"overrides", scheme.overrides}, {"config", config_to_json(scheme.config)}});
  return {{"command", command}, {"config", config_to_json(base)}, {"schemes", list}};
}

std::vector<StudyArm> study_arms_from_manifest(const nlohmann::json& manifest) {
  std::vector<StudyArm> schemes;
  try {
    for (const auto& entry : manifest.at("schemes")) {
      Config config = config_from_json(entry.at("config"));
      config_validate(config);
      schemes.push_back({entry.at("name").get<std::string>(), config, entry.at("overrides")});
    }
  } catch (const nlohmann::json::exception& error) {
    throw ConfigError(std::string("study.json is not a copytask study manifest (") + error.what() + ")");
  }
  if (schemes.empty()) throw ConfigError("study.json lists no schemes");
  return schemes;
}

}  // namespace copytask
