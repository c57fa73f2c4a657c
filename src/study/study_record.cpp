#include "study/study_record.h"

#include "compat/torch_compat.h"
#include "model/cpu_variant.h"
#include "util/atomic_files.h"

namespace copytask {
namespace fs = std::filesystem;

StudyRecord::StudyRecord(const fs::path& study_dir, const StudyOptions& options) {
  run_info_stamp(info_);
  info_.command = options.command_line;
  info_.device = options.device.str();
  info_.libtorch = torch_version_string();
  info_.cpu = cpu_model();
  info_.cpu_kernel = cpu_variant_name(cpu_variant_active());
  const GpuInfo gpu = gpu_info(options.device);
  info_.gpu = gpu.name;
  info_.cuda_runtime = gpu.cuda_runtime;
  info_.cuda_driver = gpu.cuda_driver;
  info_.threads = options.threads;
  info_.started = utc_now_iso8601();
  path_ = study_dir / "run.json";
  if (!options.shard.whole()) {
    info_.shard = options.shard.str();
    fs::create_directories(study_dir / "shards");
    path_ = study_dir / "shards" /
            (std::to_string(options.shard.index) + "-of-" + std::to_string(options.shard.count) + ".json");
  }
  info_.earlier_runs = run_info_earlier_runs(path_.string());
}

void StudyRecord::start(int64_t skipped) {
  info_.members_skipped = skipped;
  write();
}

void StudyRecord::batch_trained(const BatchRecord& batch) {
  info_.batches.push_back(batch);
  info_.members_trained.insert(info_.members_trained.end(), batch.members.begin(), batch.members.end());
  write();
}

void StudyRecord::finish(const std::string& status, const std::string& error) {
  info_.status = status;
  info_.error = error;
  info_.ended = utc_now_iso8601();
  write();
}

void StudyRecord::write() const { json_write_atomic(path_.string(), nlohmann::json(info_)); }

}  // namespace copytask
