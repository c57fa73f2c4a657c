#pragma once
// The run record of one study run (docs/design.md section 5): run.json, or
// shards/<i>-of-<n>.json for a shard. This class is its one owner: it writes the record
// when the run starts, after every batch, and when the run ends, whichever way it ends
// (ok, failed with the error, interrupted).
#include <filesystem>
#include <string>

#include "records/run_info.h"
#include "study/study_plan.h"

namespace copytask {

class StudyRecord {
 public:
  // Fills the record from the options (command line, device and GPU, threads, shard) and
  // the earlier runs the file holds; writes nothing yet.
  StudyRecord(const std::filesystem::path& study_dir, const StudyOptions& options);
  // Writes the record of a run that starts, `skipped` members being complete already.
  void start(int64_t skipped);
  // A batch finished: its record and members, written at once.
  void batch_trained(const BatchRecord& batch);
  // The run ended: "ok", "interrupted" or "failed" (with the error).
  void finish(const std::string& status, const std::string& error = "");

 private:
  void write() const;
  RunInfo info_;
  std::filesystem::path path_;
};

}  // namespace copytask
