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

// The fixture's layer form: its config's layer-form keys ("activation": "gelu"), the
// defaults where it has none, read as a config's model keys are.
inline LayerForm form_of(const nlohmann::json& config) {
  nlohmann::json dotted = nlohmann::json::object();
  for (const std::string& key : layer_form_keys()) {
    const std::string leaf = key.substr(key.find('.') + 1);
    if (config.contains(leaf)) dotted[key] = config[leaf];
  }
  return layer_form_of(config_with_overrides(Config{}, dotted, "fixture"));
}

// The fixtures grouped by layer form (one batch per form: its members share it), each
// group under layer_form_text, in file order.
inline std::vector<std::pair<std::string, std::vector<Fixture>>> fixtures_by_form(std::vector<Fixture> fixtures) {
  std::vector<std::pair<std::string, std::vector<Fixture>>> groups;
  for (auto& fixture : fixtures) {
    const std::string form = layer_form_text(form_of(fixture.json["config"]));
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == form; });
    if (group == groups.end()) group = groups.insert(groups.end(), {form, {}});
    group->second.push_back(std::move(fixture));
  }
  return groups;
}

inline EncoderShape shape_of(const nlohmann::json& config) {
  EncoderShape shape;
  shape.form = form_of(config);
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

// The fixtures as the members of ONE mixed batch on `device`, in eval mode, with their
// parameters loaded; their tokens, targets and position IDs (on the CPU).
struct LoadedBatch {
  Encoder model{nullptr};
  std::vector<torch::Tensor> tokens, targets;
  // (M, B, T) each member's position IDs: its fixture's "positions", 0..T-1 where it has
  // none; undefined when no fixture has any.
  torch::Tensor positions;
  int64_t table_positions = 0;  // P of the tables the IDs read (the context without IDs)
};

// One member per fixture, each with its fixture's scheme, mask and options.
inline std::vector<MemberSpec> fixture_members(const std::vector<Fixture>& fixtures) {
  std::vector<MemberSpec> members;
  for (const auto& fixture : fixtures) {
    const auto& config = fixture.json["config"];
    members.push_back({fixture.name, 0, config["positional"], config["causal"], options_of(config)});
  }
  return members;
}

inline LoadedBatch loaded_batch(const std::vector<Fixture>& fixtures, const torch::Device& device = torch::kCPU) {
  const int64_t M = static_cast<int64_t>(fixtures.size());
  LoadedBatch out{Encoder(shape_of(fixtures[0].json["config"]), fixture_members(fixtures), device), {}, {}, {}, 0};
  Encoder& model = out.model;
  {
    torch::NoGradGuard no_grad;
    for (int64_t m = 0; m < M; ++m) {
      const auto& params = fixtures[m].json["params"];
      size_t loaded = 0;
      for (auto& [slot, name] : parameters_by_fixture_name(model, m)) {
        EXPECT_TRUE(params.contains(name)) << fixtures[m].name << " lacks " << name;
        auto value = test::tensor_from_json(params[name]);
        EXPECT_EQ(value.sizes(), slot.sizes()) << fixtures[m].name << " " << name;
        slot.copy_(value);
        ++loaded;
      }
      EXPECT_EQ(loaded, params.size()) << fixtures[m].name << ": the fixture has parameters the model lacks";
      out.tokens.push_back(test::tokens_from_json(fixtures[m].json["tokens"]));
      out.targets.push_back(test::tokens_from_json(fixtures[m].json["targets"]));
    }
  }
  model->eval();
  const int64_t T = out.tokens[0].size(1);
  out.table_positions = model->table_positions(T);
  if (model->position_ids_vary()) {
    std::vector<torch::Tensor> ids;
    for (int64_t m = 0; m < M; ++m)
      ids.push_back(fixtures[m].json.contains("positions") ? test::tokens_from_json(fixtures[m].json["positions"])
                                                           : torch::arange(T).expand_as(out.tokens[m]));
    out.positions = torch::stack(ids);  // (M, B, T)
  }
  return out;
}

// Compares member m's gradients (on any device) with its fixture's; returns the worst
// difference and names its parameter.
inline double fixture_gradient_difference(Encoder& model, int64_t m, const Fixture& fixture, std::string* worst_name) {
  std::vector<std::pair<torch::Tensor, std::string>> grads;
  for (const auto& [name, value] : model->stacked_parameters())
    grads.emplace_back(value.grad().defined() ? value.grad()[m] : torch::Tensor(), name);
  for (const auto& item : model->scheme(m).named_parameters())
    grads.emplace_back(item.value().grad(), "positional." + item.key());
  double worst = 0;
  for (const auto& [grad, name] : grads) {
    EXPECT_TRUE(grad.defined()) << fixture.name << " " << name;
    if (!grad.defined()) continue;
    const double diff = test::max_abs_diff(grad.cpu(), test::tensor_from_json(fixture.json["grads"][name]));
    if (diff >= worst) {
      worst = diff;
      *worst_name = name;
    }
  }
  return worst;
}

}  // namespace copytask::test::parity
