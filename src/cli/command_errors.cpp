#include "cli/command_errors.h"

#include <cstdio>
#include <exception>

#include "cli/options.h"
#include "config/config.h"
#include "train/checkpoint.h"
#include "train/interrupt.h"

namespace copytask {
namespace {

int say(const std::string& command, const std::string& message, int exit_code) {
  std::fprintf(stderr, "copytask %s: %s\n", command.c_str(), message.c_str());
  return exit_code;
}

}  // namespace

int command_run(const std::string& command, const std::function<int()>& body) {
  try {
    return body();
  } catch (const OptionError& error) {  // before ConfigError, which it is
    return say(command, error.what(), kExitBadInput);
  } catch (const ConfigError& error) {
    return say(command, std::string("config error: ") + error.what(), kExitBadInput);
  } catch (const CheckpointError& error) {
    return say(command, error.what(), kExitBadInput);
  } catch (const Interrupted& error) {
    return say(command, error.what(), kExitInterrupted);
  } catch (const std::exception& error) {
    return say(command, error_text(error), kExitFailure);
  }
}

}  // namespace copytask
