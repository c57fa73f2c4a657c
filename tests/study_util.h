#pragma once
// A tiny study trained in this process through study_run (the CLI tests' tiny config, 30
// steps of 2 seeds), with the given compare.schemes: what the tests of the study's own code
// paths train, where the binary's output is not what they check.
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <torch/torch.h>

#include "cli_util.h"
#include "config/config.h"
#include "study/study.h"

namespace copytask::test {

// A compare study of `base` trained into `out` on the CPU, in this process.
inline void compare_study_train(const Config& base, const std::filesystem::path& out) {
  StudyOptions options;
  options.command = "compare";
  options.out_dir = out.string();
  options.device = torch::kCPU;
  options.threads = torch::get_num_threads();
  study_run(base, study_arms_for_compare(base), options);
}

inline void tiny_study_train(const std::string& schemes_json, const std::filesystem::path& out) {
  std::vector<std::string> overrides;
  std::istringstream tiny(kTiny);
  for (std::string item; tiny >> item;) overrides.push_back(item);
  overrides.push_back("compare.schemes=" + schemes_json);
  compare_study_train(config_resolve(std::nullopt, overrides), out);
}

}  // namespace copytask::test
