#pragma once
// Options shared by the study commands (train, compare): one plain struct, bound to CLI11
// options, resolved and validated before any work starts.
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace CLI {
class App;
}

namespace copytask {

// How every command that trains gets its config.
struct ConfigOptions {
  std::string config_file;              // --config FILE ("" = defaults only)
  std::vector<std::string> overrides;   // key=value ...
  bool print_config = false;            // --print-config: print the resolved config and exit
};

struct StudyCommandOptions {
  ConfigOptions config;
  std::string out_dir;                  // --out DIR ("" = runs/<time>-<command>-<name>)
  std::string shard;                    // --shard i/n ("" = the whole study)
};

struct BenchCommandOptions {
  ConfigOptions config;
  bool compare = false;     // time the first batch of `compare`, not `train`'s members
  int64_t warmup = 3;
  int64_t steps = 20;
  std::string json_file;
  std::string profile_file;  // --profile FILE: a GPU profile of kProfileSteps more steps
};

struct EvalCommandOptions {
  std::string run_dir;                  // --run DIR: a study folder
  std::vector<std::string> overrides;   // task.* (other data) and train.device/threads
  std::string json_file;                // --json FILE: also write the numbers there
};

struct PredictCommandOptions {
  std::string run_dir;                  // --run DIR: a study folder
  std::string member;                   // --member NAME ("" = the study's first complete member)
  std::string input;                    // content tokens, e.g. "7 1 8 2"
};

struct ReportCommandOptions {
  std::string study_dir;                // the study folder
  std::string out_file;                 // --out FILE ("" = DIR/report.html)
};

struct KeysCommandOptions {};          // copytask keys: no options

struct SchemesCommandOptions {
  bool json = false;                    // --json: the registry as JSON, not Markdown tables
};

// Exit codes: 0 ok, 1 a failure while running, 2 bad input (before any work), 130 interrupted.
// cli/command_errors.h turns what a command throws into them.
constexpr int kExitOk = 0, kExitFailure = 1, kExitBadInput = 2, kExitInterrupted = 130;

// Bad input in a command-line option or argument (--out, --run, --member, --shard, --json,
// predict's input), not in a config key: its message starts with the option or names the
// argument, and command_run prints it without config errors' "config error:". A
// ConfigError, so whatever treats a ConfigError as bad input treats it so too.
class OptionError : public ConfigError {
 public:
  using ConfigError::ConfigError;
};

// Binds --config, --print-config and the key=value overrides to `options`.
void config_options_bind(CLI::App& command, ConfigOptions& options);

// Resolves the config (throws ConfigError). Under --print-config, prints it as JSON and
// returns false: the command is done.
bool config_options_resolve(const ConfigOptions& options, Config& config);

// Adds a study subcommand (train, compare) with its options bound to `options`.
CLI::App* study_command_add(CLI::App& app, const std::string& name, const std::string& description,
                            StudyCommandOptions& options);

// Resolves the config, checks the device and output folder, prints the resolved config,
// runs the study and prints the comparison table. `command` is "train" or "compare".
int study_command_run(const std::string& command, const StudyCommandOptions& options, const std::string& command_line);

// An output file's option (--json FILE, --profile FILE): its folder must exist, checked before
// any work so that a long run never ends unable to write what it measured (throws OptionError).
void output_file_check(const std::string& option, const std::string& path);

// The library's errors about a folder or a name start with it ("runs/x holds another
// study ..."); the command line says which option gave it: "--out runs/x holds ...".
OptionError option_error(const std::string& option, const ConfigError& error);

// An error's message for the terminal: LibTorch's errors without their C++ stack trace
// (a user needs the sentence, not the frames).
std::string error_text(const std::exception& error);

}  // namespace copytask
