// copytask train: one scheme (model.positional, model.causal), all its seeds.
#include "cli/commands.h"
#include "cli/options.h"

namespace copytask {

CLI::App* train_command_add(CLI::App& app, StudyCommandOptions& options) {
  return study_command_add(app, "train", "train one scheme (model.positional, model.causal), all its seeds", options);
}

}  // namespace copytask
