#include "config/config_fields.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "config/compare_json.h"
#include "config/layer_form.h"
#include "task/task_kind.h"

namespace copytask {
namespace {

using nlohmann::json;

// A key's own range: what is allowed, in words, and the test of a value.
struct Range {
  std::string rule;
  std::function<bool(const json&)> allowed;
};

constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

Range ints(int64_t low, int64_t high, std::string rule) {
  return {std::move(rule), [low, high](const json& v) { return v.get<int64_t>() >= low && v.get<int64_t>() <= high; }};
}

Range reals(std::function<bool(double)> test, std::string rule) {
  return {std::move(rule), [test](const json& v) { return std::isfinite(v.get<double>()) && test(v.get<double>()); }};
}

Range choice(std::vector<std::string> values, std::string rule) {
  return {std::move(rule), [values](const json& v) {
            return std::find(values.begin(), values.end(), v.get<std::string>()) != values.end();
          }};
}

// A choice whose rule lists its values: "must be relu or gelu".
Range choice_of(std::vector<std::string> values) {
  std::string rule = "must be ";
  for (size_t i = 0; i < values.size(); ++i)
    rule += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") + values[i];
  return choice(values, rule);
}

// A field that is a member of one of Config's sections: config.*section.*member.
template <typename Section, typename Value>
ConfigField field(std::string key, Section Config::*section, Value Section::*member, KeyScope scope,
                  std::string meaning, Range range = {}) {
  ConfigField f;
  f.key = std::move(key);
  f.scope = scope;
  f.meaning = std::move(meaning);
  f.rule = std::move(range.rule);
  f.allowed = std::move(range.allowed);
  f.get = [section, member](const Config& c) { return json((c.*section).*member); };
  f.set = [section, member](Config& c, const json& value) { (c.*section).*member = value.get<Value>(); };
  return f;
}

// A positional option: config.model.positional_options.*member.
template <typename Value>
ConfigField option(std::string key, Value PositionalOptions::*member, std::string meaning, Range range = {}) {
  ConfigField f;
  f.key = std::move(key);
  f.scope = KeyScope::scheme;
  f.positional_option = true;
  f.meaning = std::move(meaning);
  f.rule = std::move(range.rule);
  f.allowed = std::move(range.allowed);
  f.get = [member](const Config& c) { return json(c.model.positional_options.*member); };
  f.set = [member](Config& c, const json& value) { c.model.positional_options.*member = value.get<Value>(); };
  return f;
}

// model.random_positions, the old form of model.position_ids = random: L > 0 sets
// position_ids = random and position_range = L, 0 leaves them alone. Read (saved configs
// and studies written before position_ids hold it), never written.
// It follows position_ids and position_range in the table, so it is set after them and
// can see a conflict with them.
ConfigField old_position_key() {
  ConfigField f;
  f.key = "model.random_positions";
  f.scope = KeyScope::scheme;
  f.old_form = true;
  f.meaning = "the old form of `model.position_ids` = random with `model.position_range` = L: L > 0 sets both, "
              "0 does nothing; read, never written (saved configs give the new keys)";
  f.rule = "must be 0 or 1..4096";
  f.allowed = [](const json& v) { return v.get<int64_t>() >= 0 && v.get<int64_t>() <= 4096; };
  f.get = [](const Config&) { return json(int64_t{0}); };
  f.set = [](Config& c, const json& value) {
    const int64_t L = value.get<int64_t>();
    if (L == 0) return;
    PositionalOptions& o = c.model.positional_options;
    const std::string given = "model.random_positions = " + std::to_string(L);
    if (o.position_ids != "sequential" && o.position_ids != "random")
      throw ConfigError(given + ": the old form of model.position_ids = random, which cannot go with model.position_ids = " +
                        o.position_ids + "; give model.position_ids and model.position_range only");
    if (o.position_ids == "random" && o.position_range != 0 && o.position_range != L)
      throw ConfigError(given + ": the old form of model.position_ids = random with model.position_range = " +
                        std::to_string(L) + ", which differs from model.position_range = " +
                        std::to_string(o.position_range) + "; give model.position_range only");
    if (L < 0 || L > 4096) throw ConfigError(given + ": must be 0 or 1..4096");
    o.position_ids = "random";
    o.position_range = L;
  };
  return f;
}

// The table: one entry per key, in the docs' order. Long (about 170 lines) because there
// are 57 keys, each with its meaning and range; there is no logic here to split.
std::vector<ConfigField> make_fields() {
  using S = KeyScope;
  std::vector<ConfigField> f = {
      field("task.vocab_size", &Config::task, &TaskConfig::vocab_size, S::study,
            "0 = padding, 1..V-2 = content, V-1 = `<copy>`",
            ints(3, 100000, "must be 3..100000 (padding, at least one content token, <copy>)")),
      field("task.context", &Config::task, &TaskConfig::context, S::scheme,
            "sequence length T (input and output); may differ between schemes (e.g. a selective task's longer "
            "inputs), each context with its own data",
            ints(2, 4096, "must be 2..4096")),
      field("task.min_len", &Config::task, &TaskConfig::min_len, S::study, "content tokens per example, at least",
            ints(1, kNoLimit, "must be at least 1")),
      field("task.max_len", &Config::task, &TaskConfig::max_len, S::study, "content tokens per example, at most"),
      field("task.examples", &Config::task, &TaskConfig::examples, S::study,
            "examples, train + test (under task.sampling = unique all distinct, so at most the number of "
            "distinct inputs)"),
      field("task.test_fraction", &Config::task, &TaskConfig::test_fraction, S::study,
            "share held out; test inputs never occur in train",
            reals([](double x) { return x > 0 && x < 1; }, "must be strictly between 0 and 1")),
      field("task.seed", &Config::task, &TaskConfig::seed, S::study,
            "the data's seed: the same data for every scheme and seed of a study that share a task",
            ints(0, kNoLimit, "must be >= 0")),
      field("task.kind", &Config::task, &TaskConfig::kind, S::scheme,
            "what the output does with the content: `copy` it, `reverse` it, or `selective`: copy the content "
            "tokens from among noise tokens (token V-2, so content is 1..V-3). May differ between schemes: each "
            "kind gets its own data, drawn from `task.seed`",
            choice(task_kind_names(), "must be copy, reverse or selective")),
      field("task.format", &Config::task, &TaskConfig::format, S::scheme,
            "`placeholders`: the input is the content, `<copy>` and padding, and the model predicts every output at "
            "once at the padding; `next-token`: the input holds the outputs after `<copy>` and an end token (padding), "
            "the model predicts each next token under the causal mask (`model.causal=true`), trained by teacher forcing "
            "and evaluated by greedy generation, each output fed back in",
            choice({"placeholders", "next-token"}, "must be placeholders or next-token")),
      field("task.sampling", &Config::task, &TaskConfig::sampling, S::scheme,
            "`unique`: task.examples distinct inputs, shuffled, then split (the test inputs never in the train "
            "split); `fresh`: the test split's inputs distinct as before, and every train example drawn on its "
            "own from the task's distribution (its length uniform over min_len..max_len, then its content), "
            "repeats allowed, never a test input: with at least train.steps x train.batch_size train examples "
            "(checked), each member meets each at most once, so every minibatch is a fresh draw (Kazemnejad et "
            "al.'s protocol). May differ between schemes",
            choice({"unique", "fresh"}, "must be unique or fresh")),
      field("task.end_token", &Config::task, &TaskConfig::end_token, S::scheme,
            "next-token: the token the last output predicts and the input holds after the outputs: `padding` "
            "(0, the padding that follows it), or `own`, a token of its own (V-2, or V-3 under selective), the "
            "content one id fewer",
            choice({"padding", "own"}, "must be padding or own")),
      field("task.convention", &Config::task, &TaskConfig::convention, S::scheme,
            "next-token: which positions the loss reads and, under `model.position_ids=coupled`, which place each "
            "token takes: `copytask`, every position in the loss (the prefix echoed, the padding predicted), the "
            "position that predicts output j at source j's place and the end predicted at its own; `cho` (Cho et "
            "al. 2024), only the outputs and the end in the loss, each output token at its source's place, "
            "`<copy>` one step before output 0's source, so the end is predicted at the last output's source's "
            "place, the end token and the padding at ID 0. `cho` needs `task.end_token=own`",
            choice({"copytask", "cho"}, "must be copytask or cho")),
      field("task.noise", &Config::task, &TaskConfig::noise, S::scheme,
            "selective: the share of noise tokens before `<copy>`: round(k * noise / (1 - noise)) of them with k "
            "content tokens, at random places",
            reals([](double x) { return x >= 0 && x <= 0.9; }, "must be 0..0.9")),
      field("model.embed", &Config::model, &ModelConfig::embed, S::scheme, "D, the model width",
            ints(1, 4096, "must be 1..4096")),
      field("model.heads", &Config::model, &ModelConfig::heads, S::scheme, "H, attention heads (divides D)",
            ints(1, 256, "must be 1..256")),
      field("model.blocks", &Config::model, &ModelConfig::blocks, S::scheme, "pre-LN transformer blocks",
            ints(1, 64, "must be 1..64")),
      field("model.hidden", &Config::model, &ModelConfig::hidden, S::scheme, "F, the feed-forward hidden width",
            ints(1, 65536, "must be 1..65536")),
      field("model.activation", &Config::model, &ModelConfig::activation, S::scheme,
            "the feed-forward's nonlinearity, hidden = f(fc1(x)): `relu`, or `gelu` (x Phi(x), the exact erf "
            "form); a layer form (docs/adding-a-layer-form.md). The fused GPU step computes relu only: a gelu "
            "batch runs on the device step there",
            choice_of(layer_form_choices("model.activation"))),
      field("model.dropout", &Config::model, &ModelConfig::dropout, S::scheme,
            "on the attention weights, after the attention projection, inside and after the FF",
            reals([](double x) { return x >= 0 && x < 1; }, "must be in [0, 1)")),
      field("model.positional", &Config::model, &ModelConfig::positional, S::scheme,
            "a scheme of the registry: `copytask schemes` lists them (docs/schemes.md)"),
      field("model.causal", &Config::model, &ModelConfig::causal, S::scheme,
            "causal attention mask (position i sees j <= i), valid with every scheme"),
      option("model.rope_base", &PositionalOptions::rope_base,
             "rope, xpos: theta = p * base^(-2i / R); pope: theta = p * base^(-c / Dh)",
            reals([](double x) { return x > 1 && x <= 1e12; }, "must be a number above 1 (10000 in the RoPE paper)")),
      option("model.rope_fraction", &PositionalOptions::rope_fraction,
             "rope: the share of each head's dimensions that turn (R = 2 floor(fraction Dh / 2); partial rotary)",
            reals([](double x) { return x > 0 && x <= 1; }, "must be in (0, 1]: the share of each head's dimensions that rotate")),
      option("model.alibi_slopes", &PositionalOptions::alibi_slopes,
             "alibi: one slope per head; [] = the paper's rule (2^-8 for one head)"),
      option("model.alibi_right_slopes", &PositionalOptions::alibi_right_slopes,
             "alibi, two-sided: the slopes towards later keys; [] = the same as the left"),
      option("model.alibi_direction", &PositionalOptions::alibi_direction,
             "alibi: `symmetric` -s\\|d\\|, `offset` -s(\\|d\\| - 0.5 [d > 0]) (Ruoss et al.), `two-sided` -s d left, "
             "-r (-d) right",
            choice({"symmetric", "offset", "two-sided"}, "must be symmetric, offset or two-sided")),
      option("model.alibi_learned", &PositionalOptions::alibi_learned,
             "alibi: learn the slopes (as logs, so they stay positive), starting from the above"),
      option("model.t5_buckets", &PositionalOptions::t5_buckets,
             "t5: buckets, half per direction (exact below a quarter of them, logarithmic up to the max distance)",
            Range{"must be an even number 4..1024 (half of them for each direction)",
                   [](const json& v) { return v.get<int64_t>() >= 4 && v.get<int64_t>() <= 1024 && v.get<int64_t>() % 2 == 0; }}),
      option("model.t5_max_distance", &PositionalOptions::t5_max_distance,
             "t5: distances beyond share the last bucket"),
      option("model.bias_mlp_hidden", &PositionalOptions::bias_mlp_hidden, "dynamic, fire: hidden width of the bias MLP",
            ints(1, 1024, "must be 1..1024")),
      option("model.dynamic_depth", &PositionalOptions::dynamic_depth, "dynamic: hidden layers of the bias MLP",
            ints(1, 8, "must be 1..8")),
      option("model.dynamic_log_distance", &PositionalOptions::dynamic_log_distance,
             "dynamic: input sign(d) log(1 + \\|d\\|) instead of d"),
      option("model.fire_threshold", &PositionalOptions::fire_threshold,
             "fire: the starting threshold L in positions; 0 = `task.context` (resolved when the config is read)",
            reals([](double x) { return x >= 1 && x <= 1e6; }, "must be 1..1000000 positions, or 0 for task.context")),
      option("model.learned_positions", &PositionalOptions::learned_positions,
             "learned: rows of the table; 0 = `task.context`, or `model.position_range` when that is larger. "
             "More rows let length generalization reach longer contexts; rows training never reaches keep their "
             "N(0, 1) start",
             ints(0, 8192, "must be 1..8192 rows, or 0 for task.context (or model.position_range)")),
      option("model.position_ids", &PositionalOptions::position_ids,
             "the position ID each token carries, for every scheme that reads positions (not `none`, `cope`, `fox`): "
             "`sequential` 0..T-1; `random` a sorted random subset of 0..L-1 per example, in training and in "
             "evaluation (Ruoss et al. 2023); `offset` s..s+T-1, s uniform in 0..L-T per example in training, 0 in "
             "evaluation (McLeish et al. 2024); `coupled` as offset, and each output takes the ID of the input token "
             "it reads (Cho et al. 2024; `<copy>`, noise and padding keep their place). L = `model.position_range`",
             choice({"sequential", "random", "offset", "coupled"}, "must be sequential, random, offset or coupled")),
      option("model.position_range", &PositionalOptions::position_range,
             "L: the position IDs lie in 0..L-1 (`model.position_ids` random, offset, coupled); 0 = the longest "
             "evaluated context (resolved when the config is read); 0 under sequential",
             ints(0, 4096, "must be 0 (the longest evaluated context) or 1..4096")),
      old_position_key(),
      option("model.xpos_scale_base", &PositionalOptions::xpos_scale_base,
             "xpos: gamma in the scale zeta^((i - j) / gamma) on q_i . k_j (512 in the paper: next to no decay over "
             "tens of positions; smaller values decay faster)",
             reals([](double x) { return x >= 1 && x <= 1e6; }, "must be 1..1000000 positions")),
      option("model.cope_positions", &PositionalOptions::cope_positions,
             "cope: rows of each block's position embeddings (contextual positions beyond are clamped to the last); "
             "0 = `task.context`",
             ints(0, 8192, "must be 1..8192 rows, or 0 for task.context")),
      option("model.dape", &PositionalOptions::dape,
             "DAPE (Zheng et al. 2024) on a score-bias scheme (`copytask schemes` lists them): each block adds "
             "MLP([scores; bias]) across heads to its scores"),
      option("model.dape_hidden", &PositionalOptions::dape_hidden, "DAPE: the MLP's hidden width",
             ints(1, 1024, "must be 1..1024")),
      option("model.length_scale", &PositionalOptions::length_scale,
             "scalable softmax (Nakanishi 2025), valid with every scheme: each block's logits times s_h log n, n the "
             "keys a query sees, s learned per block and head (starting at 1 / log `task.context`)"),
      field("train.steps", &Config::train, &TrainConfig::steps, S::scheme, "Adam steps",
            ints(1, 100'000'000, "must be 1..100000000")),
      field("train.batch_size", &Config::train, &TrainConfig::batch_size, S::scheme,
            "0 = full batch, else seeded minibatches (each seed its own shuffled epochs)"),
      field("train.lr", &Config::train, &TrainConfig::lr, S::scheme,
            "Adam learning rate (the peak when `train.warmup_steps` or `train.lr_schedule` is set)",
            reals([](double x) { return x > 0 && x < 10; }, "must be a positive number below 10")),
      field("train.warmup_steps", &Config::train, &TrainConfig::warmup_steps, S::scheme,
            "steps of linear warm-up: step s <= W trains at `train.lr` x s / W; 0 = none"),
      field("train.lr_schedule", &Config::train, &TrainConfig::lr_schedule, S::scheme,
            "after the warm-up: `constant`, or `cosine` (half a cosine from `train.lr` towards 0 at the last step)",
            choice({"constant", "cosine"}, "must be constant or cosine")),
      field("train.eval_every", &Config::train, &TrainConfig::eval_every, S::scheme,
            "steps between evaluations (and always at the last step)",
            ints(1, kNoLimit, "must be >= 1")),
      field("train.seeds", &Config::train, &TrainConfig::seeds, S::scheme,
            "one trained model per seed (a scheme may list its own; never a grid axis)"),
      field("train.device", &Config::train, &TrainConfig::device, S::machine,
            "`auto` (CUDA when there is one), `cpu`, `cuda`",
            choice({"auto", "cpu", "cuda"}, "must be auto, cpu or cuda")),
      field("train.threads", &Config::train, &TrainConfig::threads, S::machine, "CPU threads, 0 = one per core",
            ints(0, 1024, "must be 0 (one per core) or a thread count")),
      field("train.step", &Config::train, &TrainConfig::step, S::scheme,
            "which training step trains the scheme: `auto`, the fastest the device and the model allow (on the CPU "
            "the fused CPU step, else autograd, saying why; on a GPU the fused GPU step, else the device step on "
            "LibTorch's ops, saying why; a CUDA graph where `train.cuda_graph` is on); `fused-cpu` (`fused`, its old "
            "name, is read as it), the hand-written CPU step (refused on a GPU, and where it cannot run the model); "
            "`fused-gpu`, the GPU's hand-written kernels, the whole forward and backward of every member in one "
            "launch (refused on the CPU; members whose schemes act through a hook without a kernel form train in "
            "batches of their own on the device step, saying why: docs/gpu.md); `autograd`, LibTorch's autograd op "
            "by op, uncaptured "
            "(on the CPU a full batch in chunks of 256 examples per member; on a GPU the device step without its "
            "CUDA graph, as `train.cuda_graph=false`). The same numbers up to float rounding; schemes on different "
            "steps train in different batches",
            choice({"auto", "fused-cpu", "fused", "fused-gpu", "autograd"},
                   "must be auto, fused-cpu (or fused, its old name), fused-gpu or autograd")),
      field("train.cuda_graph", &Config::train, &TrainConfig::cuda_graph, S::machine,
            "on a GPU: capture the whole training step (forward, backward, Adam) once as a CUDA graph and replay "
            "it; false runs the same step uncaptured. No effect on the CPU"),
      field("train.gpu_tile_examples", &Config::train, &TrainConfig::gpu_tile_examples, S::machine,
            "the fused GPU step's tile: at most this many examples a thread block holds in shared memory at "
            "once (0 = as many as two blocks a multiprocessor fit). No number changes (each gradient is the "
            "same sum over its partition's rows whatever the tile); for measuring the kernel (docs/gpu.md)",
            ints(0, 32, "must be 0 (as many as fit) or 1..32 examples")),
      field("train.gpu_kept_activations", &Config::train, &TrainConfig::gpu_kept_activations, S::machine,
            "where the fused GPU step keeps the activations its backward reads: `shared`, in a thread block's "
            "shared memory beside the tile's others; `global`, in global memory, a slot for each thread block "
            "(1.4 GB for the reference study; the blocks running at once use about 42 MB, within a Hopper GPU's "
            "L2 cache), so that a tile holds more examples (12, not 5, at the reference shape). No number "
            "changes (the same sums in the same order); for measuring the kernel (docs/gpu.md)",
            choice({"shared", "global"}, "must be shared or global")),
      field("eval.max_len", &Config::eval, &EvalConfig::max_len, S::study,
            "length generalization: evaluate every member at every content length `task.min_len`..`eval.max_len` "
            "(at least `task.max_len`, at most 256), at every evaluation and at the end; 0 = off"),
      field("eval.per_length", &Config::eval, &EvalConfig::per_length, S::study,
            "examples per length: distinct inputs never in the training split, or all of them where fewer exist",
            ints(1, 100000, "must be 1..100000 examples per length")),
      field("eval.seed", &Config::eval, &EvalConfig::seed, S::study,
            "the seed of those examples (each length its own stream: a longer `eval.max_len` keeps the shorter "
            "lengths' examples)",
            ints(0, kNoLimit, "must be >= 0")),
      field("eval.inputs", &Config::eval, &EvalConfig::inputs, S::study,
            "whose inputs the evaluated lengths are: `shared` (one set per length from `eval.seed`, every member "
            "on it) or `per-seed` (one set per training seed, drawn from `eval.seed` and that seed: the arms of "
            "one seed compare on the same inputs, and the spread over seeds also covers the draw of the inputs). "
            "Also a key of `copytask eval`",
            choice({"shared", "per-seed"}, "must be shared or per-seed")),
      field("eval.position_start", &Config::eval, &EvalConfig::position_start, S::study,
            "where offset and coupled position IDs start at the evaluated lengths: `zero` (every example at 0, "
            "a start one training example in L - T + 1 has) or `drawn` (each example's start drawn as in "
            "training, uniform in 0..L-T, the same for every member); no effect on sequential and random IDs. "
            "Also a key of `copytask eval`, to evaluate a trained study the other way",
            choice({"zero", "drawn"}, "must be zero or drawn")),
      field("eval.rope_rescaling", &Config::eval, &EvalConfig::rope_rescaling, S::study,
            "RoPE's rescalings evaluated beyond the trained lengths, each beside the plain numbers, for the members "
            "that rotate q and k (rope, xpos): any of `pi` (position interpolation), `ntk` (NTK-aware base), `yarn` "
            "(YaRN); at the end of training and in `copytask eval`, with `eval.max_len`",
            Range{"must be a list of distinct pi, ntk, yarn", [](const json& v) {
                    std::vector<std::string> seen;
                    for (const auto& item : v) {
                      if (!item.is_string()) return false;
                      const std::string name = item.get<std::string>();
                      if ((name != "pi" && name != "ntk" && name != "yarn") ||
                          std::find(seen.begin(), seen.end(), name) != seen.end())
                        return false;
                      seen.push_back(name);
                    }
                    return true;
                  }}),
      field("eval.rope_factor", &Config::eval, &EvalConfig::rope_factor, S::study,
            "the rescalings' factor s; 0 = per length, the evaluated context over `task.context` (at least 1)",
            reals([](double x) { return x == 0 || (x >= 1 && x <= 1e4); }, "must be 0 (per length) or 1..10000")),
      field("report.probes", &Config::report, &ReportConfig::probes, S::study,
            "inputs whose outputs and attention maps are saved (content tokens)"),
  };
  ConfigField schemes;
  schemes.key = "compare.schemes";
  schemes.meaning = "list of `{\"name\": ..., \"<dotted key>\": value, ...}`, one per scheme (below)";
  schemes.get = [](const Config& c) {
    json list = json::array();
    for (const auto& scheme : c.compare.schemes) list.push_back(scheme_spec_to_json(scheme));
    return list;
  };
  schemes.set = [](Config& c, const json& value) {
    c.compare.schemes.clear();
    for (size_t i = 0; i < value.size(); ++i) c.compare.schemes.push_back(scheme_spec_from_json(value[i], i));
  };
  f.push_back(schemes);
  ConfigField grid;
  grid.key = "compare.grid";
  grid.meaning = "`{\"<dotted key>\": [values ...]}`, crossed with every scheme";
  grid.get = [](const Config& c) { return c.compare.grid; };
  grid.set = [](Config& c, const json& value) { c.compare.grid = compare_grid_checked(value); };
  f.push_back(grid);
  return f;
}

// A default as the docs show it: strings bare, everything else as JSON.
std::string default_text(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_array() && !value.empty() && value[0].is_object()) return "the six schemes of the reference study";
  return value.dump();
}

}  // namespace

const std::vector<ConfigField>& config_fields() {
  static const std::vector<ConfigField> fields = make_fields();
  return fields;
}

const ConfigField* config_field(const std::string& key) {
  for (const auto& f : config_fields())
    if (f.key == key) return &f;
  return nullptr;
}

std::string config_value_text(const json& value) {
  if (value.is_string()) return "\"" + value.get<std::string>() + "\"";
  if (!value.is_number_float()) return value.dump();
  std::string text = std::to_string(value.get<double>());
  text.erase(text.find_last_not_of('0') + 1);
  if (!text.empty() && text.back() == '.') text.pop_back();
  return text;
}

void config_fields_check(const Config& config) {
  for (const auto& f : config_fields()) {
    if (!f.allowed) continue;
    const json value = f.get(config);
    if (!f.allowed(value)) throw ConfigError(f.key + " = " + config_value_text(value) + ": " + f.rule);
  }
}

std::string config_keys_markdown() {
  const Config defaults;
  // "allowed" is each key's own range, the text its check prints; rules between keys
  // (docs/configuration.md, below the table) are config_validate's.
  std::string out = "| key | default | allowed | meaning |\n|---|---|---|---|\n";
  for (const auto& f : config_fields()) {
    const std::string allowed = f.rule.rfind("must be ", 0) == 0 ? f.rule.substr(8) : f.rule;
    out += "| `" + f.key + "` | " + default_text(f.get(defaults)) + " | " + allowed + " | " + f.meaning + " |\n";
  }
  return out;
}

}  // namespace copytask
