// copytask train: one scheme (model.positional, model.causal), all its seeds.
#include <memory>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"

namespace copytask {

CLI::App* train_command_add(CLI::App& app, StudyCommandOptions& options) {
  CLI::App* command = app.add_subcommand("train", "train one scheme (model.positional, model.causal), all its seeds");
  study_options_bind(*command, options);
  return command;
}

}  // namespace copytask
