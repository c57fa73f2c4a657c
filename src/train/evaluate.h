#pragma once
// Evaluation in eval mode (no dropout): each member's loss, whole-sequence exact match and
// token accuracy over a split. Shapes: M members, N examples, T positions.
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "model/encoder.h"
#include "records/scores.h"
#include "task/length_sets.h"

namespace copytask {

// SplitScores and LengthScores (records/scores.h): what the evaluations below return.
// (The means of why, source attention and the rest, are kept at 6 significant digits:
// measurement_rounded, records/scores.h.)

// The logits of inputs (M, N, T) without dropout (M, N, T, V): the hand-written forward
// pass on the CPU (model/fused_cpu.h, the training step's own), LibTorch's elsewhere.
// attention_out, when given, receives each block's weights (M, N, H, T, T).
// Under task.format = next-token the outputs are generated greedily, each fed back in, and the
// logits are those of the generated sequence (the inputs' own outputs are never read).
// Under position IDs other than 0..T-1, the examples sit at model->evaluation_positions(inputs, first):
// first is the index of inputs' first example in its split, so a chunk draws what the whole would.
torch::Tensor model_logits(Encoder& model, const torch::Tensor& inputs, std::vector<torch::Tensor>* attention_out = nullptr,
                           int64_t first = 0);

// inputs, targets: (N, T) int64 on the model's device. One entry per member.
// noise_token: selective's (not counted in a content length), -1 = none.
std::vector<SplitScores> evaluate_split(Encoder& model, const torch::Tensor& inputs, const torch::Tensor& targets,
                                        int64_t noise_token = -1, int64_t chunk = 1024);

// The length-generalization sets on a device. Per length, S input sets of N_k examples
// each: S = 1 under eval.inputs = shared (every member reads set 0), else one per seed of
// set_seeds (a member reads its seed's set).
struct LengthData {
  std::vector<int64_t> lengths, contexts;
  std::vector<bool> trained;  // a length the training split holds
  std::vector<torch::Tensor> inputs, targets;  // per length (S, N_k, T_k) int64 on the device
  // Per length, what each output copies (task/task_kind.h): the output's position and its
  // source's, (S, N_k, k) int64 on the device; and on the host, for the error kinds, each
  // set's inputs (N_k x T_k) and its examples' sources. The task says what the tokens are.
  std::vector<torch::Tensor> output_at, source_at;
  std::vector<std::vector<std::vector<int64_t>>> host_inputs;         // [length][set]
  std::vector<std::vector<std::vector<OutputSources>>> host_sources;  // [length][set][example]
  std::vector<int64_t> set_seeds;  // the seed of each set under per-seed; empty = one shared set
  TaskConfig task;
  // RoPE's rescalings evaluated beside the plain numbers at the end (eval.rope_rescaling,
  // eval.rope_factor; 0 = per length), and the context the members trained at.
  std::vector<std::string> rope_rescaling;
  double rope_factor = 0;
  int64_t trained_context = 0;
  // Where offset and coupled IDs start at these lengths (eval.position_start).
  EvaluationStart position_start = EvaluationStart::zero;
  bool empty() const { return lengths.empty(); }
  // The set a member of this seed reads; throws std::logic_error where none was drawn for it.
  int64_t set_of(int64_t seed) const;
  // The sets of length index i alone.
  LengthData only(size_t i) const;
};
// The sets (one shared set, or one set per seed of set_seeds: by_set[s] drawn for set_seeds[s])
// on a device; the evaluation settings are the caller's to set.
LengthData length_data_upload(const std::vector<std::vector<LengthSet>>& by_set, const std::vector<int64_t>& set_seeds,
                              const TaskConfig& task, const torch::Device& device);
// One shared set.
LengthData length_data_upload(const std::vector<LengthSet>& sets, const TaskConfig& task, const torch::Device& device);
// What eval asks for (eval.inputs: one shared set, or one per seed of `seeds`), with its
// settings (eval.rope_rescaling, eval.rope_factor, eval.position_start); the members trained
// at context trained_context.
LengthData length_data_make(const TaskConfig& task, const EvalConfig& eval, const CopySplit& train,
                            const std::vector<int64_t>& seeds, int64_t trained_context, const torch::Device& device);

// [member][length]: each member's scores (records/scores.h) at every length of data, in
// eval mode, over the k outputs only (task/task_kind.h; k + 1 .. 2k for copy and reverse):
// exact = every output right, token = the share of outputs right, and why: the share right
// at each output, the attention each block and head puts on each output's source, the
// entropy of the output rows, and the wrong outputs by kind (task/output_errors.h). NaN
// with `skipped` saying why where the member cannot run at that context: a length whose
// context exceeds the model's position_limit() is skipped for every member (evaluate a
// learned member alone to get its own limit).
std::vector<std::vector<LengthScores>> evaluate_lengths(Encoder& model, const LengthData& data, int64_t chunk = 512);

// One rescaling's evaluation at every length: its method and factor (0 = per length), each
// member's scores [member][length] where it rotates q and k and takes the rescaling, and
// otherwise why not ("" where evaluated).
struct RescaledLengths {
  std::string method;
  double factor = 0;
  std::vector<std::vector<LengthScores>> lengths;  // [member][length]; empty for a member skipped
  std::vector<std::string> skipped;                // per member
};
// Every rescaling of data.rope_rescaling at every length of data, in eval mode; the model's
// tables are plain again afterwards.
std::vector<RescaledLengths> evaluate_rope_rescalings(Encoder& model, const LengthData& data, int64_t chunk = 512);
// Member m's entry of result.json's "length_generalization_rescaled" (report/results.h):
// {"<method>": its lengths, or {"skipped": why}}; null for a member that does not rotate q and k.
nlohmann::json rescaled_member_json(const std::vector<RescaledLengths>& rescaled, int64_t member, int64_t train_max_len,
                                    int64_t positions_trained);

// Content length k of each input (the tokens before <copy> but the noise token, when
// given; the position of <copy> for copy and reverse): (N, T) -> (N) int64.
torch::Tensor content_lengths(const torch::Tensor& inputs, int64_t vocab_size, int64_t noise_token = -1);

// Greedy outputs: (M, N, T) int64 argmax tokens for inputs (N, T).
torch::Tensor predict_tokens(Encoder& model, const torch::Tensor& inputs,
                             std::vector<torch::Tensor>* attention_out = nullptr);

}  // namespace copytask
