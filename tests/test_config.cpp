// Config resolution: defaults, file, overrides, JSON round trip, and every rejected config.
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <typeinfo>

#include <unistd.h>

#include <gtest/gtest.h>

#include "model/positional.h"

#include "config/config.h"
#include "config/config_fields.h"
#include "test_paths.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;

// The message of the ConfigError that resolving `overrides` throws ("" if none).
std::string rejection(const std::vector<std::string>& overrides) {
  try {
    config_resolve(std::nullopt, overrides);
  } catch (const ConfigError& error) {
    return error.what();
  }
  return "";
}

void expect_rejected(const std::vector<std::string>& overrides, const std::vector<std::string>& fragments) {
  const std::string message = rejection(overrides);
  ASSERT_FALSE(message.empty()) << "accepted: " << overrides.front();
  for (const auto& fragment : fragments)
    EXPECT_NE(message.find(fragment), std::string::npos) << "'" << fragment << "' missing from: " << message;
}

TEST(Config, DefaultsAreTheReferenceProtocol) {
  Config c = config_resolve(std::nullopt, {});
  EXPECT_EQ(c.task.vocab_size, 11);
  EXPECT_EQ(c.task.context, 10);
  EXPECT_EQ(c.task.min_len, 1);
  EXPECT_EQ(c.task.max_len, 8);
  EXPECT_EQ(c.task.examples, 10000);
  EXPECT_DOUBLE_EQ(c.task.test_fraction, 0.1);
  EXPECT_EQ(c.model.blocks, 2);
  EXPECT_EQ(c.model.heads, 1);
  EXPECT_EQ(c.model.embed, 20);
  EXPECT_EQ(c.model.hidden, 32);
  EXPECT_DOUBLE_EQ(c.model.dropout, 0.1);
  EXPECT_DOUBLE_EQ(c.train.lr, 3e-4);
  EXPECT_EQ(c.train.steps, 2000);
  EXPECT_EQ(c.train.batch_size, 0);
  EXPECT_EQ(c.train.seeds.size(), 5u);
  ASSERT_EQ(c.compare.schemes.size(), 6u);
  EXPECT_EQ(c.compare.schemes[5].name, "alibi+causal");
  EXPECT_EQ(c.report.probes, std::vector<std::string>{"7 1 8 2"});
}

TEST(Config, OverridesParseJsonElseString) {
  Config c = config_resolve(std::nullopt, {"model.positional=rope", "train.seeds=[0,1,2]", "model.causal=true",
                                           "train.lr=0.001", "task.examples=1e3", "model.heads=2"});
  EXPECT_EQ(c.model.positional, "rope");
  EXPECT_EQ(c.train.seeds, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(c.model.causal);
  EXPECT_DOUBLE_EQ(c.train.lr, 0.001);
  EXPECT_EQ(c.task.examples, 1000);
  EXPECT_EQ(c.model.heads, 2);
  EXPECT_EQ(scheme_name_of(c.model), "rope+causal");
}

TEST(Config, JsonRoundTripIsExact) {
  Config c = config_resolve(std::nullopt, {"model.positional=learned", "train.batch_size=64", "report.probes=[\"1 2\"]"});
  nlohmann::json once = config_to_json(c);
  nlohmann::json twice = config_to_json(config_from_json(once));
  EXPECT_EQ(once, twice);
  EXPECT_EQ(config_from_json(once).train.batch_size, 64);
}

TEST(Config, FileThenOverridesWithCommentsAllowed) {
  const fs::path path = fs::temp_directory_path() / "copytask_test_config.json";
  std::ofstream(path) << "{\n  // a reason for each line\n  \"train\": {\"steps\": 50, \"lr\": 0.01},\n"
                         "  \"model\": {\"positional\": \"alibi\"}\n}\n";
  Config c = config_resolve(path.string(), {"train.steps=60"});
  EXPECT_EQ(c.train.steps, 60);  // the override wins over the file
  EXPECT_DOUBLE_EQ(c.train.lr, 0.01);
  EXPECT_EQ(c.model.positional, "alibi");
  fs::remove(path);
}

TEST(Config, MalformedOrMissingFilesAreRejected) {
  const fs::path path = fs::temp_directory_path() / "copytask_test_bad.json";
  std::ofstream(path) << "{\"train\": {\"steps\": 50,}";
  try {
    config_resolve(path.string(), {});
    FAIL();
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("not valid JSON"), std::string::npos) << error.what();
  }
  fs::remove(path);
  EXPECT_THROW(config_resolve("/nonexistent/config.json", {}), ConfigError);
}

TEST(Config, UnknownKeysAreRejectedWithASuggestion) {
  expect_rejected({"model.head=2"}, {"unknown key 'model.head'", "did you mean 'model.heads'"});
  expect_rejected({"modle.heads=2"}, {"unknown key 'modle'", "did you mean 'model'"});
  expect_rejected({"train.seeds"}, {"not key=value"});
  expect_rejected({"model..heads=2"}, {"empty part"});
}

TEST(Config, WrongTypesAreRejected) {
  expect_rejected({"model.heads=two"}, {"model.heads", "expected an integer", "a string"});
  expect_rejected({"model.heads=2.5"}, {"model.heads", "expected an integer"});
  expect_rejected({"model.causal=1"}, {"model.causal", "true or false"});
  expect_rejected({"train.seeds=3"}, {"train.seeds", "expected a list"});
  expect_rejected({"train.seeds=[0,\"a\"]"}, {"train.seeds[1]", "expected an integer"});
  expect_rejected({"model.positional=3"}, {"model.positional", "expected a string"});
}

TEST(Config, OutOfRangeAndContradictoryValuesAreRejected) {
  expect_rejected({"model.heads=3"}, {"model.heads = 3", "must divide model.embed = 20"});
  expect_rejected({"model.positional=rope", "model.embed=20", "model.heads=4"},
                  {"model.positional", "even head dimension", "5"});
  expect_rejected({"model.positional=sinusoidal", "model.embed=21", "model.heads=1"}, {"even model.embed"});
  std::string every_scheme;
  for (const auto& name : positional_names()) every_scheme += (every_scheme.empty() ? "" : ", ") + name;
  expect_rejected({"model.positional=nope"}, {"model.positional", every_scheme});
  expect_rejected({"model.positional=xpos"}, {"model.positional", "causal"});
  expect_rejected({"model.positional=rope", "model.dape=true"}, {"model.dape", "score bias"});
  expect_rejected({"eval.rope_rescaling=[\"pi\",\"ntk\",\"pi\"]"}, {"eval.rope_rescaling", "distinct"});
  expect_rejected({"eval.rope_rescaling=[1]"}, {"eval.rope_rescaling[0]", "string"});
  expect_rejected({"eval.rope_factor=0.5"}, {"eval.rope_factor", "1..10000"});
  expect_rejected({"task.min_len=5", "task.max_len=4"}, {"task.max_len = 4", "at least task.min_len (5)"});
  expect_rejected({"task.vocab_size=4", "task.max_len=2", "task.examples=100"},
                  {"task.examples = 100", "only 6 distinct inputs"});
  expect_rejected({"task.examples=5", "task.test_fraction=0.05"}, {"task.test_fraction", "test split empty"});
  expect_rejected({"task.sampling=random"}, {"task.sampling", "unique or fresh"});
  expect_rejected({"task.convention=paper"}, {"task.convention", "copytask or cho"});
  expect_rejected({"task.convention=cho"}, {"task.convention = \"cho\"", "task.format = next-token", "end_token = own"});
  expect_rejected({"task.convention=cho", "task.format=next-token", "model.causal=true"},
                  {"task.convention = \"cho\"", "task.end_token = own"});
  expect_rejected({"task.sampling=fresh"}, {"train.batch_size", "needs minibatches"});
  expect_rejected({"task.sampling=fresh", "train.batch_size=128"},
                  {"task.examples = 10000", "train.steps x train.batch_size = 256000", "at least 284446"});
  expect_rejected({"task.sampling=fresh", "task.vocab_size=4", "task.max_len=2", "task.examples=1000",
                   "train.batch_size=10", "train.steps=10"},
                  {"task.examples = 1000", "test split of 100 distinct inputs", "at most 3 "});
  expect_rejected({"task.context=4", "task.min_len=4", "task.max_len=4"}, {"task.context = 4", "too short for task.min_len"});
  expect_rejected({"task.context=6", "task.max_len=8"}, {"task.max_len = 8", "at most 5"});
  expect_rejected({"task.test_fraction=1.5"}, {"task.test_fraction", "between 0 and 1"});
  expect_rejected({"model.dropout=1"}, {"model.dropout", "[0, 1)"});
  expect_rejected({"train.batch_size=20000"}, {"train.batch_size = 20000", "1..9000"});
  expect_rejected({"train.lr=-1"}, {"train.lr"});
  expect_rejected({"train.steps=0"}, {"train.steps"});
  expect_rejected({"train.steps=100", "train.warmup_steps=100"}, {"train.warmup_steps = 100", "1..99"});
  expect_rejected({"train.warmup_steps=-1"}, {"train.warmup_steps"});
  expect_rejected({"train.lr_schedule=linear"}, {"train.lr_schedule", "constant or cosine"});
  expect_rejected({"train.seeds=[]"}, {"train.seeds", "at least one seed"});
  expect_rejected({"train.seeds=[1,1]"}, {"train.seeds", "distinct"});
  expect_rejected({"train.device=tpu"}, {"train.device", "auto, cpu or cuda"});
  expect_rejected({"report.probes=[\"7 1 x\"]"}, {"report.probes[0]", "'x' is not a token id"});
  expect_rejected({"report.probes=[\"7 10\"]"}, {"report.probes[0]", "not a content token", "1..9"});
  expect_rejected({"report.probes=[\"1 2 3 4 5 6 7 8 9 1\"]"}, {"do not fit in task.context = 10"});
}

TEST(Config, CompareSchemesAreChecked) {
  expect_rejected({"compare.schemes=[{\"model.positional\": \"rope\"}]"}, {"compare.schemes[0]", "no \"name\""});
  expect_rejected({"compare.schemes=[{\"name\": \"x\", \"task.seed\": 3}]"}, {"task.seed", "cannot vary between schemes"});
  expect_rejected({"compare.schemes=[{\"name\": \"x\", \"train.device\": \"cpu\"}]"}, {"train.device", "cannot vary"});
  expect_rejected({"compare.schemes=[{\"name\": \"x\", \"model.head\": 2}]"}, {"\"x\"", "did you mean 'model.heads'"});
  expect_rejected({"compare.schemes=[{\"name\": \"a\"}, {\"name\": \"a\"}]"}, {"used twice"});
  expect_rejected({"compare.schemes=[{\"name\": \"a/b\"}]"}, {"names files"});
  expect_rejected({"compare.schemes=[]"}, {"at least one scheme"});
  Config c = config_resolve(std::nullopt, {"compare.schemes=[{\"name\": \"r\", \"model.positional\": \"rope\", \"model.heads\": 3}]"});
  EXPECT_THROW(config_for_scheme(c, c.compare.schemes[0]), ConfigError);  // 3 heads do not divide 20
  Config ok = config_for_scheme(c, {"r", {{"model.positional", "rope"}, {"model.causal", true}}});
  EXPECT_EQ(ok.model.positional, "rope");
  EXPECT_TRUE(ok.model.causal);
}

TEST(Config, SchemeOptionsAreReadAndChecked) {
  Config c = config_resolve(std::nullopt, {"model.positional=alibi", "model.heads=2", "model.alibi_slopes=[0.5, 0.25]",
                                           "model.alibi_direction=two-sided", "model.alibi_right_slopes=[1, 2]",
                                           "model.alibi_learned=true", "model.rope_fraction=0.5", "model.t5_buckets=16"});
  const PositionalOptions& o = c.model.positional_options;
  EXPECT_EQ(o.alibi_slopes, (std::vector<double>{0.5, 0.25}));
  EXPECT_EQ(o.alibi_right_slopes, (std::vector<double>{1.0, 2.0}));
  EXPECT_EQ(o.alibi_direction, "two-sided");
  EXPECT_TRUE(o.alibi_learned);
  EXPECT_DOUBLE_EQ(o.rope_fraction, 0.5);
  EXPECT_EQ(o.t5_buckets, 16);
  EXPECT_DOUBLE_EQ(o.fire_threshold, 10.0) << "FIRE's threshold defaults to the context, resolved";
  EXPECT_EQ(config_from_json(config_to_json(c)).model.positional_options, o);

  expect_rejected({"model.alibi_slopes=[0.5, 0.25]"}, {"model.alibi_slopes", "one slope per head (model.heads = 1)"});
  expect_rejected({"model.alibi_slopes=[-1]"}, {"model.alibi_slopes", "positive"});
  expect_rejected({"model.alibi_slopes=[\"a\"]"}, {"model.alibi_slopes[0]", "expected a number"});
  expect_rejected({"model.alibi_direction=left"}, {"model.alibi_direction", "symmetric, offset or two-sided"});
  expect_rejected({"model.alibi_right_slopes=[1]"}, {"model.alibi_right_slopes", "two-sided only"});
  expect_rejected({"model.rope_fraction=0"}, {"model.rope_fraction", "(0, 1]"});
  expect_rejected({"model.positional=rope", "model.heads=5", "model.embed=20", "model.rope_fraction=0.2"},
                  {"model.positional", "rotates no pair"});
  expect_rejected({"model.rope_base=1"}, {"model.rope_base", "above 1"});
  expect_rejected({"model.t5_buckets=7"}, {"model.t5_buckets", "even"});
  expect_rejected({"model.t5_buckets=32", "model.t5_max_distance=8"}, {"model.t5_max_distance", "exceed"});
  expect_rejected({"model.bias_mlp_hidden=0"}, {"model.bias_mlp_hidden", "1..1024"});
  expect_rejected({"model.dynamic_depth=9"}, {"model.dynamic_depth", "1..8"});
  expect_rejected({"model.fire_threshold=-3"}, {"model.fire_threshold"});
  EXPECT_EQ(learned_rows(o, 10), 10) << "the learned table's rows default to the context";
  PositionalOptions random = o;
  random.position_ids = "random";
  random.position_range = 64;
  EXPECT_EQ(learned_rows(random, 10), 64) << "or to L under position IDs";
  expect_rejected({"model.learned_positions=-1"}, {"model.learned_positions", "1..8192"});
  expect_rejected({"model.positional=learned", "model.learned_positions=5"},
                  {"model.learned_positions = 5", "fewer rows than task.context = 10"});
}

// Length generalization's keys: off by default, resolved and checked.
// model.position_ids and its range L: the default L is the longest evaluated context, each
// scheme of a study its own; every bad value or combination refused naming the key; the
// old model.random_positions read as position_ids = random, never written.
TEST(Config, PositionIdsTheirRangeAndTheOldKey) {
  const Config plain = config_resolve(std::nullopt, {});
  EXPECT_EQ(plain.model.positional_options.position_ids, "sequential");
  EXPECT_EQ(plain.model.positional_options.position_range, 0);
  for (const std::string kind : {"random", "offset", "coupled"}) {
    const Config c = config_resolve(std::nullopt, {"model.positional=rope", "model.position_ids=" + kind});
    EXPECT_EQ(c.model.positional_options.position_range, 10) << kind << ": the training context by default";
    const Config longer = config_resolve(std::nullopt, {"model.positional=rope", "model.position_ids=" + kind, "eval.max_len=12"});
    EXPECT_EQ(longer.model.positional_options.position_range, 25) << kind << ": the longest evaluated context (2 x 12 + 1)";
  }
  // A scheme of a study with a longer context takes its own default, not the base's.
  const Config study = config_resolve(
      std::nullopt, {"model.positional=rope", "model.position_ids=offset",
                     "compare.schemes=[{\"name\": \"a\"}, {\"name\": \"b\", \"task.context\": 16}, "
                     "{\"name\": \"c\", \"task.context\": 16, \"model.position_range\": 30}]"});
  EXPECT_EQ(config_for_scheme(study, study.compare.schemes[0]).model.positional_options.position_range, 10);
  EXPECT_EQ(config_for_scheme(study, study.compare.schemes[1]).model.positional_options.position_range, 16);
  EXPECT_EQ(config_for_scheme(study, study.compare.schemes[2]).model.positional_options.position_range, 30);

  expect_rejected({"model.position_ids=shifted"}, {"model.position_ids", "sequential, random, offset or coupled"});
  expect_rejected({"model.position_ids=offset", "model.position_range=5"}, {"model.position_range = 5", "10..4096"});
  expect_rejected({"model.position_ids=coupled", "model.position_range=20", "eval.max_len=12"},
                  {"model.position_range = 20", "25..4096", "eval.max_len = 12"});
  expect_rejected({"model.position_range=20"}, {"model.position_range = 20", "applies with model.position_ids"});
  expect_rejected({"model.positional=none", "model.position_ids=offset"}, {"model.position_ids", "reads none"});
  expect_rejected({"model.positional=fox", "model.position_ids=coupled"}, {"model.position_ids", "reads none"});
  expect_rejected({"model.positional=learned", "model.position_ids=random", "model.position_range=20",
                   "model.learned_positions=12"},
                  {"model.learned_positions = 12", "at least model.position_range = 20"});
  expect_rejected({"model.positional=xpos", "model.causal=true", "model.position_ids=coupled"}, {"xpos", "coupled", "offset"});
  EXPECT_NO_THROW(config_resolve(std::nullopt, {"model.positional=xpos", "model.causal=true", "model.position_ids=offset"}));

  // The old key: L > 0 is position_ids = random with range L; 0 sets nothing; never written.
  const Config old = config_resolve(std::nullopt, {"model.positional=rope", "model.random_positions=32"});
  EXPECT_EQ(old.model.positional_options.position_ids, "random");
  EXPECT_EQ(old.model.positional_options.position_range, 32);
  EXPECT_FALSE(config_to_json(old)["model"].contains("random_positions"));
  EXPECT_EQ(config_from_json(config_to_json(old)).model.positional_options, old.model.positional_options);
  const Config zero = config_resolve(std::nullopt, {"model.positional=rope", "model.position_ids=offset", "model.random_positions=0"});
  EXPECT_EQ(zero.model.positional_options.position_ids, "offset");
  expect_rejected({"model.positional=rope", "model.position_ids=coupled", "model.random_positions=32"},
                  {"model.random_positions = 32", "old form", "model.position_ids = coupled"});
  expect_rejected({"model.positional=rope", "model.position_ids=random", "model.position_range=24", "model.random_positions=32"},
                  {"model.random_positions = 32", "model.position_range = 24"});
}

TEST(Config, TheNextTokenFormatNeedsTheCausalMask) {
  expect_rejected({"task.format=next-token"}, {"task.format", "next-token", "model.causal=true"});
  expect_rejected({"task.format=spoken"}, {"task.format", "placeholders or next-token"});
  const Config c = config_resolve(std::nullopt, {"task.format=next-token", "model.causal=true", "eval.max_len=12"});
  EXPECT_EQ(c.task.format, "next-token");
  EXPECT_EQ(config_resolve(std::nullopt, {}).task.format, "placeholders");
}

TEST(Config, EvalKeysForLengthGeneralization) {
  const Config defaults = config_resolve(std::nullopt, {});
  EXPECT_EQ(defaults.eval.max_len, 0) << "off unless asked for";
  const Config c = config_resolve(std::nullopt, {"eval.max_len=16", "eval.per_length=50", "eval.seed=3"});
  EXPECT_EQ(c.eval.max_len, 16);
  EXPECT_EQ(c.eval.per_length, 50);
  EXPECT_EQ(c.eval.seed, 3);
  EXPECT_EQ(config_from_json(config_to_json(c)).eval.max_len, 16);
  expect_rejected({"eval.max_len=4"}, {"eval.max_len = 4", "at least the longest trained"});
  expect_rejected({"eval.max_len=2000"}, {"eval.max_len", "256"});
  expect_rejected({"eval.per_length=0"}, {"eval.per_length", "1..100000"});
  expect_rejected({"eval.seed=-1"}, {"eval.seed", ">= 0"});
  expect_rejected({"eval.lengths=3"}, {"eval.lengths"});
  expect_rejected({"model.positional=learned", "eval.max_len=16"},
                  {"model.learned_positions", "model.learned_positions=33", "never trained"});
}

// A number beyond a double's range is refused with the key, not a crash (it aborted before).
TEST(Config, NumbersTooLargeForADoubleAreRefused) {
  expect_rejected({"model.dropout=1e999"}, {"model.dropout = 1e999", "too large for a double"});
  expect_rejected({"compare.schemes=[{\"name\": \"a\", \"train.lr\": -1e999}]"}, {"compare.schemes", "too large"});
  const fs::path path = fs::temp_directory_path() / "copytask_test_overflow.json";
  std::ofstream(path) << "{\"train\": {\"lr\": 1e999}}";
  try {
    config_resolve(path.string(), {});
    FAIL() << "accepted 1e999 in a file";
  } catch (const ConfigError& error) {
    EXPECT_NE(std::string(error.what()).find("fit a double"), std::string::npos) << error.what();
  }
  fs::remove(path);
}

// Many randomly mutated configs and overrides (a fixed seed): every one ends in a config
// or a ConfigError, never a crash or another exception. Values are drawn from what breaks
// parsers: huge and tiny numbers, wrong types, nesting, broken JSON, odd keys.
TEST(Config, RandomlyMutatedConfigsEndInAResultOrACleanRefusal) {
  std::mt19937_64 random(20261122);
  auto pick = [&](const std::vector<std::string>& from) { return from[random() % from.size()]; };
  std::vector<std::string> keys;
  for (const auto& [key, value] : config_flatten(Config{}))
    if (key.rfind("compare.schemes[", 0) != 0) keys.push_back(key);
  for (const std::string extra : {"compare.schemes", "model", "task", "", ".", "model.", "model.heads.x", "a.b.c"})
    keys.push_back(extra);
  const std::vector<std::string> values = {
      "0", "-1", "1", "2", "3", "7", "1e999", "-1e999", "1e308", "1e-320", "9223372036854775807",
      "18446744073709551616", "-9223372036854775809", "0.5", "2.5", "nan", "inf", "true", "false", "null",
      "\"rope\"", "rope", "t5", "alibi", "two-sided", "[]", "[0]", "[0,1,2]", "[1e999]", "[\"a\"]", "[[1]]", "{}",
      "{\"a\": 1}", "[{\"name\": \"x\"}]", "[{\"name\": \"x\", \"model.heads\": 1e999}]", "{\"model.heads\": [1, 2]}",
      "[", "{", "\"", "", "=", "1=2", "\u0000", "\xff\xfe", "[0,1,2,3,4,5,6,7,8,9,10,11,12]", "4096", "100000", "50000000"};
  int accepted = 0, refused = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<std::string> overrides;
    const int count = 1 + static_cast<int>(random() % 4);
    for (int i = 0; i < count; ++i) {
      std::string text = pick(keys) + "=" + pick(values);
      if (random() % 8 == 0 && !text.empty()) text[random() % text.size()] = static_cast<char>(random() % 256);  // a flipped byte
      overrides.push_back(text);
    }
    try {
      const Config config = config_resolve(std::nullopt, overrides);
      config_to_json(config).dump();  // what config.json and study.json will be written from
      for (const auto& scheme : config.compare.schemes) config_for_scheme(config, scheme);
      ++accepted;
    } catch (const ConfigError&) {
      ++refused;
    } catch (const std::exception& error) {
      ADD_FAILURE() << "overrides ended in " << typeid(error).name() << ": " << error.what() << "\n  "
                    << nlohmann::json(overrides).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }
  }
  // And whole files: the default config's text with bytes flipped, cut or duplicated.
  const std::string text = config_to_json(Config{}).dump(2);
  const fs::path path = fs::temp_directory_path() / ("copytask_test_fuzz_" + std::to_string(::getpid()) + ".json");
  for (int trial = 0; trial < 500; ++trial) {
    std::string mutated = text;
    for (int edits = 1 + static_cast<int>(random() % 3); edits > 0; --edits) {
      const size_t at = random() % mutated.size();
      switch (random() % 3) {
        case 0: mutated[at] = static_cast<char>(random() % 256); break;
        case 1: mutated.erase(at, random() % 8); break;
        default: mutated.insert(at, pick(values)); break;
      }
    }
    std::ofstream(path, std::ios::binary | std::ios::trunc) << mutated;
    try {
      config_resolve(path.string(), {});
      ++accepted;
    } catch (const ConfigError&) {
      ++refused;
    } catch (const std::exception& error) {
      ADD_FAILURE() << "a mutated file ended in " << error.what() << "\n" << mutated;
    }
  }
  fs::remove(path);
  std::printf("mutated configs: %d accepted, %d refused with a ConfigError\n", accepted, refused);
  EXPECT_GT(accepted, 50) << "the mutations must not all be trivially broken";
  EXPECT_GT(refused, 500);
}

}  // namespace
}  // namespace copytask

namespace copytask {
namespace {

// Every ready config (configs/, the experiments' own and their pilots/) resolves, and each of its schemes
// at every grid point gives a valid config: a key renamed in the code cannot leave a
// committed config that only fails when a user runs it.
TEST(Config, EveryCommittedConfigAndEachOfItsSchemesIsValid) {
  std::vector<fs::path> files;
  for (const char* folder : {"configs", "experiments"})
    for (const auto& entry : fs::recursive_directory_iterator(fs::path(test::source_dir()) / folder))
      if (entry.path().extension() == ".json" && (std::string(folder) == "configs" ||
                                                  entry.path().parent_path().parent_path().filename() == "experiments" ||
                                                  entry.path().parent_path().filename() == "pilots"))
        files.push_back(entry.path());
  ASSERT_GE(files.size(), 4u);
  size_t checked = 0;
  for (const auto& file : files) {
    // An experiment folder holds its own configs (heads.json, ...) beside a study's copied
    // output files, which are not configs.
    static const std::set<std::string> outputs = {"config.json",    "study.json", "results.json",
                                                  "attention.json", "positional.json", "run.json"};
    if (file.parent_path().parent_path().filename() == "experiments" && outputs.count(file.filename().string())) continue;
    SCOPED_TRACE(file.string());
    Config config;
    ASSERT_NO_THROW(config = config_resolve(file.string(), {}));
    for (const auto& scheme : config.compare.schemes)
      for (const auto& point : grid_combinations(config.compare.grid)) {
        SchemeSpec at_point = scheme;
        for (const auto& [key, value] : point.items()) at_point.overrides[key] = value;
        EXPECT_NO_THROW(config_for_scheme(config, at_point)) << scheme.name;
      }
    ++checked;
  }
  EXPECT_GE(checked, 4u);
}

// docs/configuration.md's key table is `copytask keys`, character for character, so the
// docs cannot fall behind the code: a key added to the field table fails here until the
// docs are regenerated (the test prints the table to paste).
TEST(Config, TheDocsKeyTableIsCopytaskKeys) {
  std::ifstream file(fs::path(test::source_dir()) / "docs" / "configuration.md");
  ASSERT_TRUE(file) << "docs/configuration.md is missing";
  std::stringstream text;
  text << file.rdbuf();
  const std::string docs = text.str();
  const std::string begin = "<!-- keys: the output of copytask keys -->\n", end = "<!-- /keys -->";
  const size_t from = docs.find(begin), to = docs.find(end);
  ASSERT_NE(from, std::string::npos) << "docs/configuration.md has no line " << begin;
  ASSERT_NE(to, std::string::npos) << "docs/configuration.md has no line " << end;
  EXPECT_EQ(docs.substr(from + begin.size(), to - from - begin.size()), config_keys_markdown())
      << "regenerate the table: build/copytask keys";
}

// The field table covers every key the JSON holds, once, each with a meaning, and each
// field reads back what it writes: a changed value of every field survives the round trip.
// Each key's own range is the field table's: the defaults (as a config file resolves them)
// are inside every range, and a value outside is refused with the table's own rule.
TEST(Config, EachKeysOwnRangeComesFromTheFieldTable) {
  const Config defaults = config_from_json(nlohmann::json::object());
  int checked = 0;
  for (const auto& field : config_fields()) {
    if (!field.allowed) continue;
    ++checked;
    EXPECT_FALSE(field.rule.empty()) << field.key;
    EXPECT_TRUE(field.allowed(field.get(defaults))) << field.key << " default outside its own range";
  }
  EXPECT_GE(checked, 25) << "most keys have a range of their own";
  const ConfigField* embed = config_field("model.embed");
  ASSERT_NE(embed, nullptr);
  Config wide = defaults;
  wide.model.embed = 5000;
  try {
    config_fields_check(wide);
    ADD_FAILURE() << "model.embed = 5000 passed";
  } catch (const ConfigError& error) {
    EXPECT_EQ(std::string(error.what()), "model.embed = 5000: " + embed->rule);
  }
}

TEST(Config, TheFieldTableReadsAndWritesEveryKey) {
  const nlohmann::json defaults = config_to_json(Config{});
  std::set<std::string> json_keys, field_keys;
  for (const auto& section : defaults.items())
    for (const auto& leaf : section.value().items()) json_keys.insert(section.key() + "." + leaf.key());
  for (const auto& field : config_fields()) {
    EXPECT_TRUE(field_keys.insert(field.key).second) << field.key << " is listed twice";
    EXPECT_FALSE(field.meaning.empty()) << field.key;
    if (field.old_form) field_keys.erase(field.key);  // read, never written
  }
  EXPECT_EQ(json_keys, field_keys);

  Config changed;
  changed.task.context = 17;
  changed.model.heads = 4;
  changed.model.embed = 32;
  changed.model.positional_options.t5_buckets = 16;
  changed.model.positional_options.fire_threshold = 12;  // 0 would be resolved to task.context on reading
  changed.model.positional_options.alibi_slopes = {0.5, 0.25, 0.125, 0.0625};
  changed.train.seeds = {3, 4};
  changed.eval.max_len = 9;
  changed.report.probes = {"1 2", "3"};
  changed.compare.grid = {{"model.blocks", {1, 2}}};
  const Config back = config_from_json(config_to_json(changed));
  EXPECT_EQ(config_to_json(back), config_to_json(changed));
  EXPECT_EQ(back.model.positional_options.alibi_slopes, changed.model.positional_options.alibi_slopes);
  EXPECT_EQ(back.train.seeds, changed.train.seeds);
  EXPECT_TRUE(back.model.positional_options == changed.model.positional_options);
  changed.model.positional_options.t5_buckets = 8;
  EXPECT_FALSE(back.model.positional_options == changed.model.positional_options);
}

// Which keys a scheme may vary comes from the field table's scopes.
TEST(Config, ASchemeMayVaryModelAndTrainKeysButNotTheStudysOrTheMachines) {
  for (const auto& field : config_fields()) {
    Config config;
    config.compare.schemes = {SchemeSpec{"s", {{field.key, field.get(Config{})}}}};
    nlohmann::json j = config_to_json(config);
    const bool accepted = [&] {
      try {
        config_from_json(j);
        return true;
      } catch (const ConfigError&) {
        return false;
      }
    }();
    EXPECT_EQ(accepted, field.scope == KeyScope::scheme) << field.key;
  }
}

}  // namespace
}  // namespace copytask
