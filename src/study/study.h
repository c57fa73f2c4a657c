#pragma once
// A study: schemes (x grid points) x seeds trained on one shared copy task, written to one
// folder (docs/design.md section 5). Each trained member has its own folder,
//   members/<scheme>/seed-<s>/  result.json  metrics.jsonl  attention.json  positional.json  model.pt
// written by whichever process trained it (result.json last: a member is complete when it
// exists). The study's own files (results.json, attention.json, positional.json,
// results.csv, metrics.jsonl, report.html) are collected from the complete members
// (study/collect.h).
// So a study can be trained in shards on several machines into one folder, and a rerun
// skips the members that are complete. Members whose configs differ only in the positional
// scheme, the causal flag and the seed train together as one batch.
#include <vector>

#include <nlohmann/json.hpp>

#include "config/config.h"
#include "study/study_plan.h"

namespace copytask {

// Runs the members of this shard that are not complete yet, then collects the study's
// files and returns results.json's content. Writes run.json (or shards/<i>-of-<n>.json)
// with status "interrupted" or "failed" before rethrowing when it stops early (an
// Interrupted saying where the finished members are); the members that finished are kept.
nlohmann::json study_run(const Config& base, const std::vector<StudyArm>& schemes, const StudyOptions& options);

}  // namespace copytask
