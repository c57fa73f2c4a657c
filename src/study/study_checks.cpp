#include "study/study_checks.h"

#include <filesystem>

#include <unistd.h>

#include "train/step_factory.h"
#include "util/atomic_files.h"

namespace copytask {
namespace fs = std::filesystem;

namespace {

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

}  // namespace copytask
