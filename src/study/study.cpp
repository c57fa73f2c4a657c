#include "study/study.h"

#include <filesystem>
#include <map>

#include "study/collect.h"
#include "study/member_files.h"
#include "study/study_batch.h"
#include "study/study_record.h"
#include "train/interrupt.h"
#include "util/atomic_files.h"
#include "util/log.h"

namespace copytask {
namespace fs = std::filesystem;

nlohmann::json study_run(const Config& base, const std::vector<StudyArm>& schemes, const StudyOptions& options) {
  const fs::path out(options.out_dir);
  fs::create_directories(out / "members");
  // Every shard writes the same content; the rename makes concurrent writes harmless.
  // study.json first: a shard starting beside us that finds config.json without it would
  // take the folder for a finished run that is not a study (study_check_out_dir).
  json_write_atomic((out / "study.json").string(), study_manifest(options.command, base, schemes));
  json_write_atomic((out / "config.json").string(), config_to_json(base));

  StudyRecord record(out, options);
  const std::vector<StudyMember> mine = shard_members(study_members(schemes), options.shard);
  std::vector<StudyMember> to_train;
  for (const auto& member : mine)
    if (!member_complete(options.out_dir, member.arm->name, member.seed)) to_train.push_back(member);
  record.start(static_cast<int64_t>(mine.size() - to_train.size()));
  if (to_train.size() < mine.size())
    log_info("{} of {} member(s) already complete in {}: skipped", mine.size() - to_train.size(), mine.size(),
                 options.out_dir);
  try {
    if (!to_train.empty()) {
      // One data set per task (kind and noise may differ between schemes; the batch key
      // holds the task, so a batch has one), made when its first batch comes.
      std::map<std::string, StudyInputs> inputs_by_task;
      std::vector<int64_t> seeds;  // every seed to train: the length sets drawn per seed, where they are
      for (const auto& member : to_train) seeds.push_back(member.seed);
      const auto batches = study_batches(to_train);
      for (size_t b = 0; b < batches.size(); ++b) {
        const Config& config = batches[b].front().arm->config;
        const std::string task_key = config_to_json(config)["task"].dump();
        if (!inputs_by_task.count(task_key)) inputs_by_task.emplace(task_key, study_inputs_prepare(config, seeds, options.device));
        const BatchPosition position{b, batches.size(), config.train.steps};
        record.batch_trained(study_batch_train(batches[b], position, inputs_by_task.at(task_key), options.out_dir, options));
        // The study's files follow every batch (but the last: collected once the run is
        // recorded as finished), so a later failure keeps what finished.
        if (b + 1 < batches.size()) study_collect(options.out_dir);
      }
    }
  } catch (const Interrupted&) {
    record.finish("interrupted");
    // What the user needs next: the work is not lost, and where it is.
    throw Interrupted("interrupted; the finished members are kept in " + options.out_dir +
                      " (training the same study into it again resumes it)");
  } catch (const std::exception& error) {
    record.finish("failed", error.what());
    throw;
  }
  // Finished before the last collection, so the report shows how the run ended.
  record.finish("ok");
  return study_collect(options.out_dir);
}

}  // namespace copytask
