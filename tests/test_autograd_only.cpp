// A scheme with no fused CPU kernel (the test binary's own, autograd_only_scheme.h) goes
// through copytask's own study code as a user's would: trained in a batch of its own on the
// autograd step beside a scheme on the fused step, evaluated again from its checkpoint to
// the numbers of its training, and resumed after a member was lost.
#include <filesystem>
#include <optional>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include "autograd_only_scheme.h"
#include "cli_util.h"
#include "study_util.h"
#include "study/saved_study.h"
#include "study/study.h"
#include "task/copy_task.h"
#include "train/evaluate.h"
#include "train/train_data.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;
using test::read_json;

void study_train(const fs::path& out) {
  test::tiny_study_train(std::string("[{\"name\": \"sqrt\", \"model.positional\": \"") + test::kAutogradOnlyScheme +
                             "\"}, {\"name\": \"sin\", \"model.positional\": \"sinusoidal\"}]",
                         out);
}

TEST(AutogradOnlyScheme, TrainsApartEvaluatesAndResumesThroughTheStudy) {
  const fs::path out = test::fresh_dir("autograd-only");
  study_train(out);

  // Two batches: the scheme without a fused kernel on autograd, saying why; the other fused.
  const nlohmann::json run_info = read_json(out / "run.json");
  EXPECT_EQ(run_info["status"], "ok");
  ASSERT_EQ(run_info["batches"].size(), 2u) << run_info.dump();
  EXPECT_EQ(run_info["batches"][0]["members"], nlohmann::json({"sqrt/seed-0", "sqrt/seed-1"}));
  EXPECT_EQ(run_info["batches"][0]["training_step"], "autograd");
  EXPECT_NE(run_info["batches"][0].value("fallback_reason", "").find("has no fused CPU step"), std::string::npos)
      << run_info.dump();
  EXPECT_EQ(run_info["batches"][1]["training_step"], "fused CPU");
  const nlohmann::json results = read_json(out / "results.json");
  EXPECT_EQ(results["complete"]["runs"], 4);

  // It trained: its learned weight moved from its start (log_w = 0) and its loss is finite.
  const nlohmann::json first = read_json(out / "members" / "sqrt" / "seed-0" / "result.json");
  EXPECT_EQ(first["training_step"], "autograd");
  EXPECT_TRUE(std::isfinite(first["final_loss"].get<double>()));

  // Evaluated again from the checkpoints (eval's path: the saved study, its batches, the
  // models loaded): the test split's numbers of the end of training, exactly.
  const SavedStudy study = saved_study_open(out.string());
  const auto members = saved_members(study);
  ASSERT_EQ(members.size(), 4u);
  const TrainData data = train_data_upload(copy_task_generate(study.base.task), torch::kCPU);
  int evaluated = 0;
  for (const auto& batch : study_batches(members)) {
    if (batch.front().arm->name != "sqrt") continue;
    Encoder model = saved_batch_load(study, batch, torch::kCPU);
    const auto test_scores = evaluate_split(model, data.test_inputs, data.test_targets, data.noise_token);
    for (size_t m = 0; m < batch.size(); ++m) {
      const nlohmann::json recorded =
          read_json(out / "members" / "sqrt" / ("seed-" + std::to_string(batch[m].seed)) / "result.json");
      EXPECT_EQ(test_scores[m].exact, recorded["test_exact"].get<double>()) << batch[m].name();
      EXPECT_EQ(test_scores[m].loss, recorded["test_loss"].get<double>()) << batch[m].name();
      ++evaluated;
    }
  }
  EXPECT_EQ(evaluated, 2);
  const auto parameters = saved_batch_load(study, {members[0]}, torch::kCPU)->scheme(0).named_parameters();
  ASSERT_TRUE(parameters.contains("log_w"));
  EXPECT_GT(parameters["log_w"].abs().max().item<double>(), 0.0) << "its weight never moved";

  // Resumed: a member lost (its result.json gone, as when a run is killed before it ends)
  // is trained again, alone, to the same numbers; the complete ones are skipped.
  const fs::path lost = out / "members" / "sqrt" / "seed-1" / "result.json";
  const nlohmann::json before = read_json(lost);
  fs::remove(lost);
  study_train(out);
  const nlohmann::json rerun = read_json(out / "run.json");
  EXPECT_EQ(rerun["members_trained"], nlohmann::json({"sqrt/seed-1"})) << rerun.dump();
  EXPECT_EQ(rerun["members_skipped"], 3) << rerun.dump();
  const nlohmann::json after = read_json(lost);
  EXPECT_EQ(after["final_loss"], before["final_loss"]);
  EXPECT_EQ(after["test_exact"], before["test_exact"]);
  EXPECT_EQ(read_json(out / "results.json")["complete"]["runs"], 4);
  fs::remove_all(out);
}

}  // namespace
}  // namespace copytask
