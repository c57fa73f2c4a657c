#pragma once
// The one place that turns what a command throws into the message the user sees and the
// exit code (README, "Exit codes"). The program's dispatch (cli/program.cpp) runs every
// command's body through command_run; the commands themselves only throw. A command that
// must clean up when it fails does so before rethrowing (the study records run.json's status
// "failed" or "interrupted": study/study.cpp); this maps only what reaches it.
#include <functional>
#include <string>

namespace copytask {

// Runs `body` and returns its exit code, or the code of what it threw, after one line on
// stderr that starts with "copytask <command>: ":
//   OptionError (cli/options.h): an option or argument     <what>                 exit 2
//   ConfigError: a config key or value, the study's size   config error: <what>   exit 2
//   CheckpointError: a model.pt that cannot be loaded      <what>                 exit 2
//   Interrupted: Ctrl-C (the study says what it kept)      <what>                 exit 130
//   anything else: a failure while running                 <what>                 exit 1
// (LibTorch's errors without their C++ stack trace: error_text, cli/options.h.)
int command_run(const std::string& command, const std::function<int()>& body);

}  // namespace copytask
