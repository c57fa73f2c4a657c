#pragma once
// The PyTorch parity fixtures (tests/fixtures/, made by tests/reference/make_parity_fixtures.py):
// their variants, loading them, and the model's parameters by the fixtures' names. Shared by
// the CPU parity test and the CUDA tests.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "model/encoder.h"
#include "test_util.h"

namespace copytask::test::parity {

// Every fixture in tests/fixtures (tests/reference/make_parity_fixtures.py writes them: each
// variant with causal off and on, or on only where the scheme is causal only), by file
// name without .json, sorted: the test covers whatever the reference script wrote.
inline std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(test::fixtures_dir())) {
    const std::string file = entry.path().filename().string();
    if (file.rfind("parity_", 0) == 0 && entry.path().extension() == ".json")
      names.push_back(file.substr(0, file.size() - 5));
  }
  std::sort(names.begin(), names.end());
  return names;
}

struct Fixture {
  std::string name;
  nlohmann::json json;
};

inline Fixture load_fixture(const std::string& name) {
  std::ifstream file(test::fixtures_dir() + "/" + name + ".json");
  EXPECT_TRUE(file.good()) << "missing fixture " << name << "; run tests/reference/make_parity_fixtures.py";
  return {name, nlohmann::json::parse(file)};
}

inline Fixture load_fixture(const std::string& variant, bool causal) {
  return load_fixture("parity_" + variant + (causal ? "_causal" : ""));
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
