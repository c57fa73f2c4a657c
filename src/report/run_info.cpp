#include "report/run_info.h"

#include <ctime>

#include <unistd.h>

#include "compat/torch_compat.h"
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
                        {"libtorch", torch_version_string()},
                        {"command", info.command},
                        {"host", host},
                        {"device", info.device},
                        {"threads", info.threads},
                        {"started", info.started},
                        {"ended", info.ended.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.ended)},
                        {"status", info.status},
                        {"members_trained", info.members_trained},
                        {"members_skipped", info.members_skipped}};
  // training_step: the step every batch ran on ("fused CPU", "autograd"), or the distinct
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
  if (!info.shard.empty()) out["shard"] = info.shard;
  if (!info.error.empty()) out["error"] = info.error;
  return out;
}

}  // namespace copytask
