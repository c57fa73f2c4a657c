#pragma once
// run.json (and a shard's shards/<i>-of-<n>.json): what ran, where and how it ended
// (version, git commit, LibTorch version, device, threads, start and end time, exit status,
// the batches and the steps they trained on). One to_json and one from_json.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace copytask {

// One batch of members this run trained, and the training step that trained it.
struct BatchRecord {
  std::vector<std::string> members;  // "rope/seed-0", ...
  std::string training_step;         // "fused CPU", "fused GPU, CUDA graph", "fused GPU", "CUDA graph" or "autograd"
  std::string fallback_reason;       // why a CPU batch ran on the autograd step ("" otherwise)
};

struct RunInfo {
  std::string version, git_commit, host;  // which copytask ran where: run_info_stamp fills them
  std::string command;      // the command line, to rerun it
  std::string device;       // "cpu", "cuda:0"
  std::string libtorch;     // LibTorch's version, and cpu the machine's CPU model: filled by the
  std::string cpu;          // caller (study/), so that this side builds without LibTorch
  std::string cpu_kernel;   // the CPU kernels' compiled variant that ran (model/cpu_variant.h)
  std::string gpu, cuda_runtime, cuda_driver;  // on a GPU: its name, the CUDA versions ("" on the CPU)
  int threads = 1;
  std::string started;      // ISO 8601 UTC
  std::string ended;        // empty while running
  std::string status = "running";  // running | ok | failed | interrupted
  std::string error;        // what failed, when it did
  std::string shard;        // "2/3" for `--shard 2/3`; empty for a whole study
  std::vector<std::string> members_trained;  // "rope/seed-0", ... trained by this invocation
  int64_t members_skipped = 0;               // already complete in the folder (a resumed study)
  std::vector<BatchRecord> batches;          // in the order they trained
  // The records of earlier invocations into the same folder (a resumed study), oldest
  // first, so that rerunning keeps when and where the members already there were trained.
  // Kept as they were written: an older copytask's record, or {"unreadable": why}.
  nlohmann::json earlier_runs = nlohmann::json::array();
};

// Fills version, git_commit and host from this program and machine.
void run_info_stamp(RunInfo& info);

// The file also holds "training_step": the step every batch ran on, or the distinct ones
// comma-separated when batches differ, null before any batch ran (derived from batches).
void to_json(nlohmann::json& json, const RunInfo& info);
// Every field defaults when absent (a record from an older copytask, or a shard's record
// that has not got that far); throws nlohmann::json::exception on a field of another type.
void from_json(const nlohmann::json& json, RunInfo& info);

// The earlier_runs for a new record at `path`: the record already there (and its own
// earlier runs), oldest first; empty when there is none. A record that cannot be read is
// kept as {"unreadable": "<why>"} rather than dropped silently.
nlohmann::json run_info_earlier_runs(const std::string& path);

// "2026-11-21T05:26:12Z"
std::string utc_now_iso8601();

}  // namespace copytask
