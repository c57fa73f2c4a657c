#include "model/fused_gpu.h"

#include <algorithm>
#include <stdexcept>

#include <torch/torch.h>

#include "kernels/cuda_switch.h"
#include "model/hooks/registry.h"
#include "model/parameter_layout.h"
#if COPYTASK_CUDA_KERNELS()
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#endif

namespace copytask {
namespace {

kernels::StepShape step_shape(const EncoderImpl& model, int64_t B, int64_t T, int64_t P) {
  const EncoderShape& shape = model.shape();
  kernels::StepShape s;
  s.B = static_cast<int>(B);
  s.T = static_cast<int>(T);
  s.D = static_cast<int>(shape.embed);
  s.H = static_cast<int>(shape.heads);
  s.Dh = static_cast<int>(shape.head_dim());
  s.F = static_cast<int>(shape.hidden);
  s.V = static_cast<int>(shape.vocab);
  s.L = static_cast<int>(shape.blocks);
  s.P = static_cast<int>(P);
  return s;
}

int64_t shared_bytes_of(const EncoderImpl& model, const FusedGpuExecution& execution) {
  if (execution.shared_bytes > 0) return execution.shared_bytes;
#if COPYTASK_CUDA_KERNELS()
  if (model.device().is_cuda()) {
    const c10::cuda::CUDAGuard on_device(model.device());
    return kernels::fused_step_shared_memory_limit();
  }
#endif
  return kHopperSharedBytes;
}

// The kernel's form of registry hook `index`, and the member flag that says the member's
// table of that form is learned.
kernels::MemberFlag learned_flag(KernelTableForm form) {
  switch (form) {
    case KernelTableForm::embedding_rows: return kernels::kLearnsEmbeddingRows;
    case KernelTableForm::pair_angles: return kernels::kLearnsPairAngles;
    case KernelTableForm::score_bias: return kernels::kLearnsScoreBias;
    case KernelTableForm::none: break;
  }
  throw std::logic_error("fused_gpu: a hook without a kernel form");
}

}  // namespace

namespace {
// Why a member's positional cannot run on the kernels: the first of its hooks without a form.
std::string hooks_problem(PositionalScheme& positional, const std::string& name) {
  for (const Hook* hook : positional.member_hooks())
    if (hook->kernel_form() == KernelTableForm::none)
      return "positional scheme " + name + " acts through the " + hook->name() +
             " hook, which the fused GPU step has no kernel for";
  return "";
}
}  // namespace

std::string fused_gpu_scheme_problem(const std::string& positional, const PositionalOptions& options,
                                     const EncoderShape& shape, bool causal) {
  const PositionalShape positional_shape{shape.context, shape.embed, shape.heads, shape.blocks, causal};
  return hooks_problem(*positional_scheme_make(positional, options, positional_shape), positional);
}

std::string fused_gpu_unsupported(EncoderImpl& model, int64_t T, const FusedGpuExecution& execution) {
  if (model.tok_emb.scalar_type() != torch::kFloat32) return "the model is not float32";
  if (model.device().is_cuda() && !COPYTASK_CUDA_KERNELS())
    return "this build has no CUDA kernels of its own (CMake printed \"copytask's CUDA kernels: OFF\")";
  if (!model.device().is_cuda() && !model.device().is_cpu()) return "the model is neither on a GPU nor on the CPU";
  const std::string form = layer_form_fused_gpu_problem(model.shape().form);
  if (!form.empty()) return form;
  if (model.shape().blocks > kernels::kMaxBlocks)
    return "model.blocks = " + std::to_string(model.shape().blocks) + ": the kernel holds at most " +
           std::to_string(kernels::kMaxBlocks) + " blocks";
  for (int64_t m = 0; m < model.member_count(); ++m) {
    const std::string problem = hooks_problem(model.scheme(m), model.members()[m].positional);
    if (!problem.empty()) return "member " + model.members()[m].arm + "'s " + problem;
  }
  const kernels::StepShape s = step_shape(model, 1, T, model.table_positions(T));
  const int64_t shared = shared_bytes_of(model, execution);
  if (kernels::tile_examples(s, shared, execution.kept_global) < 1)
    return "one example's activations (" + std::to_string(kernels::tile_layout(s, 1, execution.kept_global).floats * 4) +
           " bytes at T = " + std::to_string(T) + ") do not fit the " + std::to_string(shared) +
           " bytes of shared memory a multiprocessor has (less the runtime's 1 KB a block)";
  return "";
}

FusedGpuKernels::FusedGpuKernels(EncoderImpl& model, int64_t B, int64_t T, const FusedGpuExecution& execution)
    : model_(model), B_(B), T_(T), P_(model.table_positions(T)), execution_(execution) {
  const std::string why = fused_gpu_unsupported(model, T, execution);
  TORCH_CHECK(why.empty(), "the fused GPU step cannot run this model: ", why);
  TORCH_CHECK(B >= 1 && B <= (int64_t{1} << 30) && T >= 1, "fused GPU step: B and T must be >= 1");
  const kernels::StepShape s = step_shape(model, B, T, P_);
  int E = kernels::tile_examples(s, shared_bytes_of(model, execution), execution.kept_global);
  if (execution.tile_examples > 0) E = std::min(E, execution.tile_examples);
  tile_ = kernels::tile_layout(s, E, execution.kept_global);
  const int64_t M = model.member_count();

  // A member's flat gradient: its parameters in the layout's order (model/parameter_layout.h),
  // then a slot for each kernel-form table some member learns.
  for (const auto& [name, tensor] : model.stacked_parameters()) parameter_floats_ += tensor.numel() / M;
  flat_ = partial_flat_ = parameter_floats_;
  const auto& registry = hook_registry();
  slot_.assign(registry.size(), kernels::TableGrad{});
  std::vector<uint8_t> flags(static_cast<size_t>(M), 0);
  for (int64_t m = 0; m < M; ++m)
    if (model.members()[m].causal) flags[m] |= kernels::kMemberCausal;
  const EncoderShape& shape = model.shape();
  for (size_t index = 0; index < registry.size(); ++index) {
    const Hook& hook = *registry[index];
    if (hook.kernel_form() == KernelTableForm::none) continue;
    bool learned = false;
    for (int64_t m = 0; m < M; ++m)
      if (execution.every_table_learned ? model.scheme(m).owner_of(hook) != nullptr : model.scheme(m).learned_for(hook)) {
        flags[m] |= learned_flag(hook.kernel_form());
        learned = true;
      }
    if (!learned) continue;
    kernels::TableGrad& slot = slot_[index];
    slot.floats = 1;
    for (int64_t size : hook.table_shape(shape, P_)) slot.floats *= size;
    // A table every attention block reads gets a copy of its gradient per block.
    slot.copies = hook.kernel_form() == KernelTableForm::embedding_rows ? 1 : static_cast<int>(shape.blocks);
    slot.grad = flat_;
    slot.partial = partial_flat_;
    flat_ += slot.floats;
    partial_flat_ += slot.copies * slot.floats;
  }
  const auto device = model.device();
  const auto on_device = torch::TensorOptions().device(device);
  flags_ = torch::tensor(std::vector<int64_t>(flags.begin(), flags.end()), torch::kLong).to(torch::kUInt8).to(device);  // (M)
  // The partitions by the tile a Hopper GPU holds, whatever GPU runs them (kernels/fused_step.h).
  partition_examples_ =
      kernels::examples_per_partition(static_cast<int>(B), kernels::tile_examples(s, kHopperSharedBytes));
  const int64_t K = kernels::partition_count(static_cast<int>(B), partition_examples_);
  partial_ = torch::empty({M, K, partial_flat_}, on_device.dtype(torch::kFloat32));  // (M, K, partial_flat)
  partial_loss_ = torch::empty({M, K}, on_device.dtype(torch::kFloat64));         // (M, K)
  grads_ = torch::empty({M, flat_}, on_device.dtype(torch::kFloat32));            // (M, flat)
  member_loss_ = torch::empty({M}, on_device.dtype(torch::kFloat32));             // (M)
  if (execution.kept_global) {
    // A slot for each block: at most the whole batch's kept activations, which the device
    // step holds too (1.4 GB for the reference study).
    kept_ = torch::empty({M, K, tile_.kept_floats}, on_device.dtype(torch::kFloat32));  // (M, K, kept floats)
  }
}

torch::Tensor FusedGpuKernels::loss_backward(const PositionalTables& tables, const torch::Tensor& inputs,
                                             const torch::Tensor& targets, const torch::Tensor& positions,
                                             const torch::Tensor& dropout_keys, PositionalTables* table_grads) {
  const int64_t M = model_.member_count();
  TORCH_CHECK(inputs.dim() == 3 && inputs.size(0) == M && inputs.size(1) == B_ && inputs.size(2) == T_,
              "fused GPU step: inputs must be (M, B, T) = (", M, ", ", B_, ", ", T_, ")");
  TORCH_CHECK(targets.sizes() == inputs.sizes(), "fused GPU step: targets must have the inputs' shape");
  TORCH_CHECK(inputs.scalar_type() == torch::kLong && targets.scalar_type() == torch::kLong, "fused GPU step: int64 tokens");
  TORCH_CHECK(tables.positions == P_ && !tables.per_example, "fused GPU step: tables for ", P_,
              " positions, not gathered per example");
  const auto device = model_.device();
  // The kernels read every pointer below on the model's device: a host pointer handed to a GPU
  // launch is an illegal address there, found only after the launch.
  TORCH_CHECK(inputs.device() == device && targets.device() == device,
              "fused GPU step: tokens must be on the model's device");
  kernels::FusedStepArgs a;
  a.s = step_shape(model_, B_, T_, P_);
  a.members = static_cast<int>(M);
  a.partition_examples = partition_examples_;
  a.partitions = kernels::partition_count(a.s.B, partition_examples_);
  a.tile = tile_;
  if (kept_.defined()) a.kept = kept_.data_ptr<float>();
  a.divisors = kernels::step_divisors(a.s);
  a.vector_loads = execution_.vector_loads;
  a.small_items = execution_.small_items;
  a.tokens = inputs.data_ptr<int64_t>();
  a.targets = targets.data_ptr<int64_t>();
  for (int d = 0; d < 3; ++d) {
    a.token_stride[d] = inputs.stride(d);
    a.target_stride[d] = targets.stride(d);
  }
  torch::Tensor positions_contiguous;
  if (positions.defined()) {
    TORCH_CHECK(positions.sizes() == inputs.sizes() && positions.scalar_type() == torch::kLong &&
                    positions.device() == device,
                "fused GPU step: positions must be int64 (M, B, T) on the model's device");
    positions_contiguous = positions.contiguous();
    a.positions = positions_contiguous.data_ptr<int64_t>();
  }
  a.member_flags = flags_.data_ptr<uint8_t>();
  a.loss_weight = static_cast<float>(1.0 / (static_cast<double>(B_) * static_cast<double>(T_)));
  a.flat = flat_;
  a.parameter_floats = parameter_floats_;
  a.partial_flat = partial_flat_;
  a.partial = partial_.data_ptr<float>();
  a.partial_loss = partial_loss_.data_ptr<double>();
  a.grads = grads_.data_ptr<float>();
  a.member_loss = member_loss_.data_ptr<float>();

  // The parameters: member 0's values, and each one's offset in the flat gradient; every
  // gradient a view of grads_.
  const auto parameters = model_.stacked_parameters();
  std::vector<kernels::ParameterSlot> slots;
  int64_t offset = 0;
  for (const auto& [name, tensor] : parameters) {
    TORCH_CHECK(tensor.is_contiguous() && tensor.scalar_type() == torch::kFloat32 && tensor.device() == device,
                "fused GPU step: parameter ", name, " must be contiguous float32 on the model's device");
    const int64_t floats = tensor.numel() / M;
    slots.push_back({tensor.data_ptr<float>(), offset});
    torch::Tensor grad = grads_.narrow(1, offset, floats).view(tensor.sizes());  // (M, ...): member m's row of grads_
    tensor.mutable_grad() = grad;
    offset += floats;
  }
  constexpr int kTok = parameter_position(kGlobalParameterNames, "tok_emb");
  constexpr int kFirstBlock = static_cast<int>(kGlobalParameterNames.size());
  constexpr int kPerBlock = static_cast<int>(kBlockParameterNames.size());
  auto global = [&](std::string_view name) { return slots[parameter_position(kGlobalParameterNames, name)]; };
  auto block = [&](int64_t l, std::string_view name) {
    return slots[kFirstBlock + l * kPerBlock + parameter_position(kBlockParameterNames, name)];
  };
  kernels::ModelParameters& p = a.parameters;
  p.tok_emb = slots[kTok];
  p.ln_f = {global("ln_f.weight"), global("ln_f.bias")};
  p.head = {global("head.weight"), global("head.bias")};
  for (int64_t l = 0; l < model_.shape().blocks; ++l) {
    kernels::BlockParameters& b = p.block[l];
    b.ln1 = {block(l, "ln1.weight"), block(l, "ln1.bias")};
    b.qkv = {block(l, "attn.qkv.weight"), {}};
    b.proj = {block(l, "attn.proj.weight"), block(l, "attn.proj.bias")};
    b.ln2 = {block(l, "ln2.weight"), block(l, "ln2.bias")};
    b.fc1 = {block(l, "ff.fc1.weight"), block(l, "ff.fc1.bias")};
    b.fc2 = {block(l, "ff.fc2.weight"), block(l, "ff.fc2.bias")};
  }

  // The tables of the hooks with a kernel form, float32 and contiguous (M, ...); their
  // gradients views of grads_ where some member learns them.
  const auto& registry = hook_registry();
  std::vector<torch::Tensor> kept;  // alive until the launch has read them
  if (table_grads) *table_grads = tables;
  for (size_t index = 0; index < registry.size(); ++index) {
    const HookTable& table = tables.hooks[index];
    const KernelTableForm form = registry[index]->kernel_form();
    if (!table.any_used()) continue;
    TORCH_CHECK(form != KernelTableForm::none, "fused GPU step: hook ", registry[index]->name(), " has no kernel form");
    TORCH_CHECK(table.stacked.device() == device, "fused GPU step: hook ", registry[index]->name(),
                "'s table must be on the model's device");
    const torch::Tensor values = table.stacked.detach().to(torch::kFloat32).contiguous();  // (M, table shape...)
    switch (form) {
      case KernelTableForm::embedding_rows:
        kept.push_back(values);
        a.tables.embedding_rows = values.data_ptr<float>();
        a.tables.embedding_rows_grad = slot_[index];
        break;
      case KernelTableForm::pair_angles:
        kept.push_back(values.cos().contiguous());
        a.tables.pair_cos = kept.back().data_ptr<float>();
        kept.push_back(values.sin().contiguous());
        a.tables.pair_sin = kept.back().data_ptr<float>();
        a.tables.pair_angles_grad = slot_[index];
        break;
      case KernelTableForm::score_bias:
        kept.push_back(values);
        a.tables.score_bias = values.data_ptr<float>();
        a.tables.score_bias_grad = slot_[index];
        break;
      case KernelTableForm::none: break;
    }
    if (table_grads && slot_[index].grad >= 0)
      table_grads->hooks[index].stacked = grads_.narrow(1, slot_[index].grad, slot_[index].floats).view(values.sizes());
  }

  // Dropout: the stream of model/dropout_stream.h at this step's keys, in the row layout of
  // model/dropout_sites.h.
  const EncoderShape& shape = model_.shape();
  torch::Tensor keys;
  if (dropout_keys.defined() && shape.dropout > 0) {
    TORCH_CHECK(dropout_keys.sizes() == torch::IntArrayRef{M} && dropout_keys.scalar_type() == torch::kLong &&
                    dropout_keys.device() == device,
                "fused GPU step: dropout keys must be (M) int64 on the model's device");
    keys = dropout_keys.contiguous();
    const DropoutStream rates({}, 0, shape.dropout);
    const DropoutLayout layout(shape, B_);
    a.dropout.step_keys = keys.data_ptr<int64_t>();
    a.dropout.threshold = rates.threshold;
    a.dropout.kept_value = rates.kept_value;
    a.dropout.block_floats = layout.start(1, kAttentionWeights) - layout.start(0, kAttentionWeights);
    for (int site = 0; site < kDropoutSites; ++site) {
      a.dropout.site_start[site] = layout.start(0, static_cast<DropoutSite>(site));
      a.dropout.example_floats[site] = layout.example_size(static_cast<DropoutSite>(site));
    }
  }

  if (device.is_cuda()) {
#if COPYTASK_CUDA_KERNELS()
    const c10::cuda::CUDAGuard on_device(device);
    const int error = kernels::fused_step_launch(a, c10::cuda::getCurrentCUDAStream().stream());
    TORCH_CHECK(error == 0, "the fused GPU step's kernels did not launch (cudaError_t ", error, ")");
#endif
  } else {
    kernels::Emulation emulation;
    emulation.threads = execution_.threads;
    emulation.shuffle_seed = execution_.shuffle_seed;
    kernels::fused_step_emulate(a, emulation);
  }
  return member_loss_.clone();
}

}  // namespace copytask
