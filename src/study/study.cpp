#include "study/study.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <unistd.h>

#include "util/log.h"

#include "model/positional.h"
#include "util/atomic_files.h"
#include "study/collect.h"
#include "study/member_files.h"
#include "study/study_batch.h"
#include "study/study_record.h"
#include "train/interrupt.h"
#include "train/step_factory.h"

namespace copytask {
namespace fs = std::filesystem;

namespace {

// Schemes that may share a batch: equal configs once the per-member keys are removed, and
// the same training steps that can run their schemes (model/positional.h, StepSupport), so
// that a member never trains on a slower step because of a neighbour that needs it (and its
// numbers never depend on its neighbours).
std::string batch_key(const Config& config) {
  nlohmann::json j = config_to_json(config);
  j["steps"] = positional_steps(config.model.positional, config.model.positional_options);
  j["model"].erase("positional");
  j["model"].erase("causal");
  for (const auto& key : positional_option_keys()) j["model"].erase(key);
  j["train"].erase("seeds");
  j.erase("compare");
  j.erase("report");
  return j.dump();
}

// A config as study.json compares it on a rerun: read back as a config (so keys a newer
// copytask added hold their defaults, as they did for the run that wrote it), without the
// keys that may differ between the machines that train one study.
nlohmann::json comparable(nlohmann::json config) {
  try {
    config = config_to_json(config_from_json(config));
  } catch (const std::exception&) {
    // Not a config this copytask reads: compared as it is, so it differs.
  }
  if (config.is_object() && config.contains("train")) {
    config["train"].erase("device");
    config["train"].erase("threads");
  }
  return config;
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

void study_check_out_dir(const std::string& out_dir, const nlohmann::json& manifest) {
  if (fs::exists(out_dir) && !fs::is_directory(out_dir))
    throw ConfigError(out_dir + " exists and is not a folder; choose another path");
  const fs::path manifest_path = fs::path(out_dir) / "study.json";
  if (fs::exists(manifest_path)) {
    nlohmann::json existing;
    try {
      existing = nlohmann::json::parse(file_read(manifest_path.string()));
    } catch (const std::exception& error) {
      throw ConfigError(out_dir + ": its study.json is unreadable (" + std::string(error.what()).substr(0, 120) +
                        "); choose another folder");
    }
    // The same study may be resumed; another one would mix results.
    nlohmann::json a = manifest, b = existing;
    for (auto* m : {&a, &b}) {
      if (!m->contains("schemes") || !m->contains("config")) continue;
      (*m)["config"] = comparable((*m)["config"]);
      for (auto& scheme : (*m)["schemes"])
        if (scheme.contains("config")) scheme["config"] = comparable(scheme["config"]);
    }
    if (a != b) {
      std::string differences;
      if (b.contains("config")) {
        const auto patch = nlohmann::json::diff(b["config"], a["config"]);
        for (size_t i = 0; i < patch.size() && i < 5; ++i) {
          std::string path = patch[i].value("path", "");
          std::replace(path.begin(), path.end(), '/', '.');
          differences += (differences.empty() ? "" : ", ") + path.substr(1);
        }
      }
      if (a.value("command", "") != b.value("command", ""))
        differences += (differences.empty() ? "" : ", ") + std::string("the command (") + b.value("command", "?") + ")";
      if (differences.empty()) differences = "the scheme list";
      throw ConfigError(out_dir + " holds another study (it differs in " + differences +
                        "); rerun with that study's config (its config.json) to resume it, or choose another --out");
    }
    return;
  }
  if (fs::exists(fs::path(out_dir) / "results.json") || fs::exists(fs::path(out_dir) / "config.json"))
    throw ConfigError(out_dir + " holds results that are not a resumable study (no study.json); "
                      "choose another folder or remove it first");
  // The folder must be creatable and writable, or the study would fail only after training.
  // Found by doing it: create the folder (and its missing parents) and a file in it, then
  // remove what was made. (access() says yes to root on a read-only mount and on /proc or
  // /sys, where mkdir then fails.)
  const fs::path target = fs::absolute(out_dir);
  fs::path first_missing;  // the outermost folder of the path that does not exist yet
  for (fs::path p = target; !p.empty() && !fs::exists(p) && p != p.parent_path(); p = p.parent_path()) first_missing = p;
  std::string problem;
  std::error_code error;
  // A shard starting beside us may remove the empty folder it made (below) between our
  // creating it and our writing there: a probe that fails because the folder vanished
  // is tried again, not reported.
  for (int attempt = 0; attempt < 5; ++attempt) {
    problem.clear();
    fs::create_directories(target, error);
    if (error) {
      problem = error.message();
      break;
    }
    const fs::path probe = target / (".copytask-probe-" + std::to_string(::getpid()));
    try {
      file_write_atomic(probe.string(), "probe");
    } catch (const std::exception& write_error) {
      problem = write_error.what();
    }
    fs::remove(probe, error);
    if (problem.empty() || fs::exists(target)) break;
  }
  // Only the empty folders this made: a shard starting beside us may already write there.
  if (!first_missing.empty())
    for (fs::path p = target;; p = p.parent_path()) {
      fs::remove(p, error);  // removes a folder only when it is empty
      if (p == first_missing || p == p.parent_path()) break;
    }
  if (!problem.empty())
    throw ConfigError(out_dir + ": cannot create or write a folder there (" + problem +
                      "); choose a path on a writable disk");
}

void study_check_training_steps(const std::vector<StudyArm>& schemes, const c10::Device& device) {
  for (const auto& arm : schemes) {
    const std::string refusal = training_step_refusal(arm.config.train, device);
    if (refusal.empty()) continue;
    throw ConfigError(schemes.size() > 1 ? "compare scheme '" + arm.name + "': " + refusal : refusal);
  }
}

nlohmann::json study_run(const Config& base, const std::vector<StudyArm>& schemes, const StudyOptions& options) {
  const fs::path out(options.out_dir);
  fs::create_directories(out / "members");
  // Every shard writes the same content; the rename makes concurrent writes harmless.
  // study.json first: a shard starting beside us that finds config.json without it would
  // take the folder for a finished run that is not a study (study_check_out_dir).
  json_write_atomic((out / "study.json").string(), study_manifest(options.command, base, schemes));
  json_write_atomic((out / "config.json").string(), config_to_json(base));

  StudyRecord record(out, options);
  const std::vector<StudyMember> mine = shard_members(study_members(schemes), options.shard);
  std::vector<StudyMember> to_train;
  for (const auto& member : mine)
    if (!member_complete(options.out_dir, member.arm->name, member.seed)) to_train.push_back(member);
  record.start(static_cast<int64_t>(mine.size() - to_train.size()));
  if (to_train.size() < mine.size())
    log_info("{} of {} member(s) already complete in {}: skipped", mine.size() - to_train.size(), mine.size(),
                 options.out_dir);
  try {
    if (!to_train.empty()) {
      // One data set per task (kind and noise may differ between schemes; the batch key
      // holds the task, so a batch has one), made when its first batch comes.
      std::map<std::string, StudyInputs> inputs_by_task;
      const auto batches = study_batches(to_train);
      for (size_t b = 0; b < batches.size(); ++b) {
        const Config& config = batches[b].front().arm->config;
        const std::string task_key = config_to_json(config)["task"].dump();
        if (!inputs_by_task.count(task_key)) inputs_by_task.emplace(task_key, study_inputs_prepare(config, options.device));
        const BatchPosition position{b, batches.size(), config.train.steps};
        record.batch_trained(study_batch_train(batches[b], position, inputs_by_task.at(task_key), options.out_dir, options));
        // The study's files follow every batch (but the last: collected once the run is
        // recorded as finished), so a later failure keeps what finished.
        if (b + 1 < batches.size()) study_collect(options.out_dir);
      }
    }
  } catch (const Interrupted&) {
    record.finish("interrupted");
    // What the user needs next: the work is not lost, and where it is.
    throw Interrupted("interrupted; the finished members are kept in " + options.out_dir +
                      " (training the same study into it again resumes it)");
  } catch (const std::exception& error) {
    record.finish("failed", error.what());
    throw;
  }
  // Finished before the last collection, so the report shows how the run ended.
  record.finish("ok");
  return study_collect(options.out_dir);
}

}  // namespace copytask
