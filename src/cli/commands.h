#pragma once
// The subcommands: each adds itself to the app and binds its options struct; the table of
// them is cli/command_table.h.
namespace CLI {
class App;
}

namespace copytask {
struct StudyCommandOptions;
struct BenchCommandOptions;
struct EvalCommandOptions;
struct PredictCommandOptions;
struct ReportCommandOptions;
struct KeysCommandOptions;
struct SchemesCommandOptions;

CLI::App* train_command_add(CLI::App& app, StudyCommandOptions& options);
CLI::App* compare_command_add(CLI::App& app, StudyCommandOptions& options);
CLI::App* bench_command_add(CLI::App& app, BenchCommandOptions& options);
int bench_command_run(const BenchCommandOptions& options);
CLI::App* eval_command_add(CLI::App& app, EvalCommandOptions& options);
int eval_command_run(const EvalCommandOptions& options);
CLI::App* predict_command_add(CLI::App& app, PredictCommandOptions& options);
int predict_command_run(const PredictCommandOptions& options);
CLI::App* report_command_add(CLI::App& app, ReportCommandOptions& options);
int report_command_run(const ReportCommandOptions& options);
CLI::App* keys_command_add(CLI::App& app, KeysCommandOptions& options);
int keys_command_run(const KeysCommandOptions& options);
CLI::App* schemes_command_add(CLI::App& app, SchemesCommandOptions& options);
int schemes_command_run(const SchemesCommandOptions& options);

}  // namespace copytask
