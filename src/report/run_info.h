#pragma once
// run.json: what ran, where and how it ended (version, git commit, LibTorch version,
// device, threads, start and end time, exit status).
#include <string>

#include <nlohmann/json.hpp>

namespace copytask {

struct RunInfo {
  std::string command;      // the command line, to rerun it
  std::string device;       // "cpu", "cuda:0"
  int threads = 1;
  std::string started;      // ISO 8601 UTC
  std::string ended;        // empty while running
  std::string status = "running";  // running | ok | failed | interrupted
  std::string error;        // what failed, when it did
};

nlohmann::json run_info_json(const RunInfo& info);

// "2026-11-21T05:26:12Z"
std::string utc_now_iso8601();

}  // namespace copytask
