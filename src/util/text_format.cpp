// The only translation units that see fmt (with log.cpp): compiled without LibTorch's
// headers, against the fmt that spdlog was built with (text_format.h says why).
#include "util/text_format.h"

#include <stdexcept>

#include <fmt/args.h>
#include <fmt/format.h>

namespace copytask {

std::string text_format(std::string_view pattern, std::initializer_list<FormatArg> args) {
  fmt::dynamic_format_arg_store<fmt::format_context> store;
  for (const FormatArg& arg : args) {
    switch (arg.kind()) {
      case FormatArg::Kind::kSigned: store.push_back(arg.signed_value()); break;
      case FormatArg::Kind::kUnsigned: store.push_back(arg.unsigned_value()); break;
      case FormatArg::Kind::kFloating: store.push_back(arg.floating_value()); break;
      case FormatArg::Kind::kBool: store.push_back(arg.bool_value()); break;
      case FormatArg::Kind::kString: store.push_back(arg.string_value()); break;
    }
  }
  try {
    return fmt::vformat(fmt::string_view(pattern.data(), pattern.size()), store);
  } catch (const fmt::format_error& error) {
    throw std::invalid_argument("text_format: the pattern \"" + std::string(pattern) + "\" does not fit its " +
                                std::to_string(args.size()) + " argument(s): " + error.what());
  }
}

}  // namespace copytask
