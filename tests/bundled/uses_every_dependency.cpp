// Uses CLI11, nlohmann/json and LibTorch's headers in one file, and logs through copytask's
// logging library (spdlog and fmt, compiled apart from LibTorch): all from the bundled
// copies alone.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include "util/log.h"

int main(int argc, char** argv) {
  CLI::App app{"bundled dependencies"};
  int value = 3;
  app.add_option("--value", value);
  CLI11_PARSE(app, argc, argv);
  const nlohmann::json json = {{"value", value}, {"torch", torch::ones({2}).sum().item<double>()}};
  copytask::log_setup();
  copytask::log_info("json {} ({:.1f})", json.dump(), json["torch"].get<double>());
  return json["torch"] == 2.0 ? 0 : 1;
}
