// The fused GPU step's kernels (kernels/fused_step.h, model/fused_gpu.h), checked on the CPU
// through their emulation: the same body the GPU runs, each block's threads in a loop. Against
// LibTorch's autograd through Encoder::forward: the losses, every parameter's gradient (the
// schemes' too, through the tables' gradients) and the tables' gradients, for every scheme
// whose hooks have a kernel form, one to four heads, with dropout, under every kind of
// position IDs; against the fused CPU step. Bit for bit the same whatever the block's
// threads, their order (a race would show) and the tile; a member alone as in a batch. The
// DeviceStep on these kernels trains as the autograd step. (tests/test_cuda.cpp runs the
// same kernels on a GPU against this emulation.)
#include <dlfcn.h>
#include <link.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <optional>

#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "kernels/cuda_switch.h"
#include "model/fused_cpu.h"
#include "model/fused_gpu.h"
#include "model/hooks/registry.h"
#include "task/copy_task.h"
#include "parity_fixtures.h"
#include "test_paths.h"
#include "step_compare.h"
#include "test_util.h"
#include "train/device_step.h"
#include "study/study_plan.h"
#include "train/step_factory.h"
#include "train/train_data.h"

namespace copytask {
using test::autograd_step;
using test::copy_inputs;
using test::gradients_of;
using test::StepResult;
using test::worst_relative_gradient_difference;
namespace {
namespace fs = std::filesystem;

// Whether every hook of a member's scheme has a kernel form (model/hooks/hook.h).
bool has_kernel_forms(const MemberSpec& member, const EncoderShape& shape) {
  const PositionalShape positional{shape.context, shape.embed, shape.heads, shape.blocks, member.causal};
  for (const Hook* hook : positional_scheme_make(member.positional, member.options, positional)->member_hooks())
    if (hook->kernel_form() == KernelTableForm::none) return false;
  return true;
}

// Every registered scheme and option the kernel can run (test_util.h), from the registry, so
// a new scheme on a hook with a kernel form is covered without a line here; and variants of
// some schemes' own options.
// `needs`: only members whose schemes run on these other steps too (StepSupport bits).
std::vector<MemberSpec> kernel_members(const EncoderShape& shape, unsigned needs = 0) {
  std::vector<MemberSpec> members;
  for (const auto& member : test::every_positional_member(shape, 0, needs))
    if (has_kernel_forms(member, shape)) members.push_back(member);
  PositionalOptions partial_rope = test::small_options(), learned_alibi = test::small_options();
  partial_rope.rope_fraction = 0.5;
  partial_rope.rope_base = 100;
  learned_alibi.alibi_direction = "two-sided";
  learned_alibi.alibi_learned = true;
  const int64_t seed = static_cast<int64_t>(members.size());
  members.push_back({"rope-partial+causal", seed, "rope", true, partial_rope});
  members.push_back({"alibi-two-sided-learned", seed + 1, "alibi", false, learned_alibi});
  for (auto& member : members)
    if (!member.options.alibi_slopes.empty()) member.options.alibi_slopes.resize(static_cast<size_t>(shape.heads), 0.125);
  return members;
}

// This step's dropout keys of the masks (M) int64 on `device`, as the device step hands them
// over (the kernels read them on the model's device).
torch::Tensor keys_of(const DropoutMasks& masks, const torch::Device& device) {
  std::vector<int64_t> keys;
  for (uint64_t key : masks.stream()->step_keys) keys.push_back(static_cast<int64_t>(key));
  return torch::tensor(keys, torch::kLong).to(device);
}

StepResult kernel_step(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                       const DropoutMasks* masks, const torch::Tensor& positions = {},
                       const FusedGpuExecution& execution = {}) {
  model->zero_grad();
  const int64_t T = inputs.size(2);
  FusedGpuKernels kernels(*model, inputs.size(1), T, execution);
  const PositionalTables tables = model->positional_tables(model->table_positions(T));
  PositionalTables table_grads;
  const torch::Tensor keys = masks ? keys_of(*masks, model->device()) : torch::Tensor();
  auto losses = kernels.loss_backward(tables, inputs, targets, positions, keys, &table_grads);
  if (tables.any_learned()) model->positional_backward(tables, table_grads);
  return {losses, gradients_of(model)};
}

bool bit_equal(const StepResult& a, const StepResult& b) {
  if (!torch::equal(a.loss, b.loss)) return false;
  for (size_t j = 0; j < a.grads.size(); ++j)
    if (!torch::equal(a.grads[j], b.grads[j])) return false;
  return true;
}

void expect_kernel_equals_autograd(const EncoderShape& shape, int64_t batch, bool dropout) {
  const auto members = kernel_members(shape);
  Encoder model(shape, members, torch::kCPU);
  ASSERT_EQ(fused_gpu_unsupported(*model, shape.context), "");
  const int64_t M = model->member_count();
  auto inputs = test::random_tokens(M, batch, shape, 11);
  auto targets = test::random_tokens(M, batch, shape, 12);
  std::optional<DropoutMasks> masks;
  if (dropout) masks.emplace(model->dropout_masks(batch));
  const StepResult reference = autograd_step(model, inputs, targets, masks ? &*masks : nullptr);
  const StepResult ours = kernel_step(model, inputs, targets, masks ? &*masks : nullptr);
  std::string where;
  const double worst = worst_relative_gradient_difference(reference, ours, &where);
  std::printf("  %lld members, heads %lld, blocks %lld, batch %lld, dropout %d: loss diff %.1e, worst relative gradient "
              "diff %.1e (%s)\n",
              static_cast<long long>(M), static_cast<long long>(shape.heads), static_cast<long long>(shape.blocks),
              static_cast<long long>(batch), dropout ? 1 : 0, test::max_abs_diff(reference.loss, ours.loss), worst,
              where.c_str());
  EXPECT_LT(test::max_abs_diff(reference.loss, ours.loss), 1e-5);
  EXPECT_LT(worst, 5e-5) << where;
  test::expect_every_used_parameter_gets_a_gradient(model, reference, ours);
}

TEST(FusedGpu, EveryKernelSchemeTwoHeadsWithDropoutGivesAutogradsLossAndGradients) {
  // 70 examples: partitions of whole tiles (ThePartitionsCoverTheBatchInWholeTilesAndSpreadASmallOne).
  expect_kernel_equals_autograd(test::small_shape(0.1), 70, true);
}

// Every layer form (config/layer_form.h) whose value lists the kernels gives autograd's
// numbers through them; every other is refused before any work, naming its key and value,
// and under train.step = fused-gpu its batch stays on the device step.
TEST(FusedGpu, EveryLayerFormItListsGivesAutogradsNumbersTheOthersAreRefused) {
  for (const LayerForm& form : layer_forms_each_value()) {
    SCOPED_TRACE(layer_form_text(form));
    EncoderShape shape = test::small_shape(0.1);
    shape.form = form;
    if (layer_form_fused_gpu_problem(form).empty()) {
      expect_kernel_equals_autograd(shape, 70, true);
      continue;
    }
    Encoder model(shape, kernel_members(shape), torch::kCPU);
    const std::string why = fused_gpu_unsupported(*model, shape.context);
    EXPECT_EQ(why, layer_form_fused_gpu_problem(form));
    for (const LayerFormValue* value : layer_form_chosen(form))
      if (!value->fused_gpu) {
        EXPECT_NE(why.find(value->key + " = " + value->value), std::string::npos) << why;
      }
  }
}

TEST(FusedGpu, TheReferenceShapeGivesAutogradsLossAndGradients) {
  EncoderShape shape;  // the reference model: embed 20, 1 head, 2 blocks, FF 32
  shape.dropout = 0.1;
  expect_kernel_equals_autograd(shape, 40, true);
  expect_kernel_equals_autograd(shape, 9, false);
}

TEST(FusedGpu, FourHeadsThreeBlocksWideFeedForward) {
  EncoderShape shape;
  shape.embed = 16;
  shape.heads = 4;
  shape.blocks = 3;
  shape.hidden = 40;  // F > 3D: the wide gradient buffer sized by F
  shape.dropout = 0.1;
  expect_kernel_equals_autograd(shape, 35, true);
}

// The copy family's shape: embed 32, 4 heads of 8, FF 64, 13 positions.
TEST(FusedGpu, TheCopyFamilyShapeGivesAutogradsLossAndGradients) {
  EncoderShape shape;
  shape.embed = 32;
  shape.heads = 4;
  shape.hidden = 64;
  shape.context = 13;
  shape.vocab = 12;
  shape.dropout = 0.1;
  expect_kernel_equals_autograd(shape, 33, true);
}

// The independent PyTorch reference's fixtures (tests/reference): every fixture of a scheme
// the kernels run, one member each of one batch, the fixtures' position IDs, no dropout: the
// losses and every gradient (the schemes' parameters' through the tables') within the
// fixtures' tolerance.
TEST(FusedGpu, ThePytorchReferencesFixturesThroughTheKernels) {
  using namespace test::parity;
  std::vector<Fixture> fixtures;
  for (const auto& name : fixture_names()) {
    Fixture fixture = load_fixture(name);
    const auto& config = fixture.json["config"];
    const MemberSpec member{name, 0, config["positional"], config["causal"], options_of(config)};
    // A layer form the kernels do not compute is refused (the test of layer forms below).
    if (has_kernel_forms(member, shape_of(config)) && layer_form_fused_gpu_problem(form_of(config)).empty())
      fixtures.push_back(std::move(fixture));
  }
  ASSERT_GE(fixtures.size(), 10u);
  LoadedBatch batch = loaded_batch(fixtures);
  Encoder& model = batch.model;
  const torch::Tensor tokens = torch::stack(batch.tokens), targets = torch::stack(batch.targets);  // (M, B, T)
  model->zero_grad();
  FusedGpuKernels kernels(*model, tokens.size(1), tokens.size(2));
  const PositionalTables tables = model->positional_tables(batch.table_positions);
  PositionalTables table_grads;
  const torch::Tensor losses = kernels.loss_backward(tables, tokens, targets, batch.positions, {}, &table_grads);
  if (tables.any_learned()) model->positional_backward(tables, table_grads);
  double worst_loss = 0, worst_grad = 0;
  for (size_t m = 0; m < fixtures.size(); ++m) {
    const double loss_diff = std::abs(losses[static_cast<int64_t>(m)].item<double>() - fixtures[m].json["loss"].get<double>());
    std::string worst_name;
    const double grad_diff = fixture_gradient_difference(model, static_cast<int64_t>(m), fixtures[m], &worst_name);
    EXPECT_LT(loss_diff, kTolerance) << fixtures[m].name;
    EXPECT_LT(grad_diff, kTolerance) << fixtures[m].name << " gradient " << worst_name;
    worst_loss = std::max(worst_loss, loss_diff);
    worst_grad = std::max(worst_grad, grad_diff);
  }
  std::printf("  %zu fixtures through the kernels: maxdiff loss %.2e, gradients %.2e\n", fixtures.size(), worst_loss,
              worst_grad);
}

// The tables' gradients themselves, for every member's every table, the fixed ones too (their
// gradients asked for through the execution's every_table_learned), against autograd with the
// tables as leaves.
TEST(FusedGpu, EveryTablesGradientEqualsAutogradsWithDropout) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, kernel_members(shape), torch::kCPU);
  const int64_t M = model->member_count(), B = 37;
  auto inputs = test::random_tokens(M, B, shape, 21);
  auto targets = test::random_tokens(M, B, shape, 22);
  const DropoutMasks masks = model->dropout_masks(B);
  PositionalTables tables = model->positional_tables(shape.context);
  for (auto& table : tables.hooks)
    if (table.stacked.defined()) table.stacked = table.stacked.detach().clone().requires_grad_(true);
  member_losses(model->forward(inputs, tables, &masks, nullptr), targets).sum().backward();

  FusedGpuExecution every_table;
  every_table.every_table_learned = true;
  FusedGpuKernels kernels(*model, B, shape.context, every_table);
  PositionalTables ours;
  kernels.loss_backward(model->positional_tables(shape.context), inputs, targets, {}, keys_of(masks, model->device()),
                        &ours);
  const auto& hooks = hook_registry();
  int compared = 0;
  for (size_t index = 0; index < hooks.size(); ++index) {
    const HookTable& reference = tables.hooks[index];
    if (!reference.any_used()) continue;
    ASSERT_TRUE(ours.hooks[index].stacked.defined()) << hooks[index]->name();
    double scale = 0, diff = 0;
    for (int64_t m = 0; m < M; ++m) {
      if (!reference.used[m]) continue;
      const torch::Tensor expected = reference.stacked.grad()[m];
      const double member_diff = test::max_abs_diff(expected, ours.hooks[index].stacked[m]);
      const double member_scale = expected.abs().max().item<double>();
      EXPECT_LT(member_diff, 5e-5 * std::max(member_scale, 1e-3)) << hooks[index]->name() << " " << model->members()[m].arm;
      scale = std::max(scale, member_scale);
      diff = std::max(diff, member_diff);
    }
    std::printf("  %s table gradient: largest %.2e, worst difference %.1e\n", hooks[index]->name().c_str(), scale, diff);
    EXPECT_GT(scale, 1e-4) << hooks[index]->name();
    ++compared;
  }
  EXPECT_EQ(compared, 3) << "the embedding rows, the pair angles and the score bias";
}

// Position IDs of each kind: every kernel scheme that reads positions and takes the kind,
// members at 0..T-1 beside them, each example at its own IDs of 0..39 (coupled: an output at
// its source's, so an example holds an ID twice).
TEST(FusedGpu, PositionIdsOfEveryKindGiveAutogradsLossAndGradients) {
  const EncoderShape shape = test::small_shape(0.1);
  for (const std::string kind : {"random", "offset", "coupled"}) {
    std::vector<MemberSpec> members;
    for (auto member : kernel_members(shape)) {
      member.options.position_ids = kind;
      member.options.position_range = 40;
      if (!test::positional_runs(member.positional, member.options, member.causal, shape)) continue;
      if (member.positional == "learned") member.options.learned_positions = 40;
      members.push_back(member);
    }
    members.push_back({"sinusoidal-plain", 40, "sinusoidal", false, {}});
    members.push_back({"learned-plain", 41, "learned", false, {}});
    Encoder model(shape, members, torch::kCPU);
    const int64_t M = model->member_count(), B = 37;
    auto inputs = copy_inputs(M, B);
    auto targets = test::random_tokens(M, B, shape, 22);
    const DropoutMasks masks = model->dropout_masks(B);
    const torch::Tensor positions = model->training_positions(inputs);  // (M, B, T)
    ASSERT_TRUE(positions.defined());
    const StepResult reference = autograd_step(model, inputs, targets, &masks, positions);
    const StepResult ours = kernel_step(model, inputs, targets, &masks, positions);
    std::string where;
    const double worst = worst_relative_gradient_difference(reference, ours, &where);
    std::printf("  position IDs %-8s %2lld members: loss diff %.1e, worst relative gradient diff %.1e (%s)\n",
                kind.c_str(), static_cast<long long>(M), test::max_abs_diff(reference.loss, ours.loss), worst,
                where.c_str());
    EXPECT_LT(test::max_abs_diff(reference.loss, ours.loss), 1e-5) << kind;
    EXPECT_LT(worst, 5e-5) << kind << " " << where;
  }
}

// The hand-written CPU step and the GPU's kernels: two implementations of one function.
TEST(FusedGpu, TheKernelGivesTheFusedCpuStepsLossAndGradients) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, kernel_members(shape, kFusedCpuStep), torch::kCPU);
  const int64_t M = model->member_count(), B = 45;
  auto inputs = test::random_tokens(M, B, shape, 31);
  auto targets = test::random_tokens(M, B, shape, 32);
  const DropoutMasks masks = model->dropout_masks(B);
  model->zero_grad();
  const PositionalTables tables = model->positional_tables(shape.context);
  PositionalTables table_grads;
  auto cpu_loss = fused_cpu_loss_backward(*model, tables, inputs, targets, &masks, &table_grads);
  model->positional_backward(tables, table_grads);
  const StepResult cpu{cpu_loss, gradients_of(model)};
  const StepResult ours = kernel_step(model, inputs, targets, &masks);
  const double worst = worst_relative_gradient_difference(cpu, ours);
  std::printf("  fused CPU step vs the kernel: loss %.1e, worst relative gradient %.1e\n",
              test::max_abs_diff(cpu.loss, ours.loss), worst);
  EXPECT_LT(test::max_abs_diff(cpu.loss, ours.loss), 1e-5);
  EXPECT_LT(worst, 5e-5);
}

// The comparison can fail: other dropout masks give other gradients.
TEST(FusedGpu, OtherDropoutMasksGiveOtherGradients) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, kernel_members(shape), torch::kCPU);
  auto inputs = test::random_tokens(model->member_count(), 40, shape, 11);
  auto targets = test::random_tokens(model->member_count(), 40, shape, 12);
  const DropoutMasks first = model->dropout_masks(40), second = model->dropout_masks(40);
  const StepResult reference = autograd_step(model, inputs, targets, &first);
  const StepResult other = kernel_step(model, inputs, targets, &second);
  EXPECT_GT(worst_relative_gradient_difference(reference, other), 1e-2);
}

// Every float is one item's sum in a fixed order: the same bits with one thread, 7 or 256,
// the threads of every phase in shuffled orders (an item reading what another item of its
// phase writes would differ), tiles of 1, 3 or the most examples that fit, the products'
// operands loaded four at a time or one, and the kept activations in shared memory or in
// global memory.
TEST(FusedGpu, NoNumberDependsOnTheThreadsTheirOrderOrTheTile) {
  const EncoderShape shape = test::small_shape(0.1);
  std::vector<MemberSpec> members = kernel_members(shape);
  for (size_t m = 0; m < members.size(); m += 3) {  // and under position IDs, where tables' gradients gather
    if (members[m].positional == "none" || members[m].positional == "learned") continue;
    members[m].options.position_ids = "coupled";
    members[m].options.position_range = 24;
    if (!test::positional_runs(members[m].positional, members[m].options, members[m].causal, shape))
      members[m].options.position_ids = "sequential";
  }
  Encoder model(shape, members, torch::kCPU);
  const int64_t M = model->member_count(), B = 40;
  auto inputs = copy_inputs(M, B);
  auto targets = test::random_tokens(M, B, shape, 6);
  const DropoutMasks masks = model->dropout_masks(B);
  const torch::Tensor positions = model->training_positions(inputs);
  FusedGpuExecution every_table;  // the fixed tables' gradients too
  every_table.every_table_learned = true;
  const StepResult base = kernel_step(model, inputs, targets, &masks, positions, every_table);
  const kernels::StepShape shape_of_step{static_cast<int>(B), 10, 8, 2, 4, 12, 11, 2,
                                         static_cast<int>(model->table_positions(10))};
  // A multiprocessor's shared memory that holds two blocks of E examples, the runtime's 1 KB each.
  auto multiprocessor_for = [&](int E, bool kept_global = false) {
    return (kernels::tile_layout(shape_of_step, E, kept_global).floats * 4 + kernels::kSharedReservedPerBlock) * 2;
  };
  struct Variant {
    const char* what;
    int threads;
    uint64_t shuffle;
    int64_t shared;
    int most_examples = 0;  // FusedGpuExecution::tile_examples (train.gpu_tile_examples)
    bool kept_global = false;  // FusedGpuExecution::kept_global (train.gpu_kept_activations)
  };
  for (const Variant& v : {Variant{"1 thread", 1, 0, 0}, Variant{"7 threads", 7, 0, 0},
                           Variant{"256 threads shuffled", 256, 99, 0}, Variant{"64 threads shuffled", 64, 5, 0},
                           Variant{"tiles of 1", 256, 17, multiprocessor_for(1)}, Variant{"tiles of 3", 33, 3, multiprocessor_for(3)},
                           Variant{"scalar loads", 256, 0, 0}, Variant{"4 x 4 items only", 256, 0, 0},
                           Variant{"at most 2 examples a tile", 256, 11, 0, 2},
                           Variant{"kept in global memory", 256, 23, 0, 0, true},
                           Variant{"kept in global memory, tiles of 3", 41, 7, multiprocessor_for(3, true), 0, true}}) {
    FusedGpuExecution execution = every_table;
    execution.threads = v.threads;
    execution.shuffle_seed = v.shuffle;
    execution.shared_bytes = v.shared;
    execution.vector_loads = std::string(v.what) != "scalar loads";
    execution.small_items = std::string(v.what) != "4 x 4 items only";
    execution.tile_examples = v.most_examples;
    execution.kept_global = v.kept_global;
    const StepResult other = kernel_step(model, inputs, targets, &masks, positions, execution);
    EXPECT_TRUE(bit_equal(base, other)) << v.what << ": worst relative gradient difference "
                                        << worst_relative_gradient_difference(base, other);
  }
  FusedGpuExecution tiles_of_one;
  tiles_of_one.shared_bytes = multiprocessor_for(1);
  EXPECT_EQ(FusedGpuKernels(*model, B, 10, tiles_of_one).tile_examples(), 1);
  FusedGpuExecution tiles_of_three;
  tiles_of_three.shared_bytes = multiprocessor_for(3);
  EXPECT_EQ(FusedGpuKernels(*model, B, 10, tiles_of_three).tile_examples(), 3);
  EXPECT_GT(FusedGpuKernels(*model, B, 10).tile_examples(), 3);
  // train.gpu_tile_examples: at most that many, never more than fit.
  FusedGpuExecution at_most_two;
  at_most_two.tile_examples = 2;
  EXPECT_EQ(FusedGpuKernels(*model, B, 10, at_most_two).tile_examples(), 2);
  FusedGpuExecution at_most_32 = tiles_of_three;
  at_most_32.tile_examples = 32;
  EXPECT_EQ(FusedGpuKernels(*model, B, 10, at_most_32).tile_examples(), 3);
  // The kept activations in global memory: the same shared memory holds more examples.
  FusedGpuExecution kept_of_three = tiles_of_three;
  kept_of_three.kept_global = true;
  EXPECT_GT(FusedGpuKernels(*model, B, 10, kept_of_three).tile_examples(), 3);
  kept_of_three.shared_bytes = multiprocessor_for(3, true);
  EXPECT_EQ(FusedGpuKernels(*model, B, 10, kept_of_three).tile_examples(), 3);
}

// The kernels' division by a multiply and a shift (kernels/divisor.h): n / d and n % d for
// every index below 20000 and every divisor below 3000, and near the top of the range
// (n up to 2^31 - 1) for divisors up to 2^31 - 1, powers of two and their neighbours among them.
TEST(Kernels, TheDivisorGivesEveryQuotientAndRemainder) {
  for (int d = 1; d < 3000; ++d) {
    const kernels::Divisor by = kernels::divisor_of(d);
    for (int n = 0; n < 20000; ++n)
      if (by.div(n) != n / d || by.mod(n) != n % d) FAIL() << n << " / " << d << ": " << by.div(n);
  }
  std::vector<int> divisors;
  for (int k = 0; k < 31; ++k)
    for (int64_t d : {(int64_t{1} << k) - 1, int64_t{1} << k, (int64_t{1} << k) + 1})
      if (d >= 1 && d < (int64_t{1} << 31)) divisors.push_back(static_cast<int>(d));
  uint64_t state = 7;
  for (int i = 0; i < 2000; ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    divisors.push_back(static_cast<int>(1 + (state >> 34)));  // 1 .. 2^30
  }
  divisors.push_back(2147483647);
  for (int d : divisors) {
    const kernels::Divisor by = kernels::divisor_of(d);
    const int64_t top = 2147483647, D = d;
    for (int64_t n : {int64_t{0}, D - 1, D, D + 1, 2 * D - 1, top - 1, top, top - D, top / D * D, top / D * D - 1}) {
      if (n < 0 || n > top) continue;
      const int v = static_cast<int>(n);
      ASSERT_EQ(by.div(v), v / d) << v << " / " << d;
      ASSERT_EQ(by.mod(v), v % d) << v << " % " << d;
    }
  }
}

// The partitions (kernels/fused_step.h): consecutive, covering the batch, whole tiles of a
// Hopper GPU's and at most 32 examples each, none empty; a small batch spread over at least 8
// of them (or every tile its own).
TEST(FusedGpu, ThePartitionsCoverTheBatchInWholeTilesAndSpreadASmallOne) {
  for (int tile : {1, 2, 3, 5, 7, 8, 16, 32})
    for (int B = 1; B <= 20000; B += B < 1100 ? 1 : 97) {
      const int per = kernels::examples_per_partition(B, tile), K = kernels::partition_count(B, per);
      ASSERT_GE(per, 1) << B;
      ASSERT_LE(per, kernels::kExamplesPerPartition) << B;
      ASSERT_EQ(per % tile, 0) << B << ", tiles of " << tile << ": " << per;
      ASSERT_LT((K - 1) * per, B) << B << ": the last partition is empty";
      ASSERT_GE(K * per, B) << B << ": examples left over";
      ASSERT_GE(K, std::min((B + tile - 1) / tile, 8)) << B << ", tiles of " << tile << ": " << K << " partitions";
      if (B >= 16 * kernels::kExamplesPerPartition) {
        ASSERT_EQ(per, kernels::kExamplesPerPartition / tile * tile) << B;
      }
    }
  // The reference shape's tile of 5: the study's full batch in 300 partitions of 30 (6 tiles
  // each, not 7 with a last of 2), the quick recipe's minibatch in 13 of 10.
  EXPECT_EQ(kernels::examples_per_partition(9000, 5), 30);
  EXPECT_EQ(kernels::examples_per_partition(128, 5), 10);
  // The copy family's wide models (a tile of one example): 16 partitions of 8.
  EXPECT_EQ(kernels::examples_per_partition(128, 1), 8);
}

// At the reference shape a tile of 5 examples gives the products 39 to 195 tiles of 4 x 4
// for 256 threads, so the kernels take 2 x 4 and 1 x 4 tiles there (the shape above has
// other widths): the same bits as 4 x 4 tiles alone, and in a shuffled order.
TEST(FusedGpu, TheSmallerProductItemsGiveTheSameBitsAtTheReferenceShape) {
  const EncoderShape shape{};
  const auto members = kernel_members(shape);
  Encoder model(shape, members, torch::kCPU);
  const int64_t M = model->member_count(), B = 70;
  auto inputs = copy_inputs(M, B).narrow(2, 0, shape.context);
  auto targets = test::random_tokens(M, B, shape, 12);
  const DropoutMasks masks = model->dropout_masks(B);
  FusedGpuExecution four;
  four.small_items = false;
  const StepResult a = kernel_step(model, inputs, targets, &masks, {}, four);
  const StepResult b = kernel_step(model, inputs, targets, &masks);
  FusedGpuExecution shuffled;
  shuffled.shuffle_seed = 7;
  const StepResult c = kernel_step(model, inputs, targets, &masks, {}, shuffled);
  EXPECT_TRUE(bit_equal(a, b)) << "worst relative gradient difference " << worst_relative_gradient_difference(a, b);
  EXPECT_TRUE(bit_equal(a, c)) << "worst relative gradient difference " << worst_relative_gradient_difference(a, c);
}

// The kept activations in global memory at the reference shape, where they let a tile hold 12
// examples instead of 5: partitions of 20 examples (B = 300) run as tiles of 12 and 8 instead
// of 5, 5, 5, 5, and every number is the same bits, threads shuffled.
TEST(FusedGpu, TheKeptActivationsInGlobalMemoryGiveTheSameBitsAtTheReferenceShape) {
  const EncoderShape shape{};
  std::vector<MemberSpec> members;
  const std::vector<MemberSpec> all = kernel_members(shape);
  for (size_t m = 0; m < all.size(); m += 5) members.push_back(all[m]);
  Encoder model(shape, members, torch::kCPU);
  const int64_t M = model->member_count(), B = 300;
  auto inputs = copy_inputs(M, B).narrow(2, 0, shape.context);
  auto targets = test::random_tokens(M, B, shape, 13);
  const DropoutMasks masks = model->dropout_masks(B);
  FusedGpuExecution kept_global;
  kept_global.kept_global = true;
  kept_global.shuffle_seed = 5;
  EXPECT_EQ(FusedGpuKernels(*model, B, shape.context).tile_examples(), 5);
  EXPECT_EQ(FusedGpuKernels(*model, B, shape.context, kept_global).tile_examples(), 12);
  const StepResult shared = kernel_step(model, inputs, targets, &masks);
  const StepResult global = kernel_step(model, inputs, targets, &masks, {}, kept_global);
  EXPECT_TRUE(bit_equal(shared, global)) << "worst relative gradient difference "
                                         << worst_relative_gradient_difference(shared, global);
}

// A member's numbers never depend on the members beside it.
TEST(FusedGpu, AMemberAloneIsTheSameMemberInABatch) {
  const EncoderShape shape = test::small_shape(0.1);
  const auto members = kernel_members(shape);
  Encoder batch(shape, members, torch::kCPU);
  const int64_t M = batch->member_count(), B = 50;
  auto inputs = test::random_tokens(M, B, shape, 41);
  auto targets = test::random_tokens(M, B, shape, 42);
  const DropoutMasks masks = batch->dropout_masks(B);
  const StepResult all = kernel_step(batch, inputs, targets, &masks);
  const auto names = batch->named_parameters();
  for (int64_t m : {int64_t{0}, M / 2, M - 1}) {
    Encoder alone(shape, std::vector<MemberSpec>{members[m]}, torch::kCPU);
    const DropoutMasks alone_masks = alone->dropout_masks(B);
    const StepResult one = kernel_step(alone, inputs.narrow(0, m, 1), targets.narrow(0, m, 1), &alone_masks);
    EXPECT_TRUE(torch::equal(one.loss[0], all.loss[m])) << members[m].arm;
    // The stacked parameters: member m's slice; the schemes' own: member m's module.
    const auto alone_names = alone->named_parameters();
    for (size_t j = 0; j < one.grads.size(); ++j) {
      const std::string name = alone_names[j].key();
      if (name.rfind("positional.", 0) == 0) continue;  // the schemes' parameters: by module, checked below
      const torch::Tensor* in_batch = names.find(name);
      ASSERT_NE(in_batch, nullptr) << name;
      const auto index = std::distance(names.begin(), std::find_if(names.begin(), names.end(),
                                                                   [&](const auto& item) { return item.key() == name; }));
      EXPECT_TRUE(torch::equal(one.grads[j][0], all.grads[static_cast<size_t>(index)][m])) << members[m].arm << " " << name;
    }
  }
}

// The DeviceStep on the kernels (uncaptured, on the CPU: their emulation) trains as the
// autograd step, full batch and minibatches (step_compare.h).
TEST(FusedGpu, TheDeviceStepOnTheKernelsTrainsAsTheAutogradStepFullBatch) {
  test::expect_device_step_trains_like_the_autograd_step(0, DeviceStepKernels::fused, "fused GPU");
}
TEST(FusedGpu, TheDeviceStepOnTheKernelsTrainsAsTheAutogradStepMinibatches) {
  test::expect_device_step_trains_like_the_autograd_step(16, DeviceStepKernels::fused, "fused GPU");
}

// What the kernel cannot run is refused, naming why: a hook without a kernel form, a tile
// that does not fit, train.step = fused-gpu on the CPU.
TEST(FusedGpu, WhatItCannotRunIsRefusedSayingWhy) {
  const EncoderShape shape = test::small_shape(0.0);
  for (const auto& member : test::every_positional_member(shape)) {
    if (has_kernel_forms(member, shape)) continue;
    Encoder model(shape, std::vector<MemberSpec>{member}, torch::kCPU);
    const std::string why = fused_gpu_unsupported(*model, shape.context);
    EXPECT_NE(why.find("hook, which the fused GPU step has no kernel for"), std::string::npos) << member.arm << ": " << why;
  }
  Encoder model(shape, std::vector<MemberSpec>{{"rope", 0, "rope", false}}, torch::kCPU);
  FusedGpuExecution tiny;
  tiny.shared_bytes = 1024;
  EXPECT_NE(fused_gpu_unsupported(*model, shape.context, tiny).find("do not fit"), std::string::npos);
  TrainConfig train;
  train.step = "fused-gpu";
  EXPECT_NE(training_step_refusal(train, torch::kCPU).find("runs on a GPU only"), std::string::npos);
}

// Under train.step = fused-gpu the planner keeps the members the kernels can run apart from
// those whose schemes fall back to the device step, so that no member trains slower because
// of a neighbour; under auto the same arms share a batch as before.
TEST(FusedGpu, ThePlannerKeepsTheKernelsMembersApartFromTheOthers) {
  // train.step and train.device: fused-gpu splits wherever it plans; auto on a GPU (where one
  // is visible) as fused-gpu, on the CPU not.
  std::vector<std::pair<std::string, std::string>> cases = {{"fused-gpu", "cpu"}, {"auto", "cpu"}};
  if (torch::cuda::is_available()) cases.push_back({"auto", "cuda"});
  for (const auto& [step, device] : cases) {
    Config config;
    config.train.step = step;
    config.train.device = device;
    config.train.seeds = {0, 1};
    config.compare.schemes = {{"rope", {{"model.positional", "rope"}}},
                              {"cope", {{"model.positional", "cope"}}},
                              {"alibi", {{"model.positional", "alibi"}}},
                              {"fox", {{"model.positional", "fox"}, {"model.causal", true}}}};
    const std::vector<StudyArm> arms = study_arms_for_compare(config);
    const auto batches = study_batches(study_members(arms));
    std::vector<std::string> names;
    for (const auto& batch : batches) {
      std::string line;
      for (const auto& member : batch) line += member.arm->name + " ";
      names.push_back(line);
    }
    if (step == "fused-gpu" || device == "cuda") {
      ASSERT_EQ(batches.size(), 2u);
      EXPECT_EQ(names[0], "rope rope alibi alibi ");
      EXPECT_EQ(names[1], "cope cope fox fox ");
    } else {
      EXPECT_EQ(batches.size(), 1u) << names[0];
    }
  }
}

// Every committed config's arms at every grid point: each whose scheme has kernel forms fits
// the fused GPU step on an H100 or H200 (a tile of at least one example in a block's shared
// memory), at its training context and table positions; the others say which hook keeps them
// off it. The configs named below are larger than a block's shared memory holds: each is
// refused saying so (on a GPU it trains on the device step), and when the kernel comes to
// hold one, it leaves this list.
TEST(FusedGpu, EveryCommittedConfigsKernelSchemesFitAHopperGpu) {
  const std::map<std::string, std::string> too_large = {
      // T = 42 at D 64, FF 128: one example's activations, 373 KB, over the 228 KB a multiprocessor has.
      {"past-2N-kazemnejad-n20.json", "do not fit the"}};
  size_t fits = 0, refused = 0, large = 0;
  for (const auto& entry : fs::directory_iterator(fs::path(test::source_dir()) / "configs")) {
    if (entry.path().extension() != ".json") continue;
    const auto large_one = too_large.find(entry.path().filename().string());
    if (large_one != too_large.end()) {
      const Config config = config_resolve(entry.path().string(), {});
      for (const auto& scheme : config.compare.schemes) {
        const Config arm = config_for_scheme(config, scheme);
        const EncoderShape shape = encoder_shape_of(arm);
        const MemberSpec member{scheme.name, 0, arm.model.positional, arm.model.causal, arm.model.positional_options};
        Encoder model(shape, std::vector<MemberSpec>{member}, torch::kCPU);
        EXPECT_NE(fused_gpu_unsupported(*model, shape.context).find(large_one->second), std::string::npos)
            << entry.path().filename() << " " << scheme.name << " fits now: take it off the list";
        ++large;
      }
      continue;
    }
    const Config config = config_resolve(entry.path().string(), {});
    for (const auto& scheme : config.compare.schemes)
      for (const auto& point : grid_combinations(config.compare.grid)) {
        SchemeSpec at_point = scheme;
        for (const auto& [key, value] : point.items()) at_point.overrides[key] = value;
        const Config arm = config_for_scheme(config, at_point);
        const EncoderShape shape = encoder_shape_of(arm);
        const MemberSpec member{scheme.name, 0, arm.model.positional, arm.model.causal, arm.model.positional_options};
        Encoder model(shape, std::vector<MemberSpec>{member}, torch::kCPU);
        const std::string why = fused_gpu_unsupported(*model, shape.context);
        if (has_kernel_forms(member, shape)) {
          EXPECT_EQ(why, "") << entry.path().filename() << " " << scheme.name;
          ++fits;
        } else {
          EXPECT_NE(why.find("hook, which the fused GPU step has no kernel for"), std::string::npos) << why;
          ++refused;
        }
      }
  }
  std::printf("  committed configs' arms: %zu run on the fused GPU step, %zu refused by a hook, %zu too large\n", fits,
              refused, large);
  EXPECT_EQ(large, too_large.size()) << "every config of the list is there, with one arm at least";
  EXPECT_GT(fits, 20u);
}

// ---- On a GPU (skipped where LibTorch sees none) --------------------------------------------

// The reference study's schemes and two under position IDs: members whose whole step,
// schemes' tables included, has no float atomics (T5's and FIRE's tables reach their
// parameters through LibTorch's index backward, which sums with atomics on a GPU).
std::vector<MemberSpec> reference_members() {
  std::vector<MemberSpec> members = {{"none", 0, "none", false},        {"sinusoidal", 1, "sinusoidal", false},
                                     {"learned", 2, "learned", false},  {"rope", 3, "rope", false},
                                     {"alibi", 4, "alibi", false},      {"alibi+causal", 5, "alibi", true},
                                     {"rope+coupled", 6, "rope", false}, {"sinusoidal+random", 7, "sinusoidal", false}};
  members[6].options.position_ids = "coupled";
  members[7].options.position_ids = "random";
  members[6].options.position_range = members[7].options.position_range = 24;
  return members;
}

// One step on a model on `device` (the same members, so the same weights, and the same
// position IDs), by the kernels or by LibTorch's autograd; the results on the CPU.
enum class StepBy { kernels, autograd };
StepResult step_on(StepBy by, const torch::Device& device, const EncoderShape& shape,
                   const std::vector<MemberSpec>& members, const torch::Tensor& inputs, const torch::Tensor& targets,
                   int64_t B) {
  Encoder model(shape, members, device);
  const DropoutMasks masks = model->dropout_masks(B);
  const torch::Tensor positions = model->training_positions(inputs.to(device));
  StepResult result = by == StepBy::kernels
                          ? kernel_step(model, inputs.to(device), targets.to(device), &masks, positions)
                          : autograd_step(model, inputs.to(device), targets.to(device), &masks, positions);
  result.loss = result.loss.cpu();
  for (auto& g : result.grads) g = g.cpu();
  return result;
}

// For a failure's message: each parameter whose gradients differ by more than `tolerance` of
// its largest, and the member (its row) where most.
void print_gradient_differences(const StepResult& a, const StepResult& b, const std::vector<MemberSpec>& members,
                                double tolerance) {
  for (size_t j = 0; j < a.grads.size(); ++j) {
    const double diff = test::max_abs_diff(a.grads[j], b.grads[j]);
    const double largest = a.grads[j].abs().max().item<double>();
    if (diff <= tolerance * std::max(1e-3, largest)) continue;
    const torch::Tensor by_row =
        (a.grads[j] - b.grads[j].to(a.grads[j].device())).abs().reshape({a.grads[j].size(0), -1});  // (M, rest)
    const auto row = static_cast<size_t>(by_row.amax(1).argmax().item<int64_t>());  // a member where it is (M, ...)
    std::printf("    parameter %zu %s: largest %.3e, difference %.3e, most in row %zu (%s)\n", j,
                c10::str(a.grads[j].sizes()).c_str(), largest, diff, row,
                row < members.size() ? members[row].arm.c_str() : "?");
  }
}

// Each member's worst gradient difference between two steps' results, relative to the
// parameter's largest over the members (the parameters stacked over the members).
std::vector<double> member_worst(const StepResult& a, const StepResult& b, int64_t M) {
  std::vector<double> worst(static_cast<size_t>(M), 0.0);
  for (size_t j = 0; j < a.grads.size(); ++j) {
    if (a.grads[j].dim() == 0 || a.grads[j].size(0) != M) continue;  // not a stacked parameter
    const double scale = std::max(1e-3, a.grads[j].abs().max().item<double>());
    const torch::Tensor by_member = (a.grads[j] - b.grads[j]).abs().reshape({M, -1}).amax(1);  // (M)
    for (int64_t m = 0; m < M; ++m)
      worst[static_cast<size_t>(m)] = std::max(worst[static_cast<size_t>(m)], by_member[m].item<double>() / scale);
  }
  return worst;
}

// The GPU's kernels against their emulation on the CPU: the same arithmetic (every product's
// term one fused multiply-add on both), so within float rounding of the few functions whose
// last bits differ between the two (exp, log, and expressions the GPU's compiler contracts).
// Seen on an H200, 2026-11-27: every member within 1e-6 but one (`t5+causal` at the
// reference shape, 2.8e-3, the same in a second run). On the CPU that member's emulation
// gives the CPU autograd's gradients on these inputs (2.4e-7), and on the GPU the kernels gave
// the GPU autograd's on other inputs (random tokens, 1.4e-6), not yet on these. Why it
// differs is not established: a hidden unit's input within a rounding of zero, crossing
// ReLU's kink, would do it, but moving every weight by a rounding moves that member's
// gradients by 5e-7 on the CPU, as any other's. So, until the next GPU run says which side is
// off (the printout below sets the GPU's kernels and autograd beside the CPU's on these
// inputs), every member but one within 1e-5 and that one within 1e-2: a race or a wrong index
// moves many members, or one by far more. The schemes' own parameters (not stacked over the
// members) take their gradients from the tables' through LibTorch's autograd on each device,
// whose sums run in another order on the GPU (4.2e-4 seen): within 1e-3.
TEST(FusedGpuOnCuda, TheKernelsEqualTheirEmulation) {
  COPYTASK_REQUIRE_CUDA();
  for (const EncoderShape& shape : {test::small_shape(0.1), EncoderShape{}}) {
    const auto members = kernel_members(shape);
    const int64_t M = static_cast<int64_t>(members.size()), B = 70;
    auto inputs = copy_inputs(M, B).narrow(2, 0, shape.context);
    auto targets = test::random_tokens(M, B, shape, 12);
    const StepResult cpu = step_on(StepBy::kernels, torch::kCPU, shape, members, inputs, targets, B);
    const StepResult gpu = step_on(StepBy::kernels, test::kCuda, shape, members, inputs, targets, B);
    const StepResult cpu_autograd = step_on(StepBy::autograd, torch::kCPU, shape, members, inputs, targets, B);
    const StepResult gpu_autograd = step_on(StepBy::autograd, test::kCuda, shape, members, inputs, targets, B);
    // Each comparison's worst member, by name.
    auto worst_of = [&](const char* what, const StepResult& a, const StepResult& b) {
      const std::vector<double> worst = member_worst(a, b, M);
      const auto at = std::max_element(worst.begin(), worst.end()) - worst.begin();
      std::printf("    %s: worst member %s %.1e\n", what, members[static_cast<size_t>(at)].arm.c_str(),
                  worst[static_cast<size_t>(at)]);
      return worst;
    };
    std::printf("  heads %lld: loss, GPU kernels vs their CPU emulation %.1e\n", static_cast<long long>(shape.heads),
                test::max_abs_diff(cpu.loss, gpu.loss));
    std::vector<double> sorted = worst_of("GPU kernels vs their CPU emulation", cpu, gpu);
    worst_of("CPU autograd vs GPU autograd", cpu_autograd, gpu_autograd);
    worst_of("CPU emulation vs CPU autograd", cpu_autograd, cpu);
    worst_of("GPU kernels vs GPU autograd", gpu_autograd, gpu);
    print_gradient_differences(cpu, gpu, members, 1e-5);
    std::sort(sorted.begin(), sorted.end());
    double schemes_worst = 0;  // the parameters member_worst leaves out
    for (size_t j = 0; j < cpu.grads.size(); ++j)
      if (cpu.grads[j].dim() == 0 || cpu.grads[j].size(0) != M)
        schemes_worst = std::max(schemes_worst, test::max_abs_diff(cpu.grads[j], gpu.grads[j]) /
                                                    std::max(1e-3, cpu.grads[j].abs().max().item<double>()));
    std::printf("    the schemes' own parameters: worst relative gradient %.1e\n", schemes_worst);
    EXPECT_LT(schemes_worst, 1e-3);
    EXPECT_LT(test::max_abs_diff(cpu.loss, gpu.loss), 1e-6);
    EXPECT_LT(sorted[sorted.size() - 2], 1e-5) << "two members or more differ";
    EXPECT_LT(sorted.back(), 1e-2);
  }
}

// Why TheKernelsEqualTheirEmulation (below) allows one member past 1e-5: at those inputs
// (the reference shape's one head, 70 examples, seed 12) one member (t5+causal) sits where a
// float32 rounding decides something discrete (ReLU's kink the candidate): float64 and one
// float32 evaluation land on one side, another float32 evaluation on the other, about 3e-3
// apart in every gradient. Which side a float32 step takes depends on its arithmetic: on an
// H200 the GPU's (kernels and autograd alike) took the other side from LibTorch 2.11's CPU
// ops; here, Debian's LibTorch 1.13 takes the other side from float64, LibTorch 2.11's the
// same. So this asks what holds for both: against float64, every member within 1e-6 but at
// most one, and that one this member at one head. The members whose schemes have no float64
// form here (their tables are made in float32) are left out.
TEST(FusedGpu, AtMostOneMemberOfTheGpuComparisonDependsOnFloat32Rounding) {
  for (const EncoderShape& shape : {test::small_shape(0.1), EncoderShape{}}) {
    std::vector<MemberSpec> members;
    for (const MemberSpec& m : kernel_members(shape))
      for (const char* scheme : {"none", "sinusoidal", "learned", "rope", "alibi", "t5"})
        if (m.positional == scheme) members.push_back(m);
    const int64_t M = static_cast<int64_t>(members.size()), B = 70;
    auto inputs = copy_inputs(M, B).narrow(2, 0, shape.context);
    auto targets = test::random_tokens(M, B, shape, 12);
    Encoder model(shape, members, torch::kCPU);
    const DropoutMasks masks = model->dropout_masks(B);
    const torch::Tensor positions = model->training_positions(inputs);
    const StepResult single = autograd_step(model, inputs, targets, &masks, positions);
    model->to(torch::kFloat64);
    const StepResult twice = autograd_step(model, inputs, targets, &masks, positions);
    std::vector<double> worst = member_worst(twice, single, M);
    const auto at = std::max_element(worst.begin(), worst.end()) - worst.begin();
    const std::string worst_member = members[static_cast<size_t>(at)].arm;
    std::printf("  heads %lld: float32 against float64, worst member %s %.1e\n", static_cast<long long>(shape.heads),
                worst_member.c_str(), worst[static_cast<size_t>(at)]);
    std::sort(worst.begin(), worst.end());
    EXPECT_LT(worst[worst.size() - 2], 1e-6) << "two members or more";
    if (worst.back() > 1e-6) {
      EXPECT_EQ(shape.heads, 1);
      EXPECT_EQ(worst_member, "t5+causal");
      EXPECT_LT(worst.back(), 1e-2);
    }
  }
}

// Against LibTorch's autograd on the same GPU (the device step's arithmetic); and the kernel
// with its kept activations in global memory (train.gpu_kept_activations=global) against the
// default, bit for bit: the same sums in the same order, on the GPU as in the emulation.
TEST(FusedGpuOnCuda, TheKernelsGiveAutogradsLossAndGradientsOnTheGpu) {
  COPYTASK_REQUIRE_CUDA();
  for (const EncoderShape& shape : {test::small_shape(0.1), EncoderShape{}}) {
    const auto members = kernel_members(shape);
    Encoder model(shape, members, test::kCuda);
    const int64_t M = model->member_count(), B = 70;
    auto inputs = test::random_tokens(M, B, shape, 11).to(test::kCuda);
    auto targets = test::random_tokens(M, B, shape, 12).to(test::kCuda);
    const DropoutMasks masks = model->dropout_masks(B);
    const StepResult reference = autograd_step(model, inputs, targets, &masks);
    const StepResult ours = kernel_step(model, inputs, targets, &masks);
    const double worst = worst_relative_gradient_difference(reference, ours);
    std::printf("  heads %lld: GPU kernels vs GPU autograd: loss %.1e, worst relative gradient %.1e\n",
                static_cast<long long>(shape.heads), test::max_abs_diff(reference.loss, ours.loss), worst);
    print_gradient_differences(reference, ours, members, 5e-5);
    EXPECT_LT(test::max_abs_diff(reference.loss, ours.loss), 1e-5);
    EXPECT_LT(worst, 5e-5);
    FusedGpuExecution kept_global;
    kept_global.kept_global = true;
    const StepResult kept = kernel_step(model, inputs, targets, &masks, {}, kept_global);
    EXPECT_TRUE(bit_equal(ours, kept)) << "kept in global memory: worst relative gradient difference "
                                       << worst_relative_gradient_difference(ours, kept);
  }
}

// The kernels alone on a small batch (two members, 40 examples, two heads, dropout, a score
// bias and a rotation), with the kept activations in shared memory and in global memory:
// what gpu_run.sh's fused stage runs under compute-sanitizer's racecheck, synccheck and
// memcheck, where every shared-memory access is instrumented (and memcheck checks the global
// slots' bounds).
TEST(FusedGpuOnCuda, ASmallStepForTheSanitizers) {
  COPYTASK_REQUIRE_CUDA();
  const EncoderShape shape = test::small_shape(0.1);
  const std::vector<MemberSpec> members = {{"rope", 0, "rope", true}, {"t5", 1, "t5", false, test::small_options()}};
  Encoder model(shape, members, test::kCuda);
  const int64_t B = 40;
  auto inputs = test::random_tokens(2, B, shape, 1).to(test::kCuda);
  auto targets = test::random_tokens(2, B, shape, 2).to(test::kCuda);
  const DropoutMasks masks = model->dropout_masks(B);
  FusedGpuExecution kept_global;
  kept_global.kept_global = true;
  for (const FusedGpuExecution& execution : {FusedGpuExecution{}, kept_global}) {
    const StepResult result = kernel_step(model, inputs, targets, &masks, {}, execution);
    EXPECT_TRUE(torch::isfinite(result.loss).all().item<bool>());
    EXPECT_GT(result.loss.min().item<double>(), 0.5);
  }
}

// A batch the kernels cannot run (a content scheme) trains on the device step, saying why.
TEST(FusedGpuOnCuda, ABatchTheKernelsCannotRunFallsBackSayingWhy) {
  COPYTASK_REQUIRE_CUDA();
  TaskConfig task;
  task.examples = 200;
  const TrainData data = train_data_upload(copy_task_generate(task), test::kCuda);
  Encoder model(test::small_shape(0.1), std::vector<MemberSpec>{{"cope", 0, "cope", true, test::small_options()}}, test::kCuda);
  TrainConfig train;
  train.step = "fused-gpu";
  const auto step = training_step_make(model, data, train);
  EXPECT_EQ(step->name(), "CUDA graph");
  EXPECT_NE(step->fallback_reason().find("the content hook"), std::string::npos) << step->fallback_reason();
}

// No float atomics: two runs of the whole training (the tables' gradients, Adam) give the same
// bits, captured or not, and the captured step equals the uncaptured one bit for bit.
TEST(FusedGpuOnCuda, TwoRunsAndTheCapturedStepGiveTheSameBits) {
  COPYTASK_REQUIRE_CUDA();
  TaskConfig task;
  task.examples = 300;
  const TrainData data = train_data_upload(copy_task_generate(task), test::kCuda);
  for (int64_t batch_size : {0, 32}) {
    TrainConfig train;
    train.batch_size = batch_size;
    auto run = [&](bool capture) {
      Encoder model(test::small_shape(0.1), reference_members(), test::kCuda);
      DeviceStep step(model, data, train, capture, DeviceStepKernels::fused);
      std::vector<torch::Tensor> losses;
      for (int i = 1; i <= DeviceStep::kWarmupSteps + 10; ++i) {
        step.set_lr(3e-3 * i / (DeviceStep::kWarmupSteps + 10));
        losses.push_back(step.run().cpu());
      }
      EXPECT_TRUE(step.capture_failure().empty()) << step.capture_failure();
      EXPECT_EQ(step.name(), capture ? "fused GPU, CUDA graph" : "fused GPU");
      std::vector<torch::Tensor> parameters;
      for (const auto& p : model->parameters()) parameters.push_back(p.detach().cpu());
      return std::make_pair(losses, parameters);
    };
    const auto first = run(true), second = run(true), plain = run(false);
    for (const auto* other : {&second, &plain}) {
      for (size_t i = 0; i < first.first.size(); ++i) EXPECT_TRUE(torch::equal(first.first[i], other->first[i])) << i;
      for (size_t i = 0; i < first.second.size(); ++i) EXPECT_TRUE(torch::equal(first.second[i], other->second[i])) << i;
    }
    EXPECT_LT(first.first.back().sum().item<double>(), first.first.front().sum().item<double>()) << "it trained";
  }
}

// The switch that says this build compiles copytask's CUDA kernels (kernels/cuda_switch.h)
// against an independent fact: whether this binary loaded LibTorch's CUDA library. A CUDA
// build with its kernels off, or a CPU build that thinks it has them, fails here.
TEST(Kernels, TheCudaBuildAndOnlyItCompilesTheKernels) {
  bool torch_cuda = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* found) {
        if (info->dlpi_name && std::strstr(info->dlpi_name, "libtorch_cuda.so")) *static_cast<bool*>(found) = true;
        return 0;
      },
      &torch_cuda);
  std::printf("  libtorch_cuda.so loaded: %d; COPYTASK_CUDA_KERNELS(): %d\n", torch_cuda ? 1 : 0, COPYTASK_CUDA_KERNELS());
  EXPECT_EQ(COPYTASK_CUDA_KERNELS() == 1, torch_cuda);
}

}  // namespace
}  // namespace copytask
