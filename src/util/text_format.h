#pragma once
// "{}"-style formatting for the code that includes LibTorch. fmt is not included here: a
// PyTorch wheel's LibTorch brings fmt 12 in its headers, Debian's spdlog is built on fmt 9,
// and a translation unit that saw both would compile one library's code against the
// other's fmt. So the formatting itself is compiled in text_format.cpp, which sees fmt
// and spdlog but never LibTorch; here the values travel as FormatArg.
//
//   text_format("{} of {} ({:.1f}%)", {done, total, 100.0 * done / total})
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

namespace copytask {

// One value to format: an integer, a floating-point number, a truth value or a string
// (held by reference: a FormatArg lives only as long as the call it is passed to).
class FormatArg {
 public:
  enum class Kind { kSigned, kUnsigned, kFloating, kBool, kString };

  template <typename T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  FormatArg(T value)  // NOLINT(google-explicit-constructor): formatting takes values as they are
      : kind_(std::is_signed_v<T> ? Kind::kSigned : Kind::kUnsigned),
        signed_(static_cast<int64_t>(value)),
        unsigned_(static_cast<uint64_t>(value)) {}
  FormatArg(double value) : kind_(Kind::kFloating), floating_(value) {}  // NOLINT
  FormatArg(float value) : kind_(Kind::kFloating), floating_(value) {}   // NOLINT
  FormatArg(bool value) : kind_(Kind::kBool), bool_(value) {}            // NOLINT
  FormatArg(const char* value) : kind_(Kind::kString), string_(value) {}  // NOLINT
  FormatArg(const std::string& value) : kind_(Kind::kString), string_(value) {}  // NOLINT
  FormatArg(std::string_view value) : kind_(Kind::kString), string_(value) {}    // NOLINT

  Kind kind() const { return kind_; }
  int64_t signed_value() const { return signed_; }
  uint64_t unsigned_value() const { return unsigned_; }
  double floating_value() const { return floating_; }
  bool bool_value() const { return bool_; }
  std::string_view string_value() const { return string_; }

 private:
  Kind kind_;
  int64_t signed_ = 0;
  uint64_t unsigned_ = 0;
  double floating_ = 0;
  bool bool_ = false;
  std::string_view string_;
};

// `pattern` with fmt's replacement fields ("{}", "{:.4f}", "{:>3}") filled from `args`.
// A pattern that does not fit its arguments throws std::invalid_argument naming it.
std::string text_format(std::string_view pattern, std::initializer_list<FormatArg> args);

template <typename... Args>
std::string text_format(std::string_view pattern, const Args&... args) {
  return text_format(pattern, {FormatArg(args)...});
}

}  // namespace copytask
