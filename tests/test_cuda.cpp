// The model on a CUDA GPU (the GPU machine's LibTorch): the PyTorch parity fixtures,
// CPU against CUDA (loss and every gradient, with the same dropout masks: the stream is the
// same on every device), a member alone against the same member in a batch, a checkpoint
// written on CUDA read on the CPU, and evaluation's numbers equal to training's. Each test
// says it is skipped where LibTorch sees no CUDA device (a CPU machine, Debian's LibTorch).
#include <filesystem>

#include <unistd.h>

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "compat/torch_compat.h"
#include "model/dropout_stream.h"
#include "model/positional_analysis.h"
#include "task/task_kind.h"
#include "parity_fixtures.h"
#include "task/copy_task.h"
#include "test_util.h"
#include "train/checkpoint.h"
#include "train/device_adam.h"
#include "train/device_step.h"
#include "train/trainer.h"

namespace copytask {
namespace {
using namespace test::parity;

void check_on_the_gpu(const std::vector<Fixture>& fixtures);

// Every fixture as one member of a mixed batch on the GPU, one batch per layer form, loaded
// as the CPU's parity test loads them (test_parity.cpp: eval mode, the fixtures' position
// IDs): logits, loss and every gradient against the reference's, fixture by fixture.
TEST(Cuda, ParityFixturesOnTheGpu) {
  COPYTASK_REQUIRE_CUDA();
  std::vector<Fixture> fixtures;
  for (const auto& name : fixture_names()) fixtures.push_back(load_fixture(name));
  for (const auto& [form, group] : fixtures_by_form(std::move(fixtures))) {
    SCOPED_TRACE("layer form " + form);
    check_on_the_gpu(group);
  }
}

void check_on_the_gpu(const std::vector<Fixture>& fixtures) {
  const int64_t M = static_cast<int64_t>(fixtures.size());
  LoadedBatch batch = loaded_batch(fixtures, test::kCuda);
  Encoder& model = batch.model;
  const torch::Tensor positions = batch.positions.defined() ? batch.positions.to(test::kCuda) : torch::Tensor();
  auto logits = model->forward(torch::stack(batch.tokens).to(test::kCuda), nullptr, nullptr, positions);  // (M, B, T, V)
  auto losses = member_losses(logits, torch::stack(batch.targets).to(test::kCuda));                      // (M)
  losses.sum().backward();
  double worst = 0;
  std::string worst_fixture;
  for (int64_t m = 0; m < M; ++m) {
    std::string worst_name;
    const double logits_diff = test::max_abs_diff(logits[m].cpu(), test::tensor_from_json(fixtures[m].json["logits"]));
    const double loss_diff = std::abs(losses[m].item<double>() - fixtures[m].json["loss"].get<double>());
    const double grad_diff = fixture_gradient_difference(model, m, fixtures[m], &worst_name);
    EXPECT_LT(logits_diff, kTolerance) << fixtures[m].name;
    EXPECT_LT(loss_diff, kTolerance) << fixtures[m].name;
    EXPECT_LT(grad_diff, kTolerance) << fixtures[m].name << " worst gradient " << worst_name;
    const double fixture_worst = std::max({logits_diff, loss_diff, grad_diff});
    if (fixture_worst >= worst) {
      worst = fixture_worst;
      worst_fixture = fixtures[m].name;
    }
  }
  std::printf("parity on CUDA over %lld fixtures: largest difference (logits, loss, gradients) %.2e (%s)\n",
              static_cast<long long>(M), worst, worst_fixture.c_str());
}

// The same members on both devices: the same weights (drawn on the CPU), the same dropout
// masks (one stream on every device), so the same loss and gradients up to float error.
TEST(Cuda, CpuAndCudaGiveTheSameLossAndGradients) {
  COPYTASK_REQUIRE_CUDA();
  const EncoderShape shape = test::small_shape(0.1);
  const std::vector<MemberSpec> members = {{"rope", 1, "rope", false}, {"t5", 2, "t5", true}, {"learned", 3, "learned", false},
                                           {"fire", 4, "fire", false}, {"alibi", 5, "alibi", true}};
  Encoder cpu(shape, members, torch::kCPU), gpu(shape, members, test::kCuda);
  auto inputs = test::random_tokens(5, 33, shape, 7), targets = test::random_tokens(5, 33, shape, 8);
  const DropoutMasks cpu_masks = cpu->dropout_masks(33), gpu_masks = gpu->dropout_masks(33);
  auto cpu_losses = member_losses(cpu->forward(inputs, &cpu_masks), targets);
  cpu_losses.sum().backward();
  auto gpu_losses = member_losses(gpu->forward(inputs.to(test::kCuda), &gpu_masks), targets.to(test::kCuda));
  gpu_losses.sum().backward();
  EXPECT_LT(test::max_abs_diff(cpu_losses, gpu_losses.cpu()), 1e-5);
  auto a = cpu->named_parameters(), b = gpu->named_parameters();
  double worst = 0;
  for (const auto& item : a) {
    const double scale = std::max(1e-3, item.value().grad().abs().max().item<double>());
    worst = std::max(worst, test::max_abs_diff(item.value().grad(), b[item.key()].grad().cpu()) / scale);
  }
  std::printf("CPU against CUDA: worst relative gradient difference %.2e\n", worst);
  EXPECT_LT(worst, 1e-4);
}

// On the GPU the masks come from copytask's kernel (kernels/dropout_stream_kernel.cu) where the
// build has it (CMake says "copytask's CUDA kernels: ON"), else from tensor operations.
TEST(Cuda, TheDropoutStreamOnTheGpuEqualsTheCpusElementForElement) {
  COPYTASK_REQUIRE_CUDA();
  const DropoutStream stream({11, 22, 33}, 5, 0.1);
  const auto on_gpu = dropout_stream_masks(stream, 7, 1001, test::kCuda).cpu();  // (3, 1001)
  std::vector<float> row(1001);
  for (int64_t m = 0; m < 3; ++m) {
    stream.fill(m, 7, 1001, row.data());
    EXPECT_EQ(test::max_abs_diff(on_gpu[m], torch::tensor(row)), 0.0) << "member " << m;
  }
}

// A member trained in a batch of others follows the curve of its lone run, on the GPU.
TEST(Cuda, AMemberAloneTrainsLikeTheSameMemberInABatch) {
  COPYTASK_REQUIRE_CUDA();
  TaskConfig task;
  task.examples = 600;
  const TrainData data = train_data_upload(copy_task_generate(task), test::kCuda);
  TrainConfig train;
  train.batch_size = 32;
  train.lr = 3e-3;
  const std::vector<MemberSpec> batch = {{"sinusoidal", 0, "sinusoidal", false}, {"t5", 1, "t5", false},
                                         {"rope", 2, "rope", true}};
  auto curve = [&](const std::vector<MemberSpec>& members, size_t which) {
    Encoder model(test::small_shape(0.1), members, test::kCuda);
    const auto owned = training_step_make(model, data, train);
    TrainingStep& step = *owned;
    std::vector<double> losses;
    for (int i = 0; i < 10; ++i) losses.push_back(step.run()[static_cast<int64_t>(which)].item<double>());
    return losses;
  };
  const auto batched = curve(batch, 1), lone = curve({batch[1]}, 0);
  for (size_t i = 0; i < lone.size(); ++i) EXPECT_NEAR(lone[i], batched[i], 1e-4 * std::max(1.0, lone[i])) << "step " << i;
  EXPECT_LT(lone.back(), lone.front() - 0.05) << "the loss moved";
}

TEST(Cuda, ACheckpointWrittenOnTheGpuIsReadOnTheCpu) {
  COPYTASK_REQUIRE_CUDA();
  const std::vector<MemberSpec> members = {{"t5", 4, "t5", false}};
  Encoder gpu(test::small_shape(), members, test::kCuda);
  Encoder cpu(test::small_shape(), std::vector<MemberSpec>{{"t5", 9, "t5", false}}, torch::kCPU);
  const auto path = std::filesystem::temp_directory_path() / ("copytask_cuda_" + std::to_string(::getpid()) + ".pt");
  checkpoint_save(gpu, 0, 1, path.string());
  checkpoint_load(cpu, 0, path.string());
  std::filesystem::remove(path);
  auto tokens = test::random_tokens(1, 4, cpu->shape(), 3);
  torch::NoGradGuard no_grad;
  EXPECT_LT(test::max_abs_diff(cpu->forward(tokens), gpu->forward(tokens.to(test::kCuda)).cpu()), 1e-5);
}

// Evaluation after training gives the numbers the training loop recorded at its end.
TEST(Cuda, EvaluationEqualsTheTrainingLoopsLastEvaluation) {
  COPYTASK_REQUIRE_CUDA();
  TaskConfig task;
  task.examples = 500;
  const TrainData data = train_data_upload(copy_task_generate(task), test::kCuda);
  TrainConfig train;
  train.steps = 20;
  train.batch_size = 32;
  train.eval_every = 20;
  Encoder model(test::small_shape(0.1), std::vector<MemberSpec>{{"t5", 0, "t5", false}, {"rope", 1, "rope", false}}, test::kCuda);
  const TrainOutcome outcome = train_members(model, data, train, nullptr);
  EXPECT_EQ(outcome.training_step, "fused GPU, CUDA graph") << outcome.fallback_reason;  // auto on a GPU
  const auto again = evaluate_split(model, data.test_inputs, data.test_targets);
  for (size_t m = 0; m < again.size(); ++m) {
    EXPECT_EQ(again[m].exact, outcome.final.test[m].exact);
    EXPECT_EQ(again[m].loss, outcome.final.test[m].loss);
  }
}

// The training step captured as a CUDA graph and replayed gives the numbers of the same
// step run uncaptured: losses and parameters after the warm-up, the capture and 9 replays,
// with dropout (its step count on the device), position IDs (copied in before each
// replay), a changing learning rate (Adam's on the device), a full batch and minibatches.
TEST(Cuda, TheCapturedStepEqualsTheUncapturedStep) {
  COPYTASK_REQUIRE_CUDA();
  TaskConfig task;
  task.examples = 300;
  const TrainData data = train_data_upload(copy_task_generate(task), test::kCuda);
  std::vector<MemberSpec> members = {{"rope", 0, "rope", true}, {"learned", 1, "learned", false},
                                     {"t5", 2, "t5", false},    {"fire", 3, "fire", false},
                                     {"alibi", 4, "alibi", true}, {"sinusoidal+random", 5, "sinusoidal", false},
                                     {"rope+coupled", 6, "rope", false}};
  members[5].options.position_ids = "random";
  members[6].options.position_ids = "coupled";
  members[5].options.position_range = members[6].options.position_range = 24;
  for (int64_t batch_size : {0, 32}) {
    TrainConfig train;
    train.batch_size = batch_size;
    train.lr = 1e-3;
    Encoder captured_model(test::small_shape(0.1), members, test::kCuda), plain_model(test::small_shape(0.1), members, test::kCuda);
    DeviceStep captured(captured_model, data, train, /*capture=*/true);
    DeviceStep plain(plain_model, data, train, /*capture=*/false);
    double worst_loss = 0;
    std::vector<double> losses;
    for (int step = 1; step <= DeviceStep::kWarmupSteps + 10; ++step) {
      const double lr = 3e-3 * step / (DeviceStep::kWarmupSteps + 10);
      captured.set_lr(lr);
      plain.set_lr(lr);
      const auto a = captured.run(), b = plain.run();  // (M)
      worst_loss = std::max(worst_loss, test::max_abs_diff(a.cpu(), b.cpu()));
      losses.push_back(a.sum().item<double>());
    }
    ASSERT_TRUE(captured.capture_failure().empty()) << captured.capture_failure();
    // The tolerance, argued: the GPU's gradient sums use atomics (embedding, index_select),
    // so two correct runs differ in the last bits, and Adam normalises the update: where a
    // gradient is near 0, a last-bit difference can turn an entry's step around, moving it
    // by up to about 2 lr a step. So a correct pair may have a few entries apart by up to
    // 2 x (the sum of the rates), and the losses within 1e-5; a wrong graph (a stale table,
    // a frozen rate) moves the losses by far more and most entries by ~lr.
    double worst_parameter = 0, rate_sum = 0;
    int64_t apart = 0, entries = 0;
    for (int step = 1; step <= DeviceStep::kWarmupSteps + 10; ++step) rate_sum += 3e-3 * step / (DeviceStep::kWarmupSteps + 10);
    const auto pa = captured_model->parameters(), pb = plain_model->parameters();
    for (size_t i = 0; i < pa.size(); ++i) {
      const auto difference = (pa[i].cpu() - pb[i].cpu()).abs();
      worst_parameter = std::max(worst_parameter, difference.max().item<double>());
      apart += (difference > 1e-4).sum().item<int64_t>();
      entries += difference.numel();
    }
    std::printf("batch %lld: captured against uncaptured over %lld steps: loss %.2e, parameters %.2e, %lld of %lld "
                "entries apart by > 1e-4\n",
                static_cast<long long>(batch_size), static_cast<long long>(DeviceStep::kWarmupSteps + 10), worst_loss,
                worst_parameter, static_cast<long long>(apart), static_cast<long long>(entries));
    EXPECT_LT(worst_loss, 1e-5);
    EXPECT_LE(worst_parameter, 2 * rate_sum);
    EXPECT_LT(static_cast<double>(apart), 1e-3 * static_cast<double>(entries));
    EXPECT_LT(losses.back(), losses.front()) << "the replays trained";
  }
}

// The GPU's name and its peak's inputs, read through ATen's device properties (bench.json's
// "gpu"; libcuda's cuDeviceGetName is not a global symbol, so dlsym missed it).
TEST(Cuda, TheGpuIsNamedWithItsPeaksInputs) {
  COPYTASK_REQUIRE_CUDA();
  const GpuInfo gpu = gpu_info(test::kCuda);
  std::printf("GPU: %s, compute capability %s, %d SMs at %.0f MHz, CUDA runtime %s, driver %s\n", gpu.name.c_str(),
              gpu.compute_capability.c_str(), gpu.sm_count, gpu.clock_mhz, gpu.cuda_runtime.c_str(), gpu.cuda_driver.c_str());
  EXPECT_FALSE(gpu.name.empty());
  EXPECT_GT(gpu.sm_count, 0);
  EXPECT_GT(gpu.clock_mhz, 0);
  EXPECT_FALSE(gpu.compute_capability.empty());
  EXPECT_FALSE(gpu.cuda_runtime.empty());
}

// Every registered scheme and option, trained on the GPU, writes its member's positional
// JSON: every value a scheme reports comes to the host first (model/schemes/scheme_util.h's
// host_values), as the study does after each batch.
TEST(Cuda, EveryMembersPositionalJsonIsWrittenFromTheGpu) {
  COPYTASK_REQUIRE_CUDA();
  const EncoderShape shape = test::small_shape();
  const auto members = test::every_positional_member(shape);
  Encoder model(shape, members, test::kCuda);
  for (int64_t m = 0; m < model->member_count(); ++m) {
    nlohmann::json written;
    ASSERT_NO_THROW(written = positional_member_json(model->scheme(m), members[m].seed, shape.context, {}))
        << members[m].arm;
    EXPECT_TRUE(written.contains("hooks")) << members[m].arm;
    for (const auto& [name, values] : model->scheme(m).reported_values())
      EXPECT_FALSE(values.empty()) << members[m].arm << " " << name;
  }
}

// For every registered scheme and option and every task kind: captured steps with what an
// evaluation at other lengths asks for between them (tables of other sizes, RoPE rescaled
// and back) train as the uncaptured steps. A graph whose kept tensors were freed (T5's bucket
// index, the training length's tables) reads whatever lives there now: its losses leave the
// uncaptured run's at once. Tolerance: the losses of two correct runs differ only by the
// order of the GPU's atomic gradient sums (last bits, carried on by Adam): well below 1e-4
// relative over these few steps, where a wrong table moves a loss by 1e-2 or more.
TEST(Cuda, CapturedStepsWithEvaluationsAtOtherLengthsBetweenThemEqualTheUncapturedSteps) {
  COPYTASK_REQUIRE_CUDA();
  const EncoderShape shape = test::small_shape(0.1);
  const auto members = test::every_positional_member(shape);
  for (const auto& kind : task_kind_names()) {
    TaskConfig task;
    task.kind = kind;
    task.examples = 300;
    const TrainData data = train_data_upload(copy_task_generate(task), test::kCuda);
    TrainConfig train;
    train.batch_size = 32;
    train.lr = 1e-3;
    Encoder captured_model(shape, members, test::kCuda), plain_model(shape, members, test::kCuda);
    DeviceStep captured(captured_model, data, train, /*capture=*/true);
    DeviceStep plain(plain_model, data, train, /*capture=*/false);
    double worst = 0;
    for (int step = 1; step <= DeviceStep::kWarmupSteps + 6; ++step) {
      const auto a = captured.run().cpu(), b = plain.run().cpu();  // (M)
      worst = std::max(worst, ((a - b).abs() / b.abs().clamp_min(1e-3)).max().item<double>());
      for (Encoder* model : {&captured_model, &plain_model}) {
        torch::NoGradGuard no_grad;
        (*model)->positional_tables(7);
        (*model)->rope_rescaling_set({"yarn", 2.0, shape.context});
        (*model)->positional_tables(9);
        (*model)->rope_rescaling_set({});
        (*model)->positional_tables(8);
      }
    }
    ASSERT_TRUE(captured.capture_failure().empty()) << kind << ": " << captured.capture_failure();
    std::printf("%s, %zu members: captured against uncaptured, evaluations between: worst relative loss %.2e\n",
                kind.c_str(), members.size(), worst);
    EXPECT_LT(worst, 1e-4) << kind;
  }
}

// DeviceAdam (its step count and rate on the device) against torch::optim::Adam, both on
// the GPU, over a few hundred steps with a changing rate. Both run the same float32 formula
// element by element; only the kernels' fusion and FMA contraction differ (an ulp a step),
// and each step moves a parameter by at most about lr, so the difference stays near
// steps x lr x 1e-7: 1e-5 holds with room, where a wrong bias correction (a frozen step
// count) is off by 1e-3 within ten steps.
TEST(Cuda, DeviceAdamIsTorchsAdamOnTheGpuOverHundredsOfSteps) {
  COPYTASK_REQUIRE_CUDA();
  torch::manual_seed(3);
  std::vector<torch::Tensor> ours, theirs;
  for (const auto& sizes : std::vector<std::vector<int64_t>>{{11, 20}, {20}, {3, 20, 32}}) {
    const auto start = torch::randn(sizes);
    ours.push_back(start.clone().to(test::kCuda).requires_grad_(true));
    theirs.push_back(start.clone().to(test::kCuda).requires_grad_(true));
  }
  DeviceAdam device_adam(ours, 1e-2);
  torch::optim::Adam adam(theirs, torch::optim::AdamOptions(1e-2));
  double worst = 0;
  const int steps = 300;
  for (int step = 1; step <= steps; ++step) {
    const double lr = step <= 30 ? 1e-2 * step / 30 : 1e-2 * 0.5 * (1 + std::cos(M_PI * (step - 30) / (steps - 30)));
    device_adam.set_lr(lr);
    for (auto& group : adam.param_groups()) static_cast<torch::optim::AdamOptions&>(group.options()).lr(lr);
    torch::manual_seed(1000 + step);
    for (size_t i = 0; i < ours.size(); ++i) {
      const auto grad = (torch::randn(ours[i].sizes()) * std::pow(10.0, (step % 7) - 5)).to(test::kCuda);
      ours[i].mutable_grad() = grad.clone();
      theirs[i].mutable_grad() = grad.clone();
    }
    device_adam.step();
    adam.step();
  }
  for (size_t i = 0; i < ours.size(); ++i) worst = std::max(worst, test::max_abs_diff(ours[i].cpu(), theirs[i].cpu()));
  std::printf("DeviceAdam against torch::optim::Adam on the GPU over %d steps: largest difference %.2e\n", steps, worst);
  EXPECT_EQ(device_adam.step_count().item<double>(), static_cast<double>(steps));
  EXPECT_LT(worst, 1e-5);
}

}  // namespace
}  // namespace copytask
