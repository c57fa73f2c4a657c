// study_check_memory (study/study.h): the estimate of train/memory_estimate.h for the
// study's data and its largest batch, against what the machine has.
#include "compat/torch_compat.h"
#include "study/study_checks.h"
#include "train/memory_estimate.h"

namespace copytask {

void study_check_memory(const std::vector<StudyArm>& schemes, const Shard& shard, const c10::Device& device) {
  const auto batches = study_batches(shard_members(study_members(schemes), shard));
  if (batches.empty()) return;
  MemoryEstimate largest;
  int64_t largest_members = 0;
  for (const auto& batch : batches) {
    const MemoryEstimate e = memory_estimate(batch.front().arm->config, static_cast<int64_t>(batch.size()), device);
    if (e.training_bytes > largest.training_bytes) {
      largest = e;
      largest_members = static_cast<int64_t>(batch.size());
    }
  }
  const TaskConfig& task = schemes.front().config.task;
  const std::string breakdown = "data " + bytes_text(largest.data_bytes) + " for " + std::to_string(task.examples) +
                                " examples of context " + std::to_string(task.context) + ", training " +
                                bytes_text(largest.training_bytes) + " for the largest batch of " +
                                std::to_string(largest_members) + " member(s)";
  const std::string remedy =
      "; lower task.examples or task.context, or the model's size, train fewer members at once "
      "(fewer seeds or schemes, or --shard i/n), or use a machine with more memory";
  const double host = host_memory_available_bytes();
  if (host > 0 && largest.host() > host)
    throw ConfigError("the study needs about " + bytes_text(largest.host()) + " of memory (" + breakdown +
                      ") but this machine has " + bytes_text(host) + " available" + remedy);
  const double gpu = device_memory_available_bytes(device);
  if (gpu > 0 && largest.device > gpu)
    throw ConfigError("the study needs about " + bytes_text(largest.device) + " of GPU memory (" + breakdown + ") but " +
                      device.str() + " has " + bytes_text(gpu) + " free" + remedy);
}

}  // namespace copytask
