#include "records/run_info.h"

#include <ctime>
#include <filesystem>
#include <utility>

#include <unistd.h>

#include "util/atomic_files.h"
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

void run_info_stamp(RunInfo& info) {
  char host[256] = "unknown";
  gethostname(host, sizeof host - 1);
  info.version = version_string();
  info.git_commit = git_commit();
  info.host = host;
}

void to_json(nlohmann::json& json, const RunInfo& info) {
  json = {{"version", info.version},
          {"git_commit", info.git_commit},
          {"libtorch", info.libtorch},
          {"command", info.command},
          {"host", info.host},
          {"cpu", info.cpu},
          {"cpu_kernel", info.cpu_kernel},
          {"device", info.device},
          {"threads", info.threads},
          {"started", info.started},
          {"ended", info.ended.empty() ? nlohmann::json(nullptr) : nlohmann::json(info.ended)},
          {"status", info.status},
          {"members_trained", info.members_trained},
          {"members_skipped", info.members_skipped}};
  std::string steps;
  nlohmann::json batches = nlohmann::json::array();
  for (const auto& batch : info.batches) {
    if (steps.find(batch.training_step) == std::string::npos)
      steps += (steps.empty() ? "" : ", ") + batch.training_step;
    nlohmann::json entry = {{"members", batch.members}, {"training_step", batch.training_step}};
    if (!batch.fallback_reason.empty()) entry["fallback_reason"] = batch.fallback_reason;
    batches.push_back(entry);
  }
  json["training_step"] = steps.empty() ? nlohmann::json(nullptr) : nlohmann::json(steps);
  json["batches"] = batches;
  if (!info.gpu.empty() || !info.cuda_runtime.empty())
    json["gpu"] = {{"name", info.gpu}, {"cuda_runtime", info.cuda_runtime}, {"cuda_driver", info.cuda_driver}};
  if (!info.shard.empty()) json["shard"] = info.shard;
  if (!info.error.empty()) json["error"] = info.error;
  if (!info.earlier_runs.empty()) json["earlier_runs"] = info.earlier_runs;
}

namespace {
// A string field, "" when absent or null (ended is null while running).
std::string text_of(const nlohmann::json& json, const char* key) {
  const auto it = json.find(key);
  return it == json.end() || it->is_null() ? std::string() : it->get<std::string>();
}
}  // namespace

void from_json(const nlohmann::json& json, RunInfo& info) {
  info = RunInfo();
  const std::pair<const char*, std::string*> texts[] = {
      {"version", &info.version}, {"git_commit", &info.git_commit}, {"host", &info.host},
      {"command", &info.command}, {"device", &info.device},         {"libtorch", &info.libtorch},
      {"cpu", &info.cpu},         {"cpu_kernel", &info.cpu_kernel}, {"started", &info.started},
      {"ended", &info.ended},     {"error", &info.error},           {"shard", &info.shard}};
  for (const auto& [key, field] : texts) *field = text_of(json, key);
  info.status = json.value("status", "running");
  info.threads = json.value("threads", 1);
  info.members_trained = json.value("members_trained", std::vector<std::string>());
  info.members_skipped = json.value("members_skipped", int64_t{0});
  if (const auto gpu = json.find("gpu"); gpu != json.end() && gpu->is_object()) {
    info.gpu = text_of(*gpu, "name");
    info.cuda_runtime = text_of(*gpu, "cuda_runtime");
    info.cuda_driver = text_of(*gpu, "cuda_driver");
  }
  for (const auto& entry : json.value("batches", nlohmann::json::array()))
    info.batches.push_back({entry.value("members", std::vector<std::string>()), text_of(entry, "training_step"),
                            text_of(entry, "fallback_reason")});
  info.earlier_runs = json.value("earlier_runs", nlohmann::json::array());
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
