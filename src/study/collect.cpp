#include "study/collect.h"

#include <filesystem>

#include "config/config.h"
#include "util/atomic_files.h"
#include "util/gzip_files.h"
#include "report/html_report.h"
#include "records/member_result.h"
#include "records/positional_record.h"
#include "records/results_csv.h"
#include "records/study_results.h"
#include "report/results.h"
#include "study/member_files.h"
#include "study/study_plan.h"

namespace copytask {
namespace fs = std::filesystem;

namespace {

nlohmann::json manifest_read(const fs::path& dir) {
  if (!fs::exists(dir / "study.json"))
    throw ConfigError(dir.string() + " holds no study.json: it is not a copytask study folder (check the path)");
  try {
    return nlohmann::json::parse(file_read((dir / "study.json").string()));
  } catch (const nlohmann::json::parse_error& error) {
    throw ConfigError((dir / "study.json").string() + " is not valid JSON (" + error.what() + ")");
  }
}

// A folder of collected files without its members (an experiment's copy, its checkpoints
// left behind) keeps its numbers: collecting no members would write empty files over them.
// Only what derives from results.json (saved_results, maybe gzipped) is written again:
// results.csv (gzipped beside a gzipped results.json) and the page.
nlohmann::json saved_study_rendered(const std::string& study_dir, const std::string& saved_results) {
  const fs::path dir(study_dir);
  // A file that cannot be read whole (not JSON, a gzip file cut short) is bad input: said
  // before anything is written over it.
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(file_read_stored(saved_results));
  } catch (const nlohmann::json::parse_error& error) {
    throw ConfigError(saved_results + " is not valid JSON (" + error.what() + "); restore the file");
  } catch (const std::runtime_error& error) {
    throw ConfigError(std::string(error.what()));
  }
  // results.csv is derived: written again from results.json (a folder from a copytask
  // before it gets one).
  std::string csv;
  try {
    csv = results_csv(results_tidy_rows(saved.get<StudyResults>()));
  } catch (const nlohmann::json::exception& error) {
    throw std::runtime_error(saved_results + " is not a study's results.json (" + error.what() +
                             "); collect the study from its members, or restore the file");
  }
  if (gzipped_path(saved_results))
    file_write_gzipped_atomic((dir / "results.csv.gz").string(), csv);
  else
    file_write_atomic((dir / "results.csv").string(), csv);
  report_html_write(study_dir, (dir / "report.html").string());
  return saved;
}

// What the study's files collect from its members.
struct Collected {
  StudyResults results;
  nlohmann::json attention;
  PositionalStudy positional;
  std::string metrics;  // every member's metrics.jsonl, one after another
};

// One arm's complete members into `into`: their runs and summaries, their probes' attention,
// their positional analyses and metrics lines; the missing ones counted.
void arm_collect(const std::string& study_dir, const StudyArm& scheme, Collected& into) {
  into.results.scheme_order.push_back(scheme.name);
  std::vector<RunRecord> runs;
  nlohmann::json seeds = nlohmann::json::array(), probes = nlohmann::json::array();
  std::vector<nlohmann::json> positional_runs;
  nlohmann::json scheme_inputs, scheme_targets;
  nlohmann::json& attention = into.attention;
  for (int64_t seed : scheme.config.train.seeds) {
    ++into.results.complete.expected;
    if (!member_complete(study_dir, scheme.name, seed)) {
      into.results.complete.missing.push_back(scheme.name + "/seed-" + std::to_string(seed));
      continue;
    }
    ++into.results.complete.runs;
    const fs::path member(member_dir(study_dir, scheme.name, seed));
    try {
      runs.push_back(member_result_read(study_dir, scheme.name, seed).get<MemberResult>().run);
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
    if (fs::exists(member / "metrics.jsonl")) into.metrics += file_read((member / "metrics.jsonl").string());
  }
  if (runs.empty()) return;
  SchemeResults& entry = into.results.schemes[scheme.name];
  entry.summaries = scheme_results_json(runs);
  entry.runs = std::move(runs);
  entry.positional = scheme.config.model.positional;
  entry.causal = scheme.config.model.causal;
  entry.task = scheme.config.task.kind;
  entry.format = scheme.config.task.format;
  entry.overrides = scheme.overrides;
  attention["schemes"][scheme.name] = {{"seeds", seeds}, {"causal", scheme.config.model.causal}, {"probes", probes}};
  // The scheme's own probe inputs and targets: its task's kind sets them (selective adds
  // noise, reverse reverses the target).
  if (!scheme_inputs.is_null()) attention["schemes"][scheme.name]["inputs"] = scheme_inputs;
  if (!scheme_targets.is_null()) attention["schemes"][scheme.name]["targets"] = scheme_targets;
  attention["schemes"][scheme.name]["task"] = scheme.config.task.kind;
  into.positional.schemes[scheme.name] = {scheme.config.model.positional, scheme.config.model.causal,
                                          std::move(positional_runs)};
}

}  // namespace

nlohmann::json study_collect(const std::string& study_dir) {
  const fs::path dir(study_dir);
  const nlohmann::json manifest = manifest_read(dir);
  // The files may be gzipped (results.json.gz, ...: an experiment's folder kept small).
  const std::string saved_results = stored_file(study_dir, "results.json");
  if (!fs::exists(dir / "members") && !saved_results.empty()) return saved_study_rendered(study_dir, saved_results);

  const Config base = config_from_json(manifest.at("config"));
  Collected collected;
  collected.attention = {
      {"probes", base.report.probes}, {"inputs", nlohmann::json::array()}, {"schemes", nlohmann::json::object()}};
  collected.positional.context = base.task.context;
  for (const auto& scheme : study_arms_from_manifest(manifest)) arm_collect(study_dir, scheme, collected);

  const nlohmann::json results_json = collected.results;
  json_write_atomic((dir / "results.json").string(), results_json);
  file_write_atomic((dir / "results.csv").string(), results_csv(results_tidy_rows(collected.results)));
  json_write_atomic((dir / "attention.json").string(), collected.attention);
  json_write_atomic((dir / "positional.json").string(), nlohmann::json(collected.positional));
  file_write_atomic((dir / "metrics.jsonl").string(), collected.metrics);
  report_html_write(study_dir, (dir / "report.html").string());
  return results_json;
}

}  // namespace copytask
