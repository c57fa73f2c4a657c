#pragma once
// The PyTorch parity fixtures (tests/fixtures/, made by tests/reference/make_parity_fixtures.py):
// their variants, loading them, and the model's parameters by the fixtures' names. Shared by
// the CPU parity test and the CUDA tests.
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/encoder.h"
#include "test_util.h"

namespace copytask::test::parity {

// Every fixture variant (tests/reference/README.md), each with causal off and on.
inline const std::vector<std::string> kVariants = {"none",          "sinusoidal",      "learned",       "rope",
                                            "rope_partial",  "alibi",           "alibi_offset",  "alibi_two_sided",
                                            "alibi_learned", "t5",              "dynamic",       "dynamic_log",
                                            "kerple",        "fire"};

struct Fixture {
  std::string name;
  nlohmann::json json;
};

inline Fixture load_fixture(const std::string& variant, bool causal) {
  const std::string name = "parity_" + variant + (causal ? "_causal" : "");
  std::ifstream file(test::fixtures_dir() + "/" + name + ".json");
  EXPECT_TRUE(file.good()) << "missing fixture " << name << "; run tests/reference/make_parity_fixtures.py";
  return {name, nlohmann::json::parse(file)};
}

inline EncoderShape shape_of(const nlohmann::json& config) {
  EncoderShape shape;
  shape.vocab = config["vocab_size"];
  shape.context = config["context"];
  shape.embed = config["embed"];
  shape.heads = config["heads"];
  shape.blocks = config["blocks"];
  shape.hidden = config["hidden"];
  shape.dropout = 0.0;
  return shape;
}

// The fixture's scheme options, read as a config's model keys are.
inline PositionalOptions options_of(const nlohmann::json& config) {
  nlohmann::json dotted = nlohmann::json::object();
  dotted["model.heads"] = config["heads"];
  dotted["model.embed"] = config["embed"];
  for (const auto& item : config["options"].items()) dotted["model." + item.key()] = item.value();
  return config_with_overrides(Config{}, dotted, "fixture").model.positional_options;
}

inline constexpr double kTolerance = 5e-5;  // float32 against float64, values of order 1

// The fixture's value of each of the model's parameters, by the fixture's names: the
// stacked ones as they are, member m's scheme's as positional.<name>.
inline std::vector<std::pair<torch::Tensor, std::string>> parameters_by_fixture_name(Encoder& model, int64_t m) {
  std::vector<std::pair<torch::Tensor, std::string>> out;
  for (const auto& [name, value] : model->stacked_parameters()) out.emplace_back(value[m], name);
  for (const auto& item : model->scheme(m).named_parameters()) out.emplace_back(item.value(), "positional." + item.key());
  return out;
}

}  // namespace copytask::test::parity
