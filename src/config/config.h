#pragma once
// The resolved configuration: one plain struct per area, defaults = the reference
// protocol (docs/design.md section 1). Resolution order: defaults < --config file < key=value
// overrides, then validation. Every problem is a ConfigError naming the key.
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "task/task_config.h"  // TaskConfig, EvalConfig: the data's own keys, below config

namespace copytask {

// A bad config: the message names the key, the value and what is allowed.
// The command line turns it into exit code 2 before any work starts.
class ConfigError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};


// The options of the positional schemes (docs/design.md section 2), model.<key> in a config.
// Each applies to its own scheme (the prefix names it; bias_mlp_hidden to dynamic and
// fire) and is ignored by the others. They are per member: schemes that differ only in
// these options still train in one batch.
struct PositionalOptions {
  double rope_base = 10000.0;                // RoPE's base: theta = p * base^(-2i / rotated dims)
  double rope_fraction = 1.0;                // share of each head's dimensions that rotate (partial rotary)
  std::vector<double> alibi_slopes;          // one per head; [] = the paper's rule
  std::vector<double> alibi_right_slopes;    // two-sided: the slopes towards later keys; [] = alibi_slopes
  std::string alibi_direction = "symmetric"; // symmetric | offset | two-sided
  bool alibi_learned = false;                // slopes learned (as logs), starting from the above
  int64_t t5_buckets = 32;                   // T5: buckets, half for each direction
  int64_t t5_max_distance = 128;             // T5: distances beyond share the last bucket
  int64_t bias_mlp_hidden = 32;              // dynamic, fire: the bias MLP's hidden width
  int64_t dynamic_depth = 2;                 // dynamic: hidden layers of the MLP
  bool dynamic_log_distance = false;         // dynamic: input sign(d) log(1 + |d|) instead of d
  double fire_threshold = 0;                 // FIRE: initial threshold L in positions; 0 = task.context
  int64_t learned_positions = 0;             // learned: rows of the table; 0 = learned_rows() below. Rows
                                             // beyond those training reaches are never trained
  // The position ID each token carries (docs/design.md section 2): `sequential` 0..T-1;
  // `random` a sorted random subset of 0..L-1 (Ruoss et al. 2023); `offset` s..s+T-1, s
  // drawn per example in training, 0 in evaluation (McLeish et al. 2024); `coupled` as
  // offset, and each output takes the ID of the input token it copies (Cho et al. 2024).
  std::string position_ids = "sequential";
  int64_t position_range = 0;                // L: IDs lie in 0..L-1; 0 = the longest evaluated context
                                             // (resolved when the config is read); 0 under sequential
  double xpos_scale_base = 512;              // xpos: gamma in the scale zeta^((i - j) / gamma)
  int64_t cope_positions = 0;                // cope: rows of each position embedding; 0 = task.context
  bool dape = false;                         // DAPE on a score-bias scheme: bias + MLP([scores; bias]) per block
  int64_t dape_hidden = 32;                  // DAPE: the MLP's hidden width
  bool length_scale = false;                 // scalable softmax: the logits times s_(block, head) log(keys seen)

  bool operator==(const PositionalOptions& other) const;
};

// Whether the tokens carry IDs other than 0..T-1 (model.position_ids is not sequential).
inline bool position_ids_vary(const PositionalOptions& o) { return o.position_ids != "sequential"; }

// The rows of a learned table: learned_positions, or when 0 the training context, or L
// when the position IDs vary (a row for every ID). Not resolved into the config, so that
// a scheme's own position IDs decide it.
inline int64_t learned_rows(const PositionalOptions& o, int64_t context) {
  if (o.learned_positions > 0) return o.learned_positions;
  return position_ids_vary(o) && o.position_range > context ? o.position_range : context;
}

// The option keys above, as they appear under model. in a config (rope_base, ...).
const std::vector<std::string>& positional_option_keys();

struct ModelConfig {
  int64_t embed = 20;       // D
  int64_t heads = 1;        // H, must divide embed
  int64_t blocks = 2;       // pre-LN transformer blocks
  int64_t hidden = 32;      // F, feed-forward hidden width
  std::string activation = "relu";  // the feed-forward's nonlinearity: a layer form (config/layer_form.h)
  double dropout = 0.1;
  std::string positional = "sinusoidal";  // a scheme of the registry: none, sinusoidal, learned, rope, alibi, t5, ...
  bool causal = false;      // attention mask: position i sees only j <= i
  PositionalOptions positional_options;
};

struct TrainConfig {
  int64_t steps = 2000;
  int64_t batch_size = 0;   // 0 = full batch (the reference protocol)
  double lr = 3e-4;         // Adam (the peak when a schedule is set)
  int64_t warmup_steps = 0; // steps of linear warm-up to lr (train/lr_schedule.h)
  std::string lr_schedule = "constant";  // after the warm-up: constant | cosine (decay towards 0)
  int64_t eval_every = 100; // steps between evaluations (and always at the last step)
  std::vector<int64_t> seeds = {0, 1, 2, 3, 4};
  std::string device = "auto";  // auto | cpu | cuda
  int64_t threads = 0;      // CPU threads for LibTorch; 0 = one per core
  std::string step = "auto";  // auto | fused | autograd: which training step (train/training_step.h)
  bool cuda_graph = true;   // on a GPU: capture the training step as a CUDA graph and replay it
  int64_t gpu_tile_examples = 0;  // the fused GPU step's tile: at most this many examples; 0 = what fits
  std::string gpu_kept_activations = "shared";  // shared | global: where the fused GPU step keeps its backward's activations
};

struct ReportConfig {
  std::vector<std::string> probes = {"7 1 8 2"};  // content tokens; <copy> and padding are added
};

// One scheme of a comparison: a name and the dotted overrides that make it,
// e.g. {"name": "alibi+causal", "model.positional": "alibi", "model.causal": true}.
struct SchemeSpec {
  std::string name;
  nlohmann::json overrides = nlohmann::json::object();  // dotted key -> value
};

struct CompareConfig {
  std::vector<SchemeSpec> schemes;  // defaults: the six schemes of the reference study
  // Dotted key -> list of values, crossed with the schemes: {"model.heads": [1, 2, 4]}
  // trains every scheme at every value (every combination when several keys are given).
  nlohmann::json grid = nlohmann::json::object();
};

struct Config {
  TaskConfig task;
  ModelConfig model;
  TrainConfig train;
  EvalConfig eval;
  ReportConfig report;
  CompareConfig compare = default_compare();

  static CompareConfig default_compare();
};

// Resolution: defaults, then the file (JSON, // comments allowed), then each "key=value"
// (value parsed as JSON, else taken as a string), then config_validate. Throws ConfigError.
Config config_resolve(const std::optional<std::string>& file_path,
                      const std::vector<std::string>& overrides);

// "key=value" texts -> a dotted-override object {"key": value}; the value is parsed as
// JSON, else taken as a string. Throws ConfigError for a text without '='.
nlohmann::json config_overrides_parse(const std::vector<std::string>& overrides);

// A value as JSON text for a message; bytes that are not UTF-8 (a mistyped or binary
// argument) become U+FFFD instead of making the message itself fail.
std::string json_shown(const nlohmann::json& value);

// JSON round trip. config_from_json checks every key and type against the defaults.
nlohmann::json config_to_json(const Config& config);
Config config_from_json(const nlohmann::json& json);

// Applies dotted overrides (a JSON object of "a.b": value) to a config; throws ConfigError.
Config config_with_overrides(const Config& config, const nlohmann::json& dotted_overrides,
                             const std::string& origin);

// The longest context length generalization evaluates at (the whole example of the longest
// content eval.max_len asks for), never shorter than the training context: what the
// position IDs' range L covers by default.
int64_t longest_eval_context(const EvalConfig& eval, const TaskConfig& task);

// Range and consistency checks; throws ConfigError naming the key. A learned table must
// have a row for every context eval.max_len evaluates at; `copytask eval` passes false
// (saved models keep their rows, and the lengths beyond them are reported as skipped).
void config_validate(const Config& config, bool learned_rows_must_fit_eval = true);

// The config of one scheme of a comparison (base + the scheme's overrides), validated.
Config config_for_scheme(const Config& base, const SchemeSpec& scheme);

// The grid's combinations, in order (keys sorted, the last key varying fastest): each a
// dotted-override object; one empty object when there is no grid.
std::vector<nlohmann::json> grid_combinations(const nlohmann::json& grid);
// The name of a scheme at one grid point: "alibi@model.heads=2" ("alibi" with no grid).
std::string grid_point_name(const std::string& scheme, const nlohmann::json& point);

// The name `train` gives its one scheme: the positional name, "+causal" when causal is on.
std::string scheme_name_of(const ModelConfig& model);

// The resolved config flattened to "key = value" lines, for the start-of-run table.
std::vector<std::pair<std::string, std::string>> config_flatten(const Config& config);

}  // namespace copytask
