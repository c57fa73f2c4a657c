// copytask train and copytask compare: one study each (study/study.h). train trains one
// scheme (model.positional, model.causal) with every seed; compare every scheme of
// compare.schemes (x compare.grid) with every seed. Both resolve the config, check the
// device, the output folder and the memory before any work, print the resolved config,
// run the study with a progress line, and print the comparison table.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>

#include <CLI/CLI.hpp>
#include "util/log.h"

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/progress_line.h"
#include "compat/torch_compat.h"
#include "config/config.h"
#include "report/results.h"
#include "study/study.h"
#include "study/study_checks.h"

namespace copytask {
namespace fs = std::filesystem;

CLI::App* study_command_add(CLI::App& app, const std::string& name, const std::string& description,
                            StudyCommandOptions& options) {
  CLI::App& command = *app.add_subcommand(name, description);
  config_options_bind(command, options.config);
  command.add_option("--out", options.out_dir,
                     "output folder (default: runs/<time>-<command>-<name>); a folder holding the same study "
                     "is resumed: complete members are kept, the others trained");
  command.add_option("--shard", options.shard,
                     "i/n: train only the i-th of n deterministic shares of the members into --out "
                     "(shards may run on different machines; `copytask report DIR` collects them)");
  return &command;
}

namespace {

// --shard i/n (1 <= i <= n); throws OptionError saying how to write it.
Shard shard_parse(const std::string& text) {
  const std::string how = "--shard " + text + ": write i/n with 1 <= i <= n, e.g. --shard 2/3 for the second of three shards";
  const size_t slash = text.find('/');
  if (slash == std::string::npos) throw OptionError(how);
  Shard shard;
  try {
    size_t used = 0;
    shard.index = std::stoll(text.substr(0, slash), &used);
    if (used != slash) throw OptionError(how);
    const std::string count = text.substr(slash + 1);
    shard.count = std::stoll(count, &used);
    if (used != count.size()) throw OptionError(how);
  } catch (const std::logic_error&) {
    throw OptionError(how);
  }
  if (shard.count < 1 || shard.index < 1 || shard.index > shard.count) throw OptionError(how);
  return shard;
}

std::string default_out_dir(const std::string& command, const std::string& name) {
  std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", &local);
  std::string base = "runs/" + std::string(stamp) + "-" + command + "-" + name;
  std::string candidate = base;
  for (int i = 2; fs::exists(candidate); ++i) candidate = base + "-" + std::to_string(i);
  return candidate;
}

void print_config_table(const Config& config) {
  const auto rows = config_flatten(config);
  size_t key_width = 3, value_width = 5;
  for (const auto& [key, value] : rows) {
    key_width = std::max(key_width, key.size());
    value_width = std::max(value_width, value.size());
  }
  const std::string rule = "+" + std::string(key_width + 2, '-') + "+" + std::string(value_width + 2, '-') + "+\n";
  std::printf("%s| %-*s | %-*s |\n%s", rule.c_str(), static_cast<int>(key_width), "key", static_cast<int>(value_width),
              "value", rule.c_str());
  for (const auto& [key, value] : rows)
    std::printf("| %-*s | %-*s |\n", static_cast<int>(key_width), key.c_str(), static_cast<int>(value_width), value.c_str());
  std::printf("%s", rule.c_str());
  std::fflush(stdout);
}

}  // namespace

int study_command_run(const std::string& command, const StudyCommandOptions& options, const std::string& command_line) {
  // Bad input first, before any work: the config, the device, --shard, each scheme's
  // training step, the memory, the output folder.
  Config config;
  if (!config_options_resolve(options.config, config)) return kExitOk;
  const std::vector<StudyArm> schemes =
      command == "compare" ? study_arms_for_compare(config) : study_arms_for_train(config);
  StudyOptions study;
  study.device = device_resolve(config.train.device);
  const std::string name = command == "compare"
                               ? (options.config.config_file.empty() ? "defaults"
                                                                     : fs::path(options.config.config_file).stem().string())
                               : schemes.front().name;
  if (!options.shard.empty()) {
    study.shard = shard_parse(options.shard);
    if (options.out_dir.empty())
      throw OptionError("--shard needs --out DIR: every shard must write into the same study folder");
  }
  study_check_training_steps(schemes, study.device);
  study_check_memory(schemes, study.shard, study.device);
  study.command = command;
  study.out_dir = options.out_dir.empty() ? default_out_dir(command, name) : options.out_dir;
  try {
    study_check_out_dir(study.out_dir, study_manifest(command, config, schemes));
  } catch (const ConfigError& error) {
    throw option_error("--out", error);  // the library names the folder; say which option gave it
  }

  study.threads = threads_configure(config.train.threads);
  study.command_line = command_line;
  study.progress = study_progress_printer(isatty(fileno(stderr)));
  print_config_table(config);
  log_info("{}: {} scheme(s) x seeds, device {}, {} thread(s), output {}", command, schemes.size(),
               study.device.str(), study.threads, study.out_dir);
  // run.json records a failure or an interruption before study_run rethrows it.
  nlohmann::json results = study_run(config, schemes, study);
  std::vector<std::string> order;
  for (const auto& scheme : schemes) order.push_back(scheme.name);
  const auto& complete = results["complete"];
  if (complete["runs"] != complete["expected"])
    std::printf("\n%lld of %lld members complete; missing: %s\n", complete["runs"].get<long long>(),
                complete["expected"].get<long long>(), complete["missing"].dump().c_str());
  std::printf("\n%s", table_format(results_table(results, order)).c_str());
  const std::string lengths = length_table_format(results, order);
  if (!lengths.empty()) std::printf("\n%s", lengths.c_str());
  std::printf("\noutput folder: %s\n", study.out_dir.c_str());
  return kExitOk;
}

CLI::App* train_command_add(CLI::App& app, StudyCommandOptions& options) {
  return study_command_add(app, "train", "train one scheme (model.positional, model.causal), all its seeds", options);
}

CLI::App* compare_command_add(CLI::App& app, StudyCommandOptions& options) {
  return study_command_add(app, "compare", "train every scheme of compare.schemes x every seed, one study", options);
}

}  // namespace copytask
