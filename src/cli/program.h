#pragma once
// The program as a function of its command line: copytask's main.

namespace copytask {

// Runs the command argv names and returns the process's exit status (cli/command_errors.h's
// kExit* codes).
int program_main(int argc, char** argv);

}  // namespace copytask
