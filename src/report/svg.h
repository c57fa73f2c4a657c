#pragma once
// Small building blocks for the HTML report: escaping, number formatting, colour scales,
// linear scales with "nice" ticks, and SVG/HTML elements as strings. The report is one
// self-contained file (inline SVG, no scripts, no external resources), so everything it
// draws goes through these helpers; every piece of text passes through html_escape.
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace copytask::html {

// Escapes & < > " ' so any text (scheme names come from user configs) is safe both as
// element content and inside a double-quoted attribute, in HTML and in inline SVG.
std::string escape(std::string_view text);

// Fixed-point with `decimals` digits ("0.9950"); "n/a" for NaN, "inf"/"-inf" for infinities.
std::string fixed(double value, int decimals);
// Compact number for axis ticks and coordinates: no trailing zeros ("0.25", "1200", "-3").
std::string compact(double value);

// ---- Attributes and elements --------------------------------------------------------------
// One attribute, value escaped: ` name="value"`.
std::string attr(std::string_view name, std::string_view value);
std::string attr(std::string_view name, double value);
// <name attrs>content</name>; `content` is inserted as is (already built markup).
std::string element(std::string_view name, const std::string& attrs, const std::string& content);
// <name attrs>escaped text</name>
std::string text_element(std::string_view name, const std::string& attrs, std::string_view text);
// <name attrs/>: SVG shapes, which never have content here.
std::string empty_element(std::string_view name, const std::string& attrs);
// <title>text</title>: what a browser shows on hover over its parent SVG element.
std::string tooltip(std::string_view text);

// ---- Colours -------------------------------------------------------------------------------
struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
};
std::string hex(Rgb colour);  // "#rrggbb"
// A perceptually uniform sequential scale (viridis): t in [0, 1], dark purple -> yellow.
Rgb viridis(double t);
// A diverging scale: t in [-1, 1], blue (negative) -> near-white (0) -> red (positive).
Rgb diverging(double t);
// The colour of the index-th scheme: the same scheme has the same colour in every chart.
std::string scheme_colour(size_t index);

// ---- Scales --------------------------------------------------------------------------------
// Maps the domain [d0, d1] linearly onto the range [r0, r1] (a degenerate domain maps to
// the middle of the range).
struct LinearScale {
  double d0 = 0, d1 = 1, r0 = 0, r1 = 1;
  double operator()(double value) const;
};
// About `target` round tick values (1, 2 or 5 times a power of ten) covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int target);
// [lo, hi] widened outwards to the nearest tick step, so an axis ends on a tick.
std::pair<double, double> nice_domain(double lo, double hi, int target);

// Width in pixels that `text` needs at `font_px` in a sans-serif font: a deliberately
// generous estimate used to lay out labels without a browser to measure them.
double text_width(std::string_view text, double font_px);
// `text` cut to at most `max_chars` characters (UTF-8 aware), with an ellipsis when cut.
std::string truncate(std::string_view text, size_t max_chars);

}  // namespace copytask::html
