#pragma once
// Running the copytask binary from a test, as a user would: its exit code and output, and
// the files it leaves.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "test_paths.h"

namespace copytask::test {
namespace fs = std::filesystem;

struct Outcome {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs the shell command that `command_for(log)` makes, which sends copytask's output to `log`:
// its exit code and that output (the log removed after).
template <class CommandFor>
Outcome run_logged(const CommandFor& command_for) {
  const fs::path log = fs::temp_directory_path() / ("copytask_cli_" + std::to_string(::getpid()) + ".log");
  const std::string command = command_for(log.string());
  const int status = std::system(command.c_str());
  Outcome outcome;
  outcome.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream file(log);
  outcome.output.assign(std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>());
  fs::remove(log);
  return outcome;
}

// Runs the copytask binary with `arguments`, behind `prefix` (e.g. a timeout command).
inline Outcome run(const std::string& arguments, const std::string& prefix = "") {
  return run_logged([&](const std::string& log) {
    return prefix + copytask_binary() + " " + arguments + " > " + log + " 2>&1";
  });
}

// Runs the copytask binary with `arguments` and sends it Ctrl-C (SIGINT) once its output
// has shown `line` (or after two minutes without it, or at once if it ended): an interrupt
// at a known point of the work, whatever the machine's speed (a GPU machine's first
// LibTorch load alone can take seconds).
inline Outcome run_interrupted_after(const std::string& arguments, const std::string& line) {
  return run_logged([&](const std::string& log) {
    return copytask_binary() + " " + arguments + " > " + log + " 2>&1 & pid=$!; i=0; " + "until grep -qF '" + line +
           "' " + log + " || [ $i -ge 1200 ]; do " + "kill -0 $pid 2>/dev/null || break; sleep 0.1; i=$((i + 1)); done; " +
           "kill -INT $pid 2>/dev/null; wait $pid";
  });
}

inline fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("copytask_cli_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  return dir;
}

inline nlohmann::json read_json(const fs::path& path) {
  std::ifstream file(path);
  EXPECT_TRUE(file.good()) << path;
  return nlohmann::json::parse(file);
}

// Atomic writes leave no temporary file behind, whatever happened.
inline void expect_no_temporary_files(const fs::path& out) {
  for (const auto& entry : fs::recursive_directory_iterator(out))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << "leftover " << entry.path();
}

// A study small enough for a test: ~2 seconds on 2 cores.
inline const char* kTiny =
    "task.examples=400 model.embed=8 model.hidden=16 train.steps=30 train.batch_size=32 train.eval_every=10 "
    "train.lr=0.003 train.seeds=[0,1] train.device=cpu";

}  // namespace copytask::test
