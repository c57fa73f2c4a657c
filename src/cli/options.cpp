#include "cli/options.h"

#include <cstdio>
#include <optional>

#include <CLI/CLI.hpp>
#include <c10/util/Exception.h>

#include "config/config.h"

namespace copytask {

void config_options_bind(CLI::App& command, ConfigOptions& options) {
  command.add_option("--config", options.config_file, "JSON config file (// comments allowed); see configs/");
  command.add_flag("--print-config", options.print_config, "print the resolved config as JSON and exit");
  command.add_option("overrides", options.overrides,
                     "key=value overrides with dotted keys, e.g. model.positional=rope train.seeds=[0,1,2]");
}

bool config_options_resolve(const ConfigOptions& options, Config& config) {
  config = config_resolve(options.config_file.empty() ? std::nullopt : std::optional<std::string>(options.config_file),
                          options.overrides);
  if (!options.print_config) return true;
  std::printf("%s\n", config_to_json(config).dump(2).c_str());
  return false;
}

std::string error_text(const std::exception& error) {
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&error)) return torch_error->what_without_backtrace();
  return error.what();
}

void output_file_check(const std::string& option, const std::string& path) {
  if (path.empty()) return;
  const std::filesystem::path folder = std::filesystem::absolute(path).parent_path();
  if (!std::filesystem::is_directory(folder))
    throw OptionError(option + " " + path + ": its folder " + folder.string() +
                      " does not exist (make it first, or name a file in an existing folder)");
}

OptionError option_error(const std::string& option, const ConfigError& error) {
  return OptionError(option + " " + error.what());
}

}  // namespace copytask
