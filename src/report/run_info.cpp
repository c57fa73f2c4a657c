#include "report/run_info.h"

#include <ctime>
#include <filesystem>

#include <unistd.h>

#include "report/files.h"
#include "version.h"

namespace copytask {

std::string utc_now_iso8601() {
  std::time_t now = std::time(nullptr);
  std::tm utc{};
  gmtime_r(&now, &utc);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &utc);
  return text;
}

nlohmann::json run_info_json(const RunInfo& info) {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  nlohmann::json out = {{"version", version_string()},
                        {"git_commit", git_commit()},
                        {"libtorch", info.libtorch},
                        {"command", info.command},
                        {"host", host},
                        {"cpu", info.cpu},
                        {"cpu_kernel", info.cpu_kernel},
                        {"device", info.device},
                        {"threads", info.threads},
                        {"started", info.started},
                        {"ended", info.ended.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.ended)},
                        {"status", info.status},
                        {"members_trained", info.members_trained},
                        {"members_skipped", info.members_skipped}};
  // training_step: the step every batch ran on ("fused CPU", "CUDA graph", "autograd"), or the distinct
  // ones comma-separated when batches differ; null before any batch ran.
  std::string steps;
  nlohmann::json batches = nlohmann::json::array();
  for (const auto& batch : info.batches) {
    if (steps.find(batch.training_step) == std::string::npos)
      steps += (steps.empty() ? "" : ", ") + batch.training_step;
    nlohmann::json entry = {{"members", batch.members}, {"training_step", batch.training_step}};
    if (!batch.fallback_reason.empty()) entry["fallback_reason"] = batch.fallback_reason;
    batches.push_back(entry);
  }
  out["training_step"] = steps.empty() ? nlohmann::json(nullptr) : nlohmann::json(steps);
  out["batches"] = batches;
  if (!info.gpu.empty() || !info.cuda_runtime.empty())
    out["gpu"] = {{"name", info.gpu}, {"cuda_runtime", info.cuda_runtime}, {"cuda_driver", info.cuda_driver}};
  if (!info.shard.empty()) out["shard"] = info.shard;
  if (!info.error.empty()) out["error"] = info.error;
  if (!info.earlier_runs.empty()) out["earlier_runs"] = info.earlier_runs;
  return out;
}

nlohmann::json run_info_earlier_runs(const std::string& path) {
  nlohmann::json earlier = nlohmann::json::array();
  if (!std::filesystem::exists(path)) return earlier;
  try {
    nlohmann::json previous = nlohmann::json::parse(file_read(path));
    if (!previous.is_object()) throw std::runtime_error("not a JSON object");
    if (previous.contains("earlier_runs") && previous["earlier_runs"].is_array())
      for (const auto& run : previous["earlier_runs"]) earlier.push_back(run);
    previous.erase("earlier_runs");
    earlier.push_back(previous);
  } catch (const std::exception& error) {
    earlier.push_back({{"unreadable", std::string(error.what())}});
  }
  return earlier;
}

}  // namespace copytask
