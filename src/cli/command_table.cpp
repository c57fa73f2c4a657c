#include "cli/command_table.h"

#include <memory>

#include "cli/commands.h"
#include "cli/options.h"

namespace copytask {

namespace {
// A command whose options struct both functions share: add binds CLI11 to it, run reads it.
template <typename Options, typename Add, typename Run>
Command command_make(std::string name, Add add, Run run) {
  auto options = std::make_shared<Options>();
  return {std::move(name), [options, add](CLI::App& app) { return add(app, *options); },
          [options, run] { return run(*options); }};
}
}  // namespace

std::vector<Command> command_table(const std::string& command_line) {
  return {
      command_make<StudyCommandOptions>("train", train_command_add,
                                        [command_line](const StudyCommandOptions& options) {
                                          return study_command_run("train", options, command_line);
                                        }),
      command_make<StudyCommandOptions>("compare", compare_command_add,
                                        [command_line](const StudyCommandOptions& options) {
                                          return study_command_run("compare", options, command_line);
                                        }),
      command_make<EvalCommandOptions>("eval", eval_command_add, eval_command_run),
      command_make<PredictCommandOptions>("predict", predict_command_add, predict_command_run),
      command_make<ReportCommandOptions>("report", report_command_add, report_command_run),
      command_make<BenchCommandOptions>("bench", bench_command_add, bench_command_run),
      command_make<KeysCommandOptions>("keys", keys_command_add, keys_command_run),
      command_make<SchemesCommandOptions>("schemes", schemes_command_add, schemes_command_run),
  };
}

std::string command_names(const std::vector<Command>& commands) {
  std::string names;
  for (const auto& command : commands) names += (names.empty() ? "" : ", ") + command.name;
  return names;
}

}  // namespace copytask
