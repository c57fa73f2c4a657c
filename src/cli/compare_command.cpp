// copytask compare: every scheme of compare.schemes x every seed, one study.
#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"

namespace copytask {

CLI::App* compare_command_add(CLI::App& app, StudyCommandOptions& options) {
  CLI::App* command = app.add_subcommand("compare", "train every scheme of compare.schemes x every seed, one study");
  study_options_bind(*command, options);
  return command;
}

}  // namespace copytask
