// copytask report --run DIR [--out FILE] (or report DIR): collects a study's complete
// members (from any number of shards) into its results.json, attention.json,
// positional.json and metrics.jsonl, then writes the HTML report (DIR/report.html by
// default).
#include <cstdio>
#include <filesystem>

#include <CLI/CLI.hpp>

#include "cli/commands.h"
#include "cli/options.h"
#include "config/config.h"
#include "report/html_report.h"
#include "report/results.h"
#include "study/collect.h"

namespace copytask {
namespace fs = std::filesystem;

CLI::App* report_command_add(CLI::App& app, ReportCommandOptions& options) {
  CLI::App& command = *app.add_subcommand("report", "collect a study's members (and shards) and write its HTML report");
  // --run DIR as eval and predict take the folder; the bare DIR of earlier versions still works.
  auto* run = command.add_option("--run", options.study_dir, "the study folder");
  command.add_option("dir", options.study_dir, "the study folder (the same as --run DIR)")->excludes(run);
  command.add_option("--out", options.out_file, "the HTML file (default: DIR/report.html)");
  return &command;
}

int report_command_run(const ReportCommandOptions& options) {
  if (options.study_dir.empty()) throw OptionError("which study? give its folder: copytask report --run DIR");
  const std::string out_file =
      options.out_file.empty() ? (fs::path(options.study_dir) / "report.html").string() : options.out_file;
  if (!fs::is_directory(options.study_dir))
    throw OptionError("--run " + options.study_dir + ": no such folder; give a study's output folder");
  const fs::path parent = fs::absolute(out_file).parent_path();
  if (!fs::is_directory(parent))
    throw OptionError("--out " + out_file + ": the folder " + parent.string() + " does not exist");
  nlohmann::json results;
  try {
    results = study_collect(options.study_dir);
  } catch (const ConfigError& error) {
    throw option_error("--run", error);  // not a study folder: the library names it; say which option gave it
  }
  // study_collect wrote DIR/report.html; another --out gets its own copy.
  if (!options.out_file.empty()) report_html_write(options.study_dir, out_file);
  std::vector<std::string> order;
  for (const auto& name : results["scheme_order"]) order.push_back(name.get<std::string>());
  std::printf("%s", table_format(results_table(results, order)).c_str());
  const auto& complete = results["complete"];
  std::printf("\n%lld of %lld members complete%s\n", complete["runs"].get<long long>(),
              complete["expected"].get<long long>(),
              complete["missing"].empty() ? "" : ("; missing: " + complete["missing"].dump()).c_str());
  std::printf("report: %s\n", out_file.c_str());
  return kExitOk;
}

}  // namespace copytask
