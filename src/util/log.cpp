// spdlog is compiled here only, away from LibTorch's headers (util/text_format.h says why).
#include "util/log.h"

#include <spdlog/spdlog.h>

namespace copytask {

void log_line(LogLevel level, std::string_view pattern, std::initializer_list<FormatArg> args) {
  const std::string message = text_format(pattern, args);
  if (level == LogLevel::kWarning)
    spdlog::warn("{}", message);
  else
    spdlog::info("{}", message);
}

void log_setup() { spdlog::set_pattern("[%H:%M:%S] [%^%l%$] %v"); }

}  // namespace copytask
