// The checks of a whole config: each key against its own range (the field table's,
// config_fields_check), then the rules between keys, here. Each message names the key,
// the value and what is allowed, so the user can fix the config without reading the code.
#include <algorithm>
#include <cmath>
#include <set>

#include "config/config.h"
#include "config/config_fields.h"
#include "config/scheme_rules.h"
#include "task/copy_task.h"

namespace copytask {
namespace {

std::string str(double value) { return config_value_text(value); }

void require(bool ok, const std::string& key, const std::string& value, const std::string& allowed) {
  if (!ok) throw ConfigError(key + " = " + value + ": " + allowed);
}

void validate_task(const TaskConfig& t) {
  require(t.max_len >= t.min_len, "task.max_len", std::to_string(t.max_len),
          "must be at least task.min_len (" + std::to_string(t.min_len) + ")");
  const bool selective = task_kind(t) == TaskKind::selective;
  require(!selective || t.vocab_size >= 4, "task.vocab_size", std::to_string(t.vocab_size),
          "must be at least 4 under task.kind = selective (padding, a content token, the noise token, <copy>)");
  require(t.end_token == "padding" || next_token(t), "task.end_token", "\"" + t.end_token + "\"",
          "applies to task.format = next-token only (the placeholders format has no end token); drop it");
  require(t.convention == "copytask" || (next_token(t) && t.end_token == "own"), "task.convention",
          "\"" + t.convention + "\"",
          "needs task.format = next-token and task.end_token = own (Cho et al.'s end token is not the padding, "
          "which is out of the loss); set both, or task.convention = copytask");
  require(content_vocab(t) >= 1, "task.vocab_size", std::to_string(t.vocab_size),
          "leaves no content token with task.end_token = own; raise it by one");
  // The input before <copy> (content, and noise under selective) and <copy> must fit.
  const std::string noise_words = selective ? " and noise" : "";
  const int64_t shortest = prefix_length(t, t.min_len) + 1, longest = prefix_length(t, t.max_len) + 1;
  require(shortest <= t.context, "task.context", std::to_string(t.context),
          "too short for task.min_len = " + std::to_string(t.min_len) + ": the content" + noise_words +
              " and <copy> must fit, so context must be at least " + std::to_string(shortest));
  if (selective)
    require(longest <= t.context, "task.context", std::to_string(t.context),
            "too short for task.max_len = " + std::to_string(t.max_len) + " under task.kind = selective with "
            "task.noise = " + str(t.noise) + ": " + std::to_string(t.max_len) + " content tokens, " +
                std::to_string(noise_count(t, t.max_len)) + " noise tokens and <copy> need a context of at least " +
                std::to_string(longest));
  else
    require(longest <= t.context, "task.max_len", std::to_string(t.max_len),
            "content plus <copy> must fit in task.context = " + std::to_string(t.context) +
                ", so max_len must be at most " + std::to_string(t.context - 1));
  const int64_t possible = copy_task_capacity(t);
  if (t.sampling == "fresh") {
    // Only the test split is distinct: the train split repeats inputs as the distribution does.
    // The test split takes at most half of each length's distinct inputs.
    const int64_t test = copy_task_split_sizes(t).second;
    int64_t half = 0;
    for (int64_t k = t.min_len; k <= t.max_len; ++k) half += std::min<int64_t>(inputs_of_length(t, k) / 2, 1'000'000'000);
    require(t.examples >= 2 && test <= half, "task.examples", std::to_string(t.examples),
            "holds a test split of " + std::to_string(test) + " distinct inputs, but at most " + std::to_string(half) +
                " (half of each length's, so that training still draws every length) exist with vocab_size " +
                std::to_string(t.vocab_size) + " and lengths " + std::to_string(t.min_len) + ".." +
                std::to_string(t.max_len) + "; lower task.test_fraction");
  } else {
    require(t.examples >= 2 && t.examples <= possible, "task.examples", std::to_string(t.examples),
            "must be 2.." + std::to_string(possible) + ": only " + std::to_string(possible) +
                " distinct inputs exist with vocab_size " + std::to_string(t.vocab_size) + " and lengths " +
                std::to_string(t.min_len) + ".." + std::to_string(t.max_len) +
                " (task.sampling = fresh draws the train split with repeats)");
  }
  // After the distinct inputs: that limit is the one a user meets first, and says why.
  require(t.examples <= 50'000'000, "task.examples", std::to_string(t.examples), "must be at most 50000000");
  const auto [train_count, test_count] = copy_task_split_sizes(t);
  require(test_count >= 1, "task.test_fraction", str(t.test_fraction),
          "leaves the test split empty with " + std::to_string(t.examples) +
              " examples; raise task.test_fraction or task.examples");
  require(train_count >= 1, "task.test_fraction", str(t.test_fraction),
          "leaves the train split empty; lower it");
}

std::string list_text(const std::vector<double>& values) {
  std::string text;
  for (double v : values) text += (text.empty() ? "" : ", ") + str(v);
  return "[" + text + "]";
}

void validate_slopes(const std::vector<double>& slopes, const std::string& key, int64_t heads) {
  require(slopes.empty() || static_cast<int64_t>(slopes.size()) == heads, key, list_text(slopes),
          "must list one slope per head (model.heads = " + std::to_string(heads) + "), or be [] for the paper's rule");
  for (double slope : slopes)
    require(std::isfinite(slope) && slope > 0 && slope <= 1000, key, list_text(slopes),
            "slopes must be positive numbers up to 1000");
}

// The options of every scheme are checked, whichever scheme is chosen: a bad value is a
// mistake even where it is ignored.
void validate_positional_options(const PositionalOptions& o, int64_t heads) {
  validate_slopes(o.alibi_slopes, "model.alibi_slopes", heads);
  validate_slopes(o.alibi_right_slopes, "model.alibi_right_slopes", heads);
  require(o.alibi_right_slopes.empty() || o.alibi_direction == "two-sided", "model.alibi_right_slopes",
          list_text(o.alibi_right_slopes), "applies to model.alibi_direction = two-sided only; set that too, or drop it");
  require(o.t5_max_distance > o.t5_buckets / 4 && o.t5_max_distance <= 1000000, "model.t5_max_distance",
          std::to_string(o.t5_max_distance),
          "must exceed model.t5_buckets / 4 = " + std::to_string(o.t5_buckets / 4) +
              " (the distances with a bucket of their own) and be at most 1000000");
}

void validate_model(const ModelConfig& m) {
  require(m.embed % m.heads == 0, "model.heads", std::to_string(m.heads),
          "must divide model.embed = " + std::to_string(m.embed));
  const SchemeRules& rules = scheme_rules();
  const auto& names = rules.names;
  std::string allowed;
  for (const auto& name : names) allowed += (allowed.empty() ? "" : ", ") + name;
  require(std::find(names.begin(), names.end(), m.positional) != names.end(), "model.positional",
          "\"" + m.positional + "\"", "must be one of " + allowed);
  validate_positional_options(m.positional_options, m.heads);
  const SchemeProblem problem = rules.incompatibility(m);
  require(problem.problem.empty(), problem.key, problem.value, problem.problem);
}

void validate_train(const TrainConfig& t, const TaskConfig& task) {
  const int64_t train_count = copy_task_split_sizes(task).first;
  require(t.batch_size >= 0 && t.batch_size <= train_count, "train.batch_size", std::to_string(t.batch_size),
          "must be 0 (full batch) or 1.." + std::to_string(train_count) + " (the train split's size)");
  if (task.sampling == "fresh") {
    require(t.batch_size > 0, "train.batch_size", "0",
            "a full batch shows every train example at every step; task.sampling = fresh needs minibatches, e.g. 128");
    require(train_count >= t.steps * t.batch_size, "task.examples", std::to_string(task.examples),
            "under task.sampling = fresh the train split (" + std::to_string(train_count) +
                ") must hold train.steps x train.batch_size = " + std::to_string(t.steps * t.batch_size) +
                " examples, so that no batch repeats one; raise task.examples to at least " +
                std::to_string(static_cast<int64_t>(std::ceil(static_cast<double>(t.steps * t.batch_size) /
                                                              (1 - task.test_fraction))) + 1));
  }
  require(t.warmup_steps >= 0 && t.warmup_steps < t.steps, "train.warmup_steps", std::to_string(t.warmup_steps),
          "must be 0 (no warm-up) or 1.." + std::to_string(t.steps - 1) + " (fewer than train.steps)");
  require(!t.seeds.empty(), "train.seeds", "[]", "must list at least one seed, e.g. [0, 1, 2]");
  std::set<int64_t> seen;
  for (int64_t seed : t.seeds) {
    require(seed >= 0, "train.seeds", std::to_string(seed), "seeds must be >= 0");
    require(seen.insert(seed).second, "train.seeds", std::to_string(seed), "is listed twice; seeds must be distinct");
  }
}

void validate_eval(const EvalConfig& e, const TaskConfig& task, const ModelConfig& m, bool learned_rows_must_fit) {
  require(e.max_len == 0 || (e.max_len >= task.max_len && e.max_len <= kEvalMaxLenLimit), "eval.max_len",
          std::to_string(e.max_len),
          "must be 0 (off) or task.max_len (" + std::to_string(task.max_len) + ") .. " +
              std::to_string(kEvalMaxLenLimit) + ": the longest content length "
          "evaluated, at least the longest trained");
  require(e.rope_rescaling.empty() || e.max_len > 0, "eval.rope_rescaling", "[...]",
          "evaluates beyond the trained lengths: set eval.max_len too (e.g. eval.max_len=" +
              std::to_string(2 * task.max_len) + ")");
  // A learned table cannot place positions it has no row for: refused now, not after training.
  const int64_t rows = learned_rows(m.positional_options, task.context);
  if (m.positional == "learned")
    require(rows >= task.context, "model.learned_positions", std::to_string(m.positional_options.learned_positions),
            "is fewer rows than task.context = " + std::to_string(task.context) + "; set at least that many, or 0");
  // Position IDs: L covers the training context and every evaluated one (the scheme's own
  // rule, that it reads positions at all, is scheme_rules').
  const PositionalOptions& o = m.positional_options;
  const int64_t L = o.position_range;
  if (!position_ids_vary(o)) {
    require(L == 0, "model.position_range", std::to_string(L),
            "applies with model.position_ids = random, offset or coupled (today sequential: IDs 0..T-1); set one of "
            "them, or leave model.position_range at 0");
  } else {
    const int64_t longest = longest_eval_context(e, task);
    require(L >= longest && L <= 4096, "model.position_range", std::to_string(L),
            "must be 0 (the longest evaluated context) or " + std::to_string(longest) +
                "..4096: model.position_ids = " + o.position_ids + " gives IDs in 0..L-1, so L must cover " +
                (e.max_len > 0 ? "the longest evaluated context (eval.max_len = " + std::to_string(e.max_len) + ")"
                               : "task.context"));
    if (m.positional == "learned")
      require(rows >= L, "model.learned_positions", std::to_string(o.learned_positions),
              "must be at least model.position_range = " + std::to_string(L) + " (a row for every position ID), or 0");
  }
  if (learned_rows_must_fit && e.max_len > 0 && m.positional == "learned") {
    const int64_t longest = longest_eval_context(e, task);
    require(rows >= longest, "model.learned_positions",
            std::to_string(m.positional_options.learned_positions),
            "is too few rows for eval.max_len = " + std::to_string(e.max_len) + ", whose longest copy needs a context of " +
                std::to_string(longest) + "; set model.learned_positions=" + std::to_string(longest) +
                " (the rows beyond task.context are never trained, and results say so)");
  }
}

void validate_report(const ReportConfig& r, const TaskConfig& task) {
  for (size_t i = 0; i < r.probes.size(); ++i) {
    try {
      probe_example(r.probes[i], task);
    } catch (const std::invalid_argument& error) {
      throw ConfigError("report.probes[" + std::to_string(i) + "] = \"" + r.probes[i] + "\": " + error.what());
    }
  }
}

void validate_compare(const CompareConfig& c) {
  require(!c.schemes.empty(), "compare.schemes", "[]", "must list at least one scheme");
  std::set<std::string> names;
  for (size_t i = 0; i < c.schemes.size(); ++i) {
    const std::string& name = c.schemes[i].name;
    const std::string key = "compare.schemes[" + std::to_string(i) + "].name";
    require(!name.empty() && name.size() <= 64, key, "\"" + name + "\"", "must be 1..64 characters");
    bool clean = std::all_of(name.begin(), name.end(), [](char ch) {
      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '_' || ch == '.';
    });
    require(clean && name[0] != '.', key, "\"" + name + "\"",
            "may hold letters, digits and + - _ . only (it names files), and not start with '.'");
    require(names.insert(name).second, key, "\"" + name + "\"", "is used twice; scheme names must be distinct");
  }
}

}  // namespace

// The whole example of the longest content (2k + 1 tokens for copy and reverse), never
// shorter than the training context.
int64_t longest_eval_context(const EvalConfig& e, const TaskConfig& task) {
  return std::max(task.context, e.max_len > 0 ? whole_example_context(task, e.max_len) : task.context);
}

void config_validate(const Config& config, bool learned_rows_must_fit_eval) {
  config_fields_check(config);
  validate_task(config.task);
  validate_model(config.model);
  // The next-token format predicts each token from those before it: a bidirectional model
  // would read the answer at the next position.
  require(config.task.format != "next-token" || config.model.causal, "task.format", "\"next-token\"",
          "predicts each next token, which needs the causal mask (a bidirectional model sees the token it must "
          "predict): set model.causal=true, or task.format=placeholders");
  validate_train(config.train, config.task);
  validate_eval(config.eval, config.task, config.model, learned_rows_must_fit_eval);
  validate_report(config.report, config.task);
  validate_compare(config.compare);
}

}  // namespace copytask
