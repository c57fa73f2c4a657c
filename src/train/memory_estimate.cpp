#include "train/memory_estimate.h"

#include <algorithm>
#include <cstdio>

#include "model/positional.h"
#include "task/copy_task.h"

namespace copytask {

double MemoryEstimate::host() const { return data_bytes + process_bytes + (device > 0 ? 0 : training_bytes); }

MemoryEstimate memory_estimate(const Config& c, int64_t members, const c10::Device& device) {
  const double M = static_cast<double>(members);
  const double N = static_cast<double>(c.task.examples), T = static_cast<double>(c.task.context);
  const double Lmax = static_cast<double>(c.task.max_len), V = static_cast<double>(c.task.vocab_size);
  const double D = static_cast<double>(c.model.embed), H = static_cast<double>(c.model.heads);
  const double F = static_cast<double>(c.model.hidden), L = static_cast<double>(c.model.blocks);
  const double B = c.train.batch_size > 0 ? static_cast<double>(c.train.batch_size)
                                          : static_cast<double>(copy_task_split_sizes(c.task).first);
  MemoryEstimate e;
  // The generator keeps each example's content and its dedup key (about 11 bytes a token
  // and 200 of bookkeeping), then the splits' int64 inputs and targets (16 T bytes) and
  // their tensors (again, plus the copy torch::tensor makes on the way).
  e.data_bytes = N * (11 * Lmax + 200 + 48 * T);
  // One member's parameters: the stacked ones and a scheme's (a learned table, T5's
  // buckets, a bias MLP: at most these). Each is held as value, gradient and two Adam moments.
  const PositionalOptions& o = c.model.positional_options;
  const double scheme = static_cast<double>(learned_rows(o, c.task.context)) * D + static_cast<double>(o.t5_buckets) * H +
                        static_cast<double>(o.dynamic_depth + 1) * static_cast<double>(o.bias_mlp_hidden) *
                            std::max<double>(static_cast<double>(o.bias_mlp_hidden), H + 1);
  const double P = V * D + L * (2 * D + 3 * D * D + D * D + D + 2 * D + D * F + F + F * D + D) + 2 * D + D * V + V + scheme;
  double training = 4 * 4 * M * P;
  // The fused CPU step: up to 16 partial gradients of every member (with the tables'
  // gradients) and each member's copies of its weights; the minibatch's tokens.
  // (Position IDs other than 0..T-1 make the tables for L positions, and each example gathers its rows.)
  const double Pt = std::max(T, static_cast<double>(o.position_range));
  const double tables = Pt * D + Pt * D / H / 2 + H * Pt * Pt;
  training += 4 * M * 16 * (P + tables) + 4 * 2 * M * P;
  if (c.train.batch_size > 0) training += 2 * 8 * M * B * T;
  // Evaluation: 1024 examples of every member at a time, logits and the temporaries of the
  // loss and the argmax.
  training += 6 * 4 * M * 1024 * T * V;
  // Off the fused step (a GPU, train.step = autograd, or a CPU model it cannot run):
  // autograd's activations and the dropout masks of the whole batch (on the CPU a full
  // batch goes in chunks of 256: counted whole, on the high side).
  const bool fused = device.is_cpu() && c.train.step != "autograd";
  if (!fused) {
    const double per_example =
        L * (20 * T * D + 5 * H * T * T + 5 * T * F) + 5 * T * V + positional_activation_floats(c.model, T);
    const double dropout = L * (H * T * T + 2 * T * D + T * F);
    training += 4 * M * B * (per_example + dropout);
    // On a GPU built without copytask's kernel the masks come from integer tensor
    // operations (model/dropout_stream.h): at their peak about 20 bytes of int64 temporaries
    // for every mask element. Counted on every GPU build, on the high side.
    if (!device.is_cpu()) training += 20 * M * B * dropout;
  }
  // Length generalization (eval.max_len): the longest length's tables and a chunk of its
  // attention (at most 2^25 floats, train/evaluate.cpp) and logits; its sets' tokens.
  if (c.eval.max_len > 0) {
    const double Te = std::max(T, 2.0 * static_cast<double>(c.eval.max_len) + 1);
    // One set per length, or one per seed (eval.inputs = per-seed).
    const double sets = c.eval.inputs == "per-seed" ? static_cast<double>(std::max<size_t>(1, c.train.seeds.size())) : 1.0;
    const double examples = sets * static_cast<double>(c.eval.per_length) * static_cast<double>(c.eval.max_len);
    training += 4 * M * (Te * D + H * Te * Te) * 2 + 4 * 6 * double(1 << 25) + 6 * 4 * M * 512 * Te * V;
    e.data_bytes += examples * 48 * Te;
  }
  e.training_bytes = training;
  e.process_bytes = 300.0 * 1024 * 1024;  // LibTorch, its thread pools, the binary
  if (!device.is_cpu()) e.device = training + 16 * N * T;  // and the splits' tokens (int64 inputs and targets)
  return e;
}

std::string bytes_text(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int unit = 0;
  while (bytes >= 1024 && unit < 6) {
    bytes /= 1024;
    ++unit;
  }
  char text[48];
  std::snprintf(text, sizeof text, bytes < 10 ? "%.1f %s" : "%.0f %s", bytes, units[unit]);
  return text;
}

}  // namespace copytask
