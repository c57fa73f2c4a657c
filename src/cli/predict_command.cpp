// copytask predict --run DIR [--member NAME] "7 1 8 2": one input through one trained
// member: its output, whether it is right, and each layer's and head's attention as a
// compact heatmap in the terminal.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include "util/text_format.h"
#include <torch/torch.h>

#include "cli/commands.h"
#include "cli/options.h"
#include "config/config_fields.h"
#include "study/saved_study.h"
#include "task/copy_task.h"
#include "task/length_sets.h"
#include "train/evaluate.h"

namespace copytask {
namespace {

// A token in a 3-character column: "  7", "  _" (padding), "cpy" (<copy>), "  ~" (noise).
std::string token_cell(int64_t token, int64_t vocab_size, int64_t noise) {
  if (token == 0) return "  _";
  if (token == vocab_size - 1) return "cpy";
  if (token == noise) return "  ~";
  return text_format("{:>3}", token);
}

// Ten shades from 0 to 1, three characters a cell.
const char* shade(double weight) {
  static const char* shades[] = {"   ", "...", ":::", "---", "===", "+++", "***", "###", "%%%", "@@@"};
  const int level = std::clamp(static_cast<int>(weight * 10.0), 0, 9);
  return shades[level];
}

// The member, the input, target and output (wrong tokens marked ^) and the verdict.
void prediction_print(const StudyMember& member, const std::vector<int64_t>& input, const std::vector<int64_t>& target,
                      const std::vector<int64_t>& output, size_t content_length) {
  const Config& config = member.arm->config;
  const int64_t V = config.task.vocab_size, T = static_cast<int64_t>(input.size()), noise = noise_token(config.task);
  const long long k = static_cast<long long>(content_length);
  const bool right = output == target;
  int64_t wrong_tokens = 0;
  std::string marks;
  for (int64_t t = 0; t < T; ++t) {
    const bool ok = output[t] == target[t];
    wrong_tokens += ok ? 0 : 1;
    marks += std::string(t ? " " : "") + std::string(tokens_to_text({output[t]}, V, noise).size(), ok ? ' ' : '^');
  }
  std::printf("member  %s (positional %s, causal %s)\n", member.name().c_str(), config.model.positional.c_str(),
              config.model.causal ? "on" : "off");
  if (T != config.task.context)
    std::printf("context %lld: longer than training's %lld, for the whole copy of %lld tokens (as eval.max_len)\n",
                static_cast<long long>(T), static_cast<long long>(config.task.context), k);
  // What each output copies (task/task_kind.h): the task's kind, and the input positions.
  const OutputSources sources = output_sources(config.task, input.data(), T);
  std::string copies;
  for (int64_t j = 0; j < sources.length(); ++j) copies += (j ? " " : "") + std::to_string(sources.sources[j]);
  std::printf("task    %s%s: outputs %lld.. copy input positions %s\n", config.task.kind.c_str(),
              config.task.kind == "selective" ? (" (~ noise, " + config_value_text(config.task.noise) + ")").c_str() : "",
              static_cast<long long>(sources.output_begin()), copies.c_str());
  std::printf("input   %s\n", tokens_to_text(input, V, noise).c_str());
  std::printf("target  %s\n", tokens_to_text(target, V, noise).c_str());
  std::printf("output  %s\n", tokens_to_text(output, V, noise).c_str());
  if (!right) std::printf("        %s\n", marks.c_str());
  std::printf("%s\n", right ? "right: every output token matches the target"
                            : text_format("wrong: {} of {} tokens differ (^)", wrong_tokens, T).c_str());
}

// Each layer's and head's attention as rows of shades (rows: query positions, columns:
// the key positions they attend to), with each row's strongest key.
void attention_print(const std::vector<torch::Tensor>& attention, const std::vector<int64_t>& input, int64_t V,
                     int64_t noise, bool causal) {
  const int64_t T = static_cast<int64_t>(input.size());
  std::string header = "       ";
  for (int64_t j = 0; j < T; ++j) header += token_cell(input[j], V, noise);
  std::printf("\nattention (rows: query position, columns: key position; shades 0 ' . : - = + * # %% @' 1%s)\n",
              causal ? "; causal: nothing right of the diagonal" : "");
  for (size_t l = 0; l < attention.size(); ++l) {
    auto maps = attention[l][0][0].to(torch::kFloat64).contiguous();  // (H, T, T)
    auto a = maps.accessor<double, 3>();
    for (int64_t h = 0; h < maps.size(0); ++h) {
      std::printf("\nlayer %zu head %lld\n%s\n", l + 1, static_cast<long long>(h + 1), header.c_str());
      for (int64_t i = 0; i < T; ++i) {
        std::string row = "  " + token_cell(input[i], V, noise) + "  ";
        int64_t strongest = 0;
        for (int64_t j = 0; j < T; ++j) {
          row += shade(a[h][i][j]);
          if (a[h][i][j] > a[h][i][strongest]) strongest = j;
        }
        std::printf("%s  max %.2f at position %lld (%s)\n", row.c_str(), a[h][i][strongest],
                    static_cast<long long>(strongest), tokens_to_text({input[strongest]}, V, noise).c_str());
      }
    }
  }
}

}  // namespace

CLI::App* predict_command_add(CLI::App& app, PredictCommandOptions& options) {
  CLI::App& command = *app.add_subcommand("predict", "one input through a trained member: output and attention");
  command.add_option("--run", options.run_dir, "the study folder (what train or compare printed as output folder)")
      ->required();
  command.add_option("--member", options.member,
                     "which member: rope/seed-0, rope/0, or rope (its first seed); default: the study's first");
  command.add_option("input", options.input, "content tokens, e.g. \"7 1 8 2\" (<copy> and padding are added)")
      ->required();
  return &command;
}

int predict_command_run(const PredictCommandOptions& options) {
  // Bad input first, before any work: the folder, the member, the input.
  SavedStudy study;
  try {
    study = saved_study_open(options.run_dir);
  } catch (const ConfigError& error) {
    throw option_error("--run", error);
  }
  const auto members = saved_members(study);
  if (members.empty())
    throw OptionError("--run " + options.run_dir + " has no complete member yet; train the study first");
  StudyMember member;
  try {
    member = options.member.empty() ? members.front() : saved_member_find(study, options.member);
  } catch (const ConfigError& error) {
    throw option_error("--member", error);
  }
  Example example;
  try {
    // Longer than the trained lengths is allowed: the copy then gets a context of its own,
    // as eval.max_len evaluates it (checked against the member's positions below).
    example = probe_example(options.input, member.arm->config.task, 4 * kEvalMaxLenLimit + 1);
  } catch (const std::invalid_argument& error) {
    throw OptionError("input \"" + options.input + "\": " + error.what());
  }
  const Config& config = member.arm->config;
  const int64_t k = static_cast<int64_t>(example.content.size());
  const int64_t prefix = k + static_cast<int64_t>(example.noise_at.size());
  // A trained length keeps the training context (as in training); a longer one the context
  // of the length-generalization sets, long enough for the whole example.
  const int64_t V = config.task.vocab_size,
                T = k <= config.task.max_len && prefix < config.task.context
                        ? config.task.context
                        : std::max(length_context(config.task, k), prefix + 1 + k);
  const PositionalOptions& ids = config.model.positional_options;
  if (position_ids_vary(ids) && T > ids.position_range)
    throw OptionError(std::to_string(k) + " tokens need a context of " + std::to_string(T) + ", beyond this member's " +
                      std::to_string(ids.position_range) + " position IDs (model.position_ids = " + ids.position_ids +
                      ", model.position_range); give fewer tokens");
  const std::vector<int64_t> input = example_input(config.task, example, T),
                             target = example_target(config.task, example, T);

  std::vector<torch::Tensor> attention;  // per layer (1, 1, H, T, T)
  torch::set_num_threads(1);  // one example: threads would only cost
  Encoder model = saved_batch_load(study, {member}, torch::kCPU);  // a bad model.pt: CheckpointError
  if (T > model->position_limit())
    throw OptionError(std::to_string(k) + " tokens need a context of " + std::to_string(T) +
                      ", beyond this member's learned table of " + std::to_string(model->position_limit()) +
                      " rows (model.learned_positions); give fewer tokens, or train with more rows");
  auto tokens = predict_tokens(model, torch::tensor(input, torch::kLong).view({1, T}), &attention);  // (1, 1, T)
  auto flat = tokens.view({T}).contiguous();                                                        // (T)
  const std::vector<int64_t> output(flat.data_ptr<int64_t>(), flat.data_ptr<int64_t>() + T);

  prediction_print(member, input, target, output, example.content.size());
  attention_print(attention, input, V, noise_token(config.task), config.model.causal);
  return kExitOk;
}

}  // namespace copytask
