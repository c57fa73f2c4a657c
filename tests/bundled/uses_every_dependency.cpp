// Uses CLI11, nlohmann/json, spdlog (with fmt) and LibTorch's headers in one file, as
// copytask's sources do: it must compile and link from the bundled copies alone.
#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <torch/types.h>

int main(int argc, char** argv) {
  CLI::App app{"bundled dependencies"};
  int value = 3;
  app.add_option("--value", value);
  CLI11_PARSE(app, argc, argv);
  const nlohmann::json json = {{"value", value}, {"torch", torch::ones({2}).sum().item<double>()}};
  spdlog::info("{}", fmt::format("json {}", json.dump()));
  return json["torch"] == 2.0 ? 0 : 1;
}
