// copytask compare: every scheme of compare.schemes x every seed, one study.
#include "cli/commands.h"
#include "cli/options.h"

namespace copytask {

CLI::App* compare_command_add(CLI::App& app, StudyCommandOptions& options) {
  return study_command_add(app, "compare", "train every scheme of compare.schemes x every seed, one study", options);
}

}  // namespace copytask
