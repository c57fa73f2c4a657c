#include "study/collect.h"

#include <filesystem>

#include "config/config.h"
#include "report/files.h"
#include "report/html_report.h"
#include "report/results.h"
#include "study/member_files.h"
#include "study/study.h"

namespace copytask {
namespace fs = std::filesystem;

nlohmann::json study_collect(const std::string& study_dir) {
  const fs::path dir(study_dir);
  if (!fs::exists(dir / "study.json"))
    throw ConfigError(study_dir + " holds no study.json: it is not a copytask study folder (check the path)");
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(file_read((dir / "study.json").string()));
  } catch (const nlohmann::json::parse_error& error) {
    throw ConfigError((dir / "study.json").string() + " is not valid JSON (" + error.what() + ")");
  }
  // A folder of collected files without its members (an experiment's copy, its checkpoints
  // left behind) keeps its numbers: collecting no members would write empty files over
  // them. Only the page is written again, from those files.
  if (!fs::exists(dir / "members") && fs::exists(dir / "results.json")) {
    report_html_write(study_dir, (dir / "report.html").string());
    return nlohmann::json::parse(file_read((dir / "results.json").string()));
  }
  const std::vector<StudyArm> schemes = study_arms_from_manifest(manifest);
  const Config base = config_from_json(manifest.at("config"));

  nlohmann::json results = {{"schemes", nlohmann::json::object()}, {"scheme_order", nlohmann::json::array()}};
  nlohmann::json attention = {
      {"probes", base.report.probes}, {"inputs", nlohmann::json::array()}, {"schemes", nlohmann::json::object()}};
  nlohmann::json positional = {{"context", base.task.context}, {"schemes", nlohmann::json::object()}};
  std::string metrics;
  nlohmann::json missing = nlohmann::json::array();
  int64_t complete = 0, expected = 0;

  for (const auto& scheme : schemes) {
    results["scheme_order"].push_back(scheme.name);
    std::vector<RunRecord> runs;
    nlohmann::json seeds = nlohmann::json::array(), probes = nlohmann::json::array(), positional_runs = nlohmann::json::array();
    nlohmann::json scheme_inputs, scheme_targets;
    for (int64_t seed : scheme.config.train.seeds) {
      ++expected;
      if (!member_complete(study_dir, scheme.name, seed)) {
        missing.push_back(scheme.name + "/seed-" + std::to_string(seed));
        continue;
      }
      ++complete;
      const fs::path member(member_dir(study_dir, scheme.name, seed));
      try {
        runs.push_back(run_record_from_json(member_result_read(study_dir, scheme.name, seed)));
      } catch (const nlohmann::json::exception& error) {
        throw std::runtime_error((member / "result.json").string() + " lacks a field (" + error.what() +
                                 "); delete that member's folder and rerun the study to train it again");
      }
      seeds.push_back(seed);
      const nlohmann::json member_attention = member_json_read(study_dir, scheme.name, seed, "attention.json");
      if (attention["inputs"].empty()) attention["inputs"] = member_attention.at("inputs");
      if (scheme_inputs.is_null()) scheme_inputs = member_attention.at("inputs");
      if (scheme_targets.is_null()) scheme_targets = member_attention.value("targets", nlohmann::json());
      const auto& member_probes = member_attention.at("probes");
      for (size_t p = 0; p < member_probes.size(); ++p) {
        if (probes.size() <= p) probes.push_back({{"attention", nlohmann::json::array()}, {"output", nlohmann::json::array()}});
        probes[p]["attention"].push_back(member_probes[p].at("attention"));
        probes[p]["output"].push_back(member_probes[p].at("output"));
      }
      positional_runs.push_back(member_json_read(study_dir, scheme.name, seed, "positional.json"));
      if (fs::exists(member / "metrics.jsonl")) metrics += file_read((member / "metrics.jsonl").string());
    }
    if (runs.empty()) continue;
    nlohmann::json entry = scheme_results_json(runs);
    entry["positional"] = scheme.config.model.positional;
    entry["causal"] = scheme.config.model.causal;
    entry["overrides"] = scheme.overrides;
    results["schemes"][scheme.name] = entry;
    attention["schemes"][scheme.name] = {{"seeds", seeds}, {"causal", scheme.config.model.causal}, {"probes", probes}};
    // The scheme's own probe inputs and targets: its task's kind sets them (selective adds
    // noise, reverse reverses the target).
    if (!scheme_inputs.is_null()) attention["schemes"][scheme.name]["inputs"] = scheme_inputs;
    if (!scheme_targets.is_null()) attention["schemes"][scheme.name]["targets"] = scheme_targets;
    attention["schemes"][scheme.name]["task"] = scheme.config.task.kind;
    positional["schemes"][scheme.name] = {{"positional", scheme.config.model.positional},
                                          {"causal", scheme.config.model.causal},
                                          {"runs", positional_runs}};
  }
  results["complete"] = {{"runs", complete}, {"expected", expected}, {"missing", missing}};

  json_write_atomic((dir / "results.json").string(), results);
  json_write_atomic((dir / "attention.json").string(), attention);
  json_write_atomic((dir / "positional.json").string(), positional);
  file_write_atomic((dir / "metrics.jsonl").string(), metrics);
  report_html_write(study_dir, (dir / "report.html").string());
  return results;
}

}  // namespace copytask
