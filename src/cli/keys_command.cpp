// copytask keys: every config key with its default, range and meaning, as the Markdown table
// of docs/configuration.md.
#include <cstdio>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "config/config_fields.h"

namespace copytask {

CLI::App* keys_command_add(CLI::App& app, KeysCommandOptions&) {
  return app.add_subcommand("keys", "every config key with its default and meaning, as a Markdown table");
}

int keys_command_run(const KeysCommandOptions&) {
  std::printf("%s", config_keys_markdown().c_str());
  return kExitOk;
}

}  // namespace copytask
