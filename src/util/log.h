#pragma once
// The log lines copytask writes to stderr ("[12:03:04] [info] batch 1/3: ..."), through
// spdlog, compiled in log.cpp away from LibTorch's headers (util/text_format.h says why).
//
//   log_info("batch {}/{}: {} members", index + 1, count, members);
#include <initializer_list>
#include <string_view>

#include "util/text_format.h"

namespace copytask {

enum class LogLevel { kInfo, kWarning };

// One line at `level`: `pattern` filled as text_format() fills it.
void log_line(LogLevel level, std::string_view pattern, std::initializer_list<FormatArg> args);

template <typename... Args>
void log_info(std::string_view pattern, const Args&... args) {
  log_line(LogLevel::kInfo, pattern, {FormatArg(args)...});
}
template <typename... Args>
void log_warn(std::string_view pattern, const Args&... args) {
  log_line(LogLevel::kWarning, pattern, {FormatArg(args)...});
}

// The one pattern of every line: the time, the level, the message. Called once, by main.
void log_setup();

}  // namespace copytask
