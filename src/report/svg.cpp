#include "report/svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>

namespace copytask::html {

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string fixed(double value, int decimals) {
  if (std::isnan(value)) return "n/a";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*f", decimals, value);
  // "-0.000" reads as a sign that is not there.
  std::string out = buffer;
  if (out[0] == '-' && out.find_first_not_of("-0.") == std::string::npos) out.erase(0, 1);
  return out;
}

std::string compact(double value) {
  if (!std::isfinite(value)) return fixed(value, 0);
  if (std::abs(value) < 1e-12) return "0";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", value);
  return buffer;
}

std::string attr(std::string_view name, std::string_view value) {
  std::string out = " ";
  out += name;
  out += "=\"";
  out += escape(value);
  out += '"';
  return out;
}

std::string attr(std::string_view name, double value) {
  // Coordinates: two decimals are below a pixel's worth and keep the page small.
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.2f", value);
  std::string number = buffer;
  while (number.back() == '0') number.pop_back();
  if (number.back() == '.') number.pop_back();
  if (number == "-0") number = "0";
  return attr(name, std::string_view(number));
}

std::string element(std::string_view name, const std::string& attrs, const std::string& content) {
  std::string out = "<";
  out += name;
  out += attrs;
  out += '>';
  out += content;
  out += "</";
  out += name;
  out += '>';
  return out;
}

std::string text_element(std::string_view name, const std::string& attrs, std::string_view text) {
  return element(name, attrs, escape(text));
}

std::string empty_element(std::string_view name, const std::string& attrs) {
  std::string out = "<";
  out += name;
  out += attrs;
  out += "/>";
  return out;
}

std::string tooltip(std::string_view text) { return text_element("title", "", text); }

std::string hex(Rgb colour) {
  char buffer[8];
  std::snprintf(buffer, sizeof buffer, "#%02x%02x%02x", colour.r, colour.g, colour.b);
  return buffer;
}

namespace {
// Piecewise-linear interpolation between evenly spaced colour stops, t in [0, 1].
template <size_t N>
Rgb interpolate(const std::array<Rgb, N>& stops, double t) {
  if (!std::isfinite(t)) t = 0;
  t = std::clamp(t, 0.0, 1.0) * static_cast<double>(N - 1);
  const size_t i = std::min(static_cast<size_t>(t), N - 2);
  const double f = t - static_cast<double>(i);
  auto mix = [f](uint8_t a, uint8_t b) {
    return static_cast<uint8_t>(std::lround(a + (static_cast<double>(b) - a) * f));
  };
  return {mix(stops[i].r, stops[i + 1].r), mix(stops[i].g, stops[i + 1].g), mix(stops[i].b, stops[i + 1].b)};
}
}  // namespace

Rgb viridis(double t) {
  // matplotlib's viridis sampled at nine evenly spaced points.
  static const std::array<Rgb, 9> stops = {{{0x44, 0x01, 0x54}, {0x47, 0x2c, 0x7a}, {0x3b, 0x52, 0x8b},
                                            {0x2c, 0x72, 0x8e}, {0x21, 0x91, 0x8c}, {0x28, 0xae, 0x80},
                                            {0x5e, 0xc9, 0x62}, {0xad, 0xdc, 0x30}, {0xfd, 0xe7, 0x25}}};
  return interpolate(stops, t);
}

Rgb diverging(double t) {
  // ColorBrewer's RdBu (7 classes), blue for negative values.
  static const std::array<Rgb, 7> stops = {{{0x21, 0x66, 0xac}, {0x67, 0xa9, 0xcf}, {0xd1, 0xe5, 0xf0},
                                            {0xf7, 0xf7, 0xf7}, {0xfd, 0xdb, 0xc7}, {0xef, 0x8a, 0x62},
                                            {0xb2, 0x18, 0x2b}}};
  return interpolate(stops, (t + 1.0) / 2.0);
}

std::string scheme_colour(size_t index) {
  // Tableau 10, its yellow darkened to stay visible as a thin line on white.
  static const std::array<const char*, 10> palette = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
                                                      "#b6992d", "#b07aa1", "#ff9da7", "#9c755f", "#79706e"};
  if (index < palette.size()) return palette[index];
  // Beyond ten schemes: hues a golden angle apart, so neighbours still differ.
  const double hue = std::fmod(static_cast<double>(index) * 137.508, 360.0);
  char buffer[40];
  std::snprintf(buffer, sizeof buffer, "hsl(%.0f,55%%,45%%)", hue);
  return buffer;
}

double LinearScale::operator()(double value) const {
  if (d1 == d0) return (r0 + r1) / 2.0;
  return r0 + (value - d0) / (d1 - d0) * (r1 - r0);
}

namespace {
double nice_step(double lo, double hi, int target) {
  const double span = hi - lo;
  if (!(span > 0) || !std::isfinite(span)) return 1.0;
  const double raw = span / std::max(1, target);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double residual = raw / magnitude;
  const double factor = residual < 1.5 ? 1 : residual < 3 ? 2 : residual < 7 ? 5 : 10;
  return factor * magnitude;
}
}  // namespace

std::vector<double> nice_ticks(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) return {lo};
  const double step = nice_step(lo, hi, target);
  std::vector<double> ticks;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1) {
    const double tick = k * step;
    ticks.push_back(std::abs(tick) < step * 1e-9 ? 0.0 : tick);
  }
  return ticks;
}

std::pair<double, double> nice_domain(double lo, double hi, int target) {
  if (!std::isfinite(lo) || !std::isfinite(hi)) return {0.0, 1.0};
  if (hi < lo) std::swap(lo, hi);
  if (hi == lo) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double step = nice_step(lo, hi, target);
  return {std::floor(lo / step + 1e-9) * step, std::ceil(hi / step - 1e-9) * step};
}

namespace {
size_t code_points(std::string_view text) {
  size_t count = 0;
  for (const char c : text)
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++count;
  return count;
}
}  // namespace

double text_width(std::string_view text, double font_px) {
  return static_cast<double>(code_points(text)) * font_px * 0.62;
}

std::string truncate(std::string_view text, size_t max_chars) {
  if (code_points(text) <= max_chars || max_chars == 0) return std::string(text);
  size_t count = 0, end = 0;
  for (; end < text.size(); ++end) {
    if ((static_cast<unsigned char>(text[end]) & 0xC0) != 0x80) {
      if (count == max_chars - 1) break;
      ++count;
    }
  }
  return std::string(text.substr(0, end)) + "\u2026";
}

}  // namespace copytask::html
