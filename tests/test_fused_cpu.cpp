// The hand-written CPU step (model/fused_cpu.h) against LibTorch's autograd through
// Encoder::forward: the same losses, every parameter's gradient (the schemes' parameters
// too, through the tables' gradients) and the tables' gradients themselves, for every
// scheme, with and without the causal mask, one and several heads, with dropout masks;
// the forward pass evaluation uses; independent of the thread count; and the same training
// over several Adam steps. (test_parity.cpp checks it against the PyTorch fixtures too.)
// Each test runs on every compiled variant of the kernels this CPU can execute
// (cpu_variants.h), and the variants agree within float rounding.
#include <algorithm>
#include <cmath>
#include <optional>

#include <gtest/gtest.h>

#include "cpu_variants.h"
#include "model/fused_cpu.h"
#include "model/hooks/registry.h"
#include "task/copy_task.h"
#include "step_compare.h"
#include "test_util.h"
#include "train/train_data.h"
#include "train/trainer.h"

namespace copytask {
using test::autograd_step;
using test::copy_inputs;
using test::gradients_of;
using test::StepResult;
using test::worst_relative_gradient_difference;
namespace {

// The tests of this file, once per CPU kernel variant.
class FusedCpu : public test::CpuVariantTest {};
INSTANTIATE_CPU_VARIANTS(FusedCpu);

// Every registered scheme and option (test_util.h), and variants of some schemes' own options.
std::vector<MemberSpec> every_scheme_members() {
  std::vector<MemberSpec> members = test::every_positional_member(test::small_shape(), 0, kFusedCpuStep);
  PositionalOptions partial_rope = test::small_options(), offset_alibi = test::small_options(),
                    learned_alibi = test::small_options();
  partial_rope.rope_fraction = 0.5;
  partial_rope.rope_base = 100;
  offset_alibi.alibi_direction = "offset";
  offset_alibi.alibi_slopes = {0.5, 0.25};
  learned_alibi.alibi_direction = "two-sided";
  learned_alibi.alibi_learned = true;
  const int64_t seed = static_cast<int64_t>(members.size());
  members.push_back({"rope-partial+causal", seed, "rope", true, partial_rope});
  members.push_back({"xpos-partial+causal", seed + 1, "xpos", true, partial_rope});
  members.push_back({"alibi-offset", seed + 2, "alibi", false, offset_alibi});
  members.push_back({"alibi-two-sided", seed + 3, "alibi", false, learned_alibi});
  return members;
}

// The members for a model of `heads` heads: given slopes are one per head.
std::vector<MemberSpec> with_heads(std::vector<MemberSpec> members, int64_t heads) {
  for (auto& member : members)
    if (!member.options.alibi_slopes.empty()) member.options.alibi_slopes.resize(static_cast<size_t>(heads), 0.125);
  return members;
}

StepResult fused_step(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                      const DropoutMasks* masks) {
  model->zero_grad();
  const PositionalTables tables = model->positional_tables(inputs.size(2));
  PositionalTables table_grads;
  auto losses = fused_cpu_loss_backward(*model, tables, inputs, targets, masks, &table_grads);
  model->positional_backward(tables, table_grads);
  return {losses, gradients_of(model)};
}

void expect_fused_equals_autograd(const EncoderShape& shape, int64_t batch, bool dropout) {
  Encoder model(shape, with_heads(every_scheme_members(), shape.heads), torch::kCPU);
  const int64_t M = model->member_count();
  auto inputs = test::random_tokens(M, batch, shape, 11);
  auto targets = test::random_tokens(M, batch, shape, 12);
  std::optional<DropoutMasks> masks;
  if (dropout) masks.emplace(model->dropout_masks(batch));
  const StepResult reference = autograd_step(model, inputs, targets, masks ? &*masks : nullptr);
  const StepResult fused = fused_step(model, inputs, targets, masks ? &*masks : nullptr);

  EXPECT_LT(test::max_abs_diff(reference.loss, fused.loss), 1e-5);
  std::string where;
  const double worst = worst_relative_gradient_difference(reference, fused, &where);
  std::printf("  heads %lld, batch %lld, dropout %d: loss diff %.1e, worst relative gradient diff %.1e (%s)\n",
              static_cast<long long>(shape.heads), static_cast<long long>(batch), dropout ? 1 : 0,
              test::max_abs_diff(reference.loss, fused.loss), worst, where.c_str());
  EXPECT_LT(worst, 1e-4) << where;
  test::expect_every_used_parameter_gets_a_gradient(model, reference, fused);
}

TEST_P(FusedCpu, SameLossAndGradientsAsAutogradForEverySchemeTwoHeadsWithDropout) {
  expect_fused_equals_autograd(test::small_shape(0.1), 70, true);
}

// Every layer form (config/layer_form.h) whose value lists the fused CPU step gives
// autograd's loss and gradients on it, for every scheme; every other is refused before any
// work, naming its key and value, and train.step = auto puts its batch on the autograd step.
TEST_P(FusedCpu, EveryLayerFormItListsGivesAutogradsNumbersTheOthersAreRefused) {
  for (const LayerForm& form : layer_forms_each_value()) {
    SCOPED_TRACE(layer_form_text(form));
    EncoderShape shape = test::small_shape(0.1);
    shape.form = form;
    if (layer_form_unsupported(form, kFusedCpuStep).empty()) {
      expect_fused_equals_autograd(shape, 70, true);
      continue;
    }
    Encoder model(shape, std::vector<MemberSpec>{{"rope", 0, "rope", false, test::small_options()}}, torch::kCPU);
    const std::string why = fused_cpu_unsupported(*model);
    EXPECT_EQ(why, layer_form_unsupported(form, kFusedCpuStep));
    for (const LayerFormValue* value : layer_form_chosen(form))
      if (!(value->steps & kFusedCpuStep)) {
        EXPECT_NE(why.find(value->key + " = " + value->value), std::string::npos) << why;
      }
    TaskConfig task;
    task.examples = 100;
    const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
    EXPECT_EQ(training_step_make(model, data, TrainConfig{})->name(), "autograd");
  }
}

TEST_P(FusedCpu, SameLossAndGradientsAsAutogradOneHeadReferenceShape) {
  EncoderShape shape;  // the reference model: embed 20, 1 head, 2 blocks, FF 32
  shape.dropout = 0.1;
  expect_fused_equals_autograd(shape, 130, true);
  expect_fused_equals_autograd(shape, 9, false);
}

TEST_P(FusedCpu, FourHeadsThreeBlocksNoDropout) {
  EncoderShape shape;
  shape.embed = 16;
  shape.heads = 4;
  shape.blocks = 3;
  shape.hidden = 24;
  shape.dropout = 0.0;
  expect_fused_equals_autograd(shape, 40, false);
}

// The gradients of the tables themselves, for every member and every one of its hooks
// (each marked learned, so the step returns even a fixed table's gradient), against autograd
// with the tables as leaves.
TEST_P(FusedCpu, TablesGradientsEqualAutogradsForEveryTable) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, every_scheme_members(), torch::kCPU);
  const int64_t M = model->member_count(), B = 33;
  auto inputs = test::random_tokens(M, B, shape, 21);
  auto targets = test::random_tokens(M, B, shape, 22);
  const DropoutMasks masks = model->dropout_masks(B);
  PositionalTables tables = model->positional_tables(shape.context);
  for (auto& table : tables.hooks) {
    if (table.stacked.defined()) table.stacked = table.stacked.detach().clone().requires_grad_(true);
    for (auto& member : table.members)
      if (member.defined()) member = member.detach().clone().requires_grad_(true);
  }
  member_losses(model->forward(inputs, tables, &masks, nullptr), targets).sum().backward();

  PositionalTables forced = tables;
  for (auto& table : forced.hooks) table.learned = table.used;
  PositionalTables fused;
  fused_cpu_loss_backward(*model, forced, inputs, targets, &masks, &fused);
  const auto& hooks = hook_registry();
  for (size_t index = 0; index < hooks.size(); ++index) {
    const HookTable& reference = tables.hooks[index];
    if (!reference.any_used()) continue;
    double scale = 0, diff = 0;
    for (int64_t m = 0; m < M; ++m) {
      if (!reference.used[m]) continue;
      const torch::Tensor expected = reference.stacked.defined() ? reference.stacked.grad()[m] : reference.members[m].grad();
      const torch::Tensor ours = fused.hooks[index].of(m);
      ASSERT_TRUE(ours.defined()) << hooks[index]->name() << " member " << m;
      const double member_scale = expected.abs().max().item<double>();
      const double member_diff = test::max_abs_diff(expected, ours);
      EXPECT_LT(member_diff, 1e-4 * std::max(member_scale, 1e-3)) << hooks[index]->name() << " " << model->members()[m].arm;
      scale = std::max(scale, member_scale);
      diff = std::max(diff, member_diff);
    }
    std::printf("  %s table gradient: largest %.2e, worst difference %.1e\n", hooks[index]->name().c_str(), scale, diff);
    EXPECT_GT(scale, 1e-4) << hooks[index]->name();
  }
}

// The forward pass evaluation and predict use: the same logits and attention weights as
// the LibTorch model.
TEST_P(FusedCpu, ForwardEqualsTheLibTorchModel) {
  const EncoderShape shape = test::small_shape(0.0);
  Encoder model(shape, every_scheme_members(), torch::kCPU);
  auto inputs = test::random_tokens(model->member_count(), 17, shape, 31);
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> reference_weights, fused_weights;
  auto reference = model->forward(inputs, nullptr, &reference_weights);
  auto fused = fused_cpu_forward(*model, model->positional_tables(shape.context), inputs, &fused_weights);
  EXPECT_LT(test::max_abs_diff(reference, fused), 1e-5);
  ASSERT_EQ(fused_weights.size(), reference_weights.size());
  for (size_t l = 0; l < fused_weights.size(); ++l) EXPECT_LT(test::max_abs_diff(reference_weights[l], fused_weights[l]), 1e-6);
}

// The comparison can fail: masks other than the forward's give other gradients.
TEST_P(FusedCpu, OtherDropoutMasksGiveOtherGradients) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, every_scheme_members(), torch::kCPU);
  auto inputs = test::random_tokens(model->member_count(), 50, shape, 11);
  auto targets = test::random_tokens(model->member_count(), 50, shape, 12);
  const DropoutMasks first = model->dropout_masks(50), second = model->dropout_masks(50);
  const StepResult reference = autograd_step(model, inputs, targets, &first);
  const StepResult other = fused_step(model, inputs, targets, &second);
  EXPECT_GT(worst_relative_gradient_difference(reference, other), 1e-2);
}

// The partitions fix the summation order: one thread or two, bit for bit the same.
TEST_P(FusedCpu, ResultDoesNotDependOnTheThreadCount) {
  const EncoderShape shape = test::small_shape(0.1);
  Encoder model(shape, every_scheme_members(), torch::kCPU);
  auto inputs = test::random_tokens(model->member_count(), 300, shape, 5);
  auto targets = test::random_tokens(model->member_count(), 300, shape, 6);
  const DropoutMasks masks = model->dropout_masks(300);
  const int threads = torch::get_num_threads();
  torch::set_num_threads(1);
  const StepResult one = fused_step(model, inputs, targets, &masks);
  torch::set_num_threads(2);
  const StepResult two = fused_step(model, inputs, targets, &masks);
  torch::set_num_threads(threads);
  EXPECT_EQ(test::max_abs_diff(one.loss, two.loss), 0.0);
  EXPECT_EQ(worst_relative_gradient_difference(one, two), 0.0);
}

// Whole training steps (masks, fused forward and backward, the schemes' parameters, Adam),
// full batch and minibatches: the fused trainer follows the autograd trainer's loss curve,
// on every variant of the kernels this CPU can run (the autograd curve computed once).
void expect_trains_like_the_autograd_step_on_every_variant(int64_t batch_size) {
  TaskConfig task;
  task.examples = 300;  // 270 training examples: the autograd step's full batch in two chunks (256 + 14)
  const TrainData data = train_data_upload(copy_task_generate(task), torch::kCPU);
  const CpuVariant before = cpu_variant_active();
  TrainConfig train;
  train.batch_size = batch_size;
  train.lr = 3e-3;
  auto curve = [&](bool fused) {
    Encoder model(test::small_shape(0.1), every_scheme_members(), torch::kCPU);
    const auto owned = training_step_make(model, data, test::with_step(train, fused));
    TrainingStep& step = *owned;
    EXPECT_EQ(step.name(), fused ? "fused CPU" : "autograd");
    std::vector<torch::Tensor> losses;
    for (int i = 0; i < 15; ++i) losses.push_back(step.run());
    return losses;
  };
  const auto autograd = curve(false);
  for (CpuVariant variant : cpu_variants_all()) {
    if (!cpu_variant_missing(variant).empty()) {
      std::printf("  %s: skipped, this CPU lacks %s\n", cpu_variant_name(variant), cpu_variant_missing(variant).c_str());
      continue;
    }
    ASSERT_EQ(cpu_variant_set(variant), "");
    const auto fused = curve(true);
    double worst = 0;
    for (size_t i = 0; i < autograd.size(); ++i) worst = std::max(worst, test::max_abs_diff(autograd[i], fused[i]));
    std::printf("  %s, batch %lld: largest loss difference over 15 steps, fused vs autograd: %.1e\n",
                cpu_variant_name(variant), static_cast<long long>(batch_size), worst);
    EXPECT_LT(worst, 1e-4) << cpu_variant_name(variant) << ", batch size " << batch_size;
    EXPECT_GT(test::max_abs_diff(fused.front(), fused.back()), 0.05) << "the loss moved";
  }
  cpu_variant_set(before);
}

// Full batch and minibatches as two tests, so that a failure says which.
TEST(FusedCpuTraining, TrainsLikeTheAutogradStepOnEveryVariantFullBatch) {
  expect_trains_like_the_autograd_step_on_every_variant(0);
}
TEST(FusedCpuTraining, TrainsLikeTheAutogradStepOnEveryVariantMinibatches) {
  expect_trains_like_the_autograd_step_on_every_variant(32);
}

// The variants against each other on one batch: float rounding apart (the same sums, but a
// loop the compiler vectorises at 16 and not at 8, or not without FMA, fuses other
// multiply-adds), and each within the tolerance that holds against autograd.
TEST(FusedCpuTraining, TheVariantsAgreeWithinFloatRounding) {
  const CpuVariant before = cpu_variant_active();
  for (int64_t heads : {int64_t{1}, int64_t{2}}) {
    EncoderShape shape = heads == 1 ? EncoderShape{} : test::small_shape(0.1);
    shape.dropout = 0.1;
    Encoder model(shape, with_heads(every_scheme_members(), heads), torch::kCPU);
    const int64_t M = model->member_count(), B = 70;
    auto inputs = test::random_tokens(M, B, shape, 41);
    auto targets = test::random_tokens(M, B, shape, 42);
    const DropoutMasks masks = model->dropout_masks(B);
    ASSERT_EQ(cpu_variant_set(CpuVariant::generic), "");
    const StepResult generic = fused_step(model, inputs, targets, &masks);
    for (CpuVariant variant : {CpuVariant::x86_64_v4, CpuVariant::x86_64_v3}) {
      if (!cpu_variant_missing(variant).empty()) {
        std::printf("  %s: skipped, this CPU lacks %s\n", cpu_variant_name(variant), cpu_variant_missing(variant).c_str());
        continue;
      }
      ASSERT_EQ(cpu_variant_set(variant), "");
      const StepResult result = fused_step(model, inputs, targets, &masks);
      const double loss = test::max_abs_diff(result.loss, generic.loss);
      const double gradient = worst_relative_gradient_difference(result, generic);
      std::printf("  %lld head(s): %s vs generic: loss %.1e, worst relative gradient %.1e\n",
                  static_cast<long long>(heads), cpu_variant_name(variant), loss, gradient);
      EXPECT_LT(loss, 1e-5) << cpu_variant_name(variant);
      EXPECT_LT(gradient, 1e-4) << cpu_variant_name(variant);
    }
  }
  cpu_variant_set(before);
}

// Forcing a variant: an unknown name or one this CPU cannot run is refused with the reason.
TEST(FusedCpuTraining, AForcedVariantIsCheckedAgainstThisCpu) {
  const CpuVariant before = cpu_variant_active();
  EXPECT_NE(cpu_variant_set("x86-64-v5").find("names no CPU kernel variant"), std::string::npos);
  EXPECT_EQ(cpu_variant_set("generic"), "");
  EXPECT_EQ(cpu_variant_active(), CpuVariant::generic);
  for (CpuVariant variant : cpu_variants_all()) {
    const std::string missing = cpu_variant_missing(variant);
    const std::string message = cpu_variant_set(variant);
    EXPECT_EQ(message.empty(), missing.empty()) << message;
    if (!missing.empty()) {
      EXPECT_NE(message.find(missing), std::string::npos) << message;
    }
  }
  EXPECT_EQ(cpu_variant_missing(CpuVariant::generic), "");
  cpu_variant_set(before);
}

// The core bench names beside the share of the peak: CPUID's vendor, family and model, and the
// microarchitecture they stand for (Zen 4 and 5, Sapphire and Emerald Rapids, ...).
TEST(FusedCpuTraining, TheCoreIsNamedFromCpuid) {
  EXPECT_EQ(cpu_microarchitecture("AuthenticAMD", 0x19, 0x11, true), "Zen 4");  // Genoa
  EXPECT_EQ(cpu_microarchitecture("AuthenticAMD", 0x19, 0x01, true), "Zen 4");  // a VM's masked model, AVX-512
  EXPECT_EQ(cpu_microarchitecture("AuthenticAMD", 0x19, 0x01, false), "Zen 3");  // Milan
  EXPECT_EQ(cpu_microarchitecture("AuthenticAMD", 0x1a, 0x02, true), "Zen 5");  // Turin
  EXPECT_EQ(cpu_microarchitecture("GenuineIntel", 6, 0x8f, true), "Sapphire Rapids");
  EXPECT_EQ(cpu_microarchitecture("GenuineIntel", 6, 0xcf, true), "Emerald Rapids");
  EXPECT_EQ(cpu_microarchitecture("GenuineIntel", 6, 0x01, false), "");
  const CpuCore core = cpu_core();
  std::printf("  this core: %s\n", core.text().c_str());
#if defined(__x86_64__)
  EXPECT_FALSE(core.vendor.empty());
  EXPECT_NE(core.text().find(" family "), std::string::npos);
#endif
}

// "auto": the widest variant this CPU can run (x86-64-v4 wherever it has AVX-512, Zen 4's
// 256-bit pipes included; x86-64-v3 with AVX2; generic without), each variant's features
// checked on their own (cpu_variant_missing), and one that is set by name is what runs.
TEST(FusedCpuTraining, TheDefaultVariantIsTheWidestRunnable) {
  const CpuVariant before = cpu_variant_active();
  const CpuVariant chosen = cpu_variant_default();
  EXPECT_EQ(cpu_variant_missing(chosen), "");
  for (CpuVariant variant : cpu_variants_all()) {  // widest first
    if (variant == chosen) break;
    EXPECT_NE(cpu_variant_missing(variant), "") << cpu_variant_name(variant) << " runs here and is wider than "
                                                << cpu_variant_name(chosen);
  }
  EXPECT_EQ(cpu_variant_set("auto"), "");
  EXPECT_EQ(cpu_variant_active(), chosen);
  cpu_variant_set(before);
  std::printf("  auto runs %s here (%s)\n", cpu_variant_name(chosen), cpu_fma_peak_per_cycle(chosen).why.c_str());
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// Position IDs on the fused step, for each kind (random, offset, coupled): every scheme that
// reads positions and takes the kind (and members at 0..T-1 batched beside), each example
// at its own IDs of 0..39, gives autograd's loss and every gradient through the gathered
// tables, and the same forward pass at the evaluation IDs.
TEST_P(FusedCpu, PositionIdsOfEveryKindGiveAutogradsLossAndGradients) {
  for (const std::string kind : {"random", "offset", "coupled"}) {
    std::vector<MemberSpec> members;
    for (auto member : with_heads(every_scheme_members(), 2)) {
      member.options.position_ids = kind;
      member.options.position_range = 40;
      if (!test::positional_runs(member.positional, member.options, member.causal, test::small_shape())) continue;  // refuses the kind
      if (member.positional == "learned") member.options.learned_positions = 40;
      members.push_back(member);
    }
    members.push_back({"sinusoidal-plain", 20, "sinusoidal", false, {}});  // 0..T-1 beside them
    // A plain learned table has T rows, fewer than the batch's 40: the batch pads it.
    members.push_back({"learned-plain", 21, "learned", false, {}});
    Encoder model(test::small_shape(0.1), members, torch::kCPU);
    const int64_t M = model->member_count(), B = 37;
    auto inputs = copy_inputs(M, B);
    auto targets = test::random_tokens(M, B, test::small_shape(), 22);
    const DropoutMasks masks = model->dropout_masks(B);
    const torch::Tensor positions = model->training_positions(inputs);  // (M, B, T)
    ASSERT_TRUE(positions.defined());
    EXPECT_EQ(model->table_positions(10), 40);

    model->zero_grad();
    auto reference_losses = member_losses(model->forward(inputs, &masks, nullptr, positions), targets);  // (M)
    reference_losses.sum().backward();
    const StepResult reference{reference_losses.detach(), gradients_of(model)};

    model->zero_grad();
    const PositionalTables tables = model->positional_tables(40);
    PositionalTables table_grads;
    auto losses = fused_cpu_loss_backward(*model, tables, inputs, targets, &masks, &table_grads, positions);
    model->positional_backward(tables, table_grads);
    const StepResult fused{losses, gradients_of(model)};

    EXPECT_LT(test::max_abs_diff(reference.loss, fused.loss), 1e-5) << kind;
    std::string where;
    const double worst = worst_relative_gradient_difference(reference, fused, &where);
    std::printf("  position IDs %-8s %2lld members: loss diff %.1e, worst relative gradient diff %.1e (%s)\n", kind.c_str(),
                static_cast<long long>(M), test::max_abs_diff(reference.loss, fused.loss), worst, where.c_str());
    EXPECT_LT(worst, 1e-4) << kind << " " << where;

    // The plain learned member trains in this batch as it does alone (its T rows, padded).
    {
      Encoder alone(test::small_shape(0.1), std::vector<MemberSpec>{members.back()}, torch::kCPU);
      const DropoutMasks alone_masks = alone->dropout_masks(B);
      const PositionalTables alone_tables = alone->positional_tables(10);
      PositionalTables alone_grads;
      auto alone_loss = fused_cpu_loss_backward(*alone, alone_tables, inputs.narrow(0, M - 1, 1),
                                                targets.narrow(0, M - 1, 1), &alone_masks, &alone_grads);
      EXPECT_LT(std::abs(alone_loss[0].item<double>() - fused.loss[M - 1].item<double>()), 1e-5) << kind;
    }

    // The forward passes agree too, at the evaluation IDs.
    const torch::Tensor at = model->evaluation_positions(inputs, 0);
    torch::NoGradGuard no_grad;
    const auto fused_at = fused_cpu_forward(*model, model->positional_tables(40), inputs, nullptr, at);
    EXPECT_LT(test::max_abs_diff(fused_at, model->forward(inputs, nullptr, nullptr, at)), 1e-4) << kind;
    // And other IDs give other logits: the IDs are used.
    EXPECT_GT(test::max_abs_diff(fused_at, fused_cpu_forward(*model, model->positional_tables(40), inputs, nullptr, positions)),
              1e-3)
        << kind;
  }
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// The group of examples the step runs through the layers together (fused_cpu.h) changes no
// loss and no parameter's gradient, bit for bit, nor (but for rounding where the blocks share
// a table) the tables' gradients: every scheme, two heads, with dropout masks, at the
// default position IDs and at random ones (the tables gathered), for groups of 2, 3 and 8,
// which leave a partial group at a partition's end, against groups of 1 (one example at a
// time). The default's groups of 16 take the examples across the lanes where the member has
// no hook at the scores or the softmax (70 examples, four whole groups and one of 6): the
// same loss and the same gradients but the blocks' parameters', which sum the examples a lane
// apart first (cpu_lanes_layers.h), and so agree to the rounding of a sum of 70 terms in
// another order.
TEST_P(FusedCpu, TheGroupOfExamplesChangesNoNumber) {
  for (const bool random_ids : {false, true}) {
    std::vector<MemberSpec> members;
    for (auto member : with_heads(every_scheme_members(), 2)) {
      if (random_ids) {
        member.options.position_ids = "random";
        member.options.position_range = 40;
        if (!test::positional_runs(member.positional, member.options, member.causal, test::small_shape())) continue;
        if (member.positional == "learned") member.options.learned_positions = 40;
      }
      members.push_back(member);
    }
    Encoder model(test::small_shape(0.1), members, torch::kCPU);
    const int64_t M = model->member_count(), B = 70;  // one partition of 70: groups of 3 leave 1, of 4 leave 2
    auto inputs = test::random_tokens(M, B, test::small_shape(), 31);
    auto targets = test::random_tokens(M, B, test::small_shape(), 32);
    const DropoutMasks masks = model->dropout_masks(B);
    const torch::Tensor positions = random_ids ? model->training_positions(inputs) : torch::Tensor();
    const PositionalTables tables = model->positional_tables(random_ids ? 40 : 10);
    struct Run {
      torch::Tensor loss;
      std::vector<torch::Tensor> grads, table_grads;
    };
    auto run = [&](int64_t group) {
      model->zero_grad();
      PositionalTables table_grads;
      Run out;
      out.loss = fused_cpu_loss_backward(*model, tables, inputs, targets, &masks, &table_grads, positions, group);
      out.grads = gradients_of(model);  // the stacked parameters' (the schemes' come through the tables')
      for (const auto& table : table_grads.hooks) {
        if (table.stacked.defined()) out.table_grads.push_back(table.stacked);
        for (const auto& member : table.members)
          if (member.defined()) out.table_grads.push_back(member);
      }
      return out;
    };
    const Run one_at_a_time = run(1);
    int64_t nonzero = 0;
    for (const auto& g : one_at_a_time.table_grads) nonzero += g.abs().sum().item<double>() > 0;
    EXPECT_GT(nonzero, 0) << "no learned table got a gradient: the test would not see them";
    const auto names = model->named_parameters().keys();  // in gradients_of's order
    // In lanes the blocks', the final layer norm's and the head's gradients are summed a lane
    // apart; the token embedding's stays in rows, exact.
    auto summed_a_lane_apart = [&](size_t j) {
      for (const char* prefix : {"blocks.", "ln_f.", "head."})
        if (names[j].rfind(prefix, 0) == 0) return true;
      return false;
    };
    double largest_lanes_difference = 0;
    for (const int64_t group : {2, 3, 8, 0}) {
      const Run grouped = run(group);
      const bool lanes = group == 0;  // the default: 16
      EXPECT_TRUE(torch::equal(grouped.loss, one_at_a_time.loss)) << "group " << group;
      ASSERT_EQ(grouped.grads.size(), one_at_a_time.grads.size());
      for (size_t j = 0; j < grouped.grads.size(); ++j) {
        const double difference = test::max_abs_diff(grouped.grads[j], one_at_a_time.grads[j]);
        if (lanes && summed_a_lane_apart(j)) {
          // Summed a lane apart: float rounding of the reordered sum, against the gradient's size.
          const double scale = one_at_a_time.grads[j].abs().max().item<double>();
          largest_lanes_difference = std::max(largest_lanes_difference, difference / scale);
          EXPECT_LE(difference, 1e-5 * scale) << names[j] << (random_ids ? " (random IDs)" : "");
        } else {
          EXPECT_EQ(difference, 0.0) << "group " << group << ", " << names[j]
                                     << (random_ids ? " (random IDs)" : "");
        }
      }
      ASSERT_EQ(grouped.table_grads.size(), one_at_a_time.table_grads.size());
      for (size_t j = 0; j < grouped.table_grads.size(); ++j) {
        // At random IDs every hook sums an example's table gradient apart and adds it at the
        // example's end: exact. At 0..T-1 a hook whose table the blocks share sums straight
        // into the member's gradient, block after block, and a group orders those terms by
        // block first (fused_cpu.h): the same within float rounding.
        const double scale = one_at_a_time.table_grads[j].abs().max().item<double>();
        const double difference = test::max_abs_diff(grouped.table_grads[j], one_at_a_time.table_grads[j]);
        if (random_ids)
          EXPECT_EQ(difference, 0.0) << "group " << group << ", table gradient " << j << " (random IDs)";
        else
          EXPECT_LE(difference, 1e-6 * scale) << "group " << group << ", table gradient " << j;
      }
    }
    std::printf("  the gradients summed a lane apart: largest difference %.3g of the gradient's largest%s\n",
                largest_lanes_difference, random_ids ? " (random IDs)" : "");
    EXPECT_GT(largest_lanes_difference, 0.0) << "the lanes' sums gave the rows' bits: did the default run in lanes?";
  }
}

}  // namespace
}  // namespace copytask
