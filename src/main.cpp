// copytask: how do positional encodings compare on the copy task? Logging setup and
// dispatch to the subcommands; the work is in the library (src/*/).
#include <csignal>
#include <cstdio>
#include <string>

#include <CLI/CLI.hpp>
#include "util/log.h"

#include "cli/command_errors.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "config/config_fields.h"
#include "model/cpu_variant.h"
#include "model/positional.h"
#include "train/interrupt.h"
#include "version.h"

namespace {
void on_signal(int) { copytask::stop_request(); }
}  // namespace

int main(int argc, char** argv) {
  copytask::log_setup();
  copytask::positional_rules_install();  // config checks name the registry's schemes
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);

  std::string command_line;
  for (int i = 0; i < argc; ++i) command_line += (i ? " " : "") + std::string(argv[i]);

  CLI::App app{"copytask: positional-encoding schemes compared on the copy task"};
  app.set_version_flag("--version", std::string(copytask::version_string()) + " (" + copytask::git_commit() + ")");
  app.require_subcommand(1);
  copytask::StudyCommandOptions train_options, compare_options;
  copytask::BenchCommandOptions bench_options;
  copytask::EvalCommandOptions eval_options;
  copytask::PredictCommandOptions predict_options;
  copytask::ReportCommandOptions report_options;
  CLI::App* train = copytask::train_command_add(app, train_options);
  CLI::App* compare = copytask::compare_command_add(app, compare_options);
  CLI::App* eval = copytask::eval_command_add(app, eval_options);
  CLI::App* predict = copytask::predict_command_add(app, predict_options);
  CLI::App* report = copytask::report_command_add(app, report_options);
  CLI::App* bench = copytask::bench_command_add(app, bench_options);
  CLI::App* keys = app.add_subcommand("keys", "every config key with its default and meaning, as a Markdown table");

  // CLI11 reports a mistyped command only as "a subcommand is required": say which.
  const std::string first = argc > 1 ? argv[1] : "";
  const bool known = !app.get_subcommands([&](const CLI::App* sub) { return sub->check_name(first); }).empty();
  if (!first.empty() && first[0] != '-' && !known) {
    std::fprintf(stderr, "copytask: unknown command '%s'; commands: train, compare, eval, predict, report, bench, keys (see --help)\n", argv[1]);
    return copytask::kExitBadInput;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    const int code = app.exit(error);  // prints help, or the parse error with a hint
    return code == 0 ? copytask::kExitOk : copytask::kExitBadInput;
  }
  // A forced CPU kernel variant this CPU cannot run, or a misspelt one, stops here.
  if (const std::string message = copytask::cpu_variant_from_environment(); !message.empty()) {
    std::fprintf(stderr, "copytask: %s\n", message.c_str());
    return copytask::kExitBadInput;
  }
  // Each command runs inside command_run, which turns what it throws into the message and
  // the exit code (cli/command_errors.h).
  using copytask::command_run;
  if (train->parsed())
    return command_run("train", [&] { return copytask::study_command_run("train", train_options, command_line); });
  if (compare->parsed())
    return command_run("compare", [&] { return copytask::study_command_run("compare", compare_options, command_line); });
  if (eval->parsed()) return command_run("eval", [&] { return copytask::eval_command_run(eval_options); });
  if (predict->parsed()) return command_run("predict", [&] { return copytask::predict_command_run(predict_options); });
  if (report->parsed()) return command_run("report", [&] { return copytask::report_command_run(report_options); });
  if (bench->parsed()) return command_run("bench", [&] { return copytask::bench_command_run(bench_options); });
  if (keys->parsed())
    return command_run("keys", [] {
      std::printf("%s", copytask::config_keys_markdown().c_str());
      return copytask::kExitOk;
    });
  return copytask::kExitBadInput;
}
