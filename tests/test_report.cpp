// The HTML report: a well-formed self-contained page with every chart, the numbers in hover
// titles (a map's hover naming the study file that holds its values), no table that copies a
// chart, user text escaped, the causal mask visible, and "not recorded" notes (not a failure)
// when optional study files are missing.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <tuple>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "records/results_csv.h"
#include "records/split_metrics.h"
#include "report/html_report.h"
#include "report/results.h"
#include "report/report_charts.h"
#include "report/svg.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;

// ---- A small tag-balance checker ---------------------------------------------------------------
// Every opened element is closed in order (void elements and `/>` excepted), every tag ends
// outside a quoted attribute value, and every '&' starts an entity. Returns "" when fine,
// else what is wrong and where.
// The fill of heatmap cell (row, column) in a chart: the colour of the path holding the
// cell's unit square; "" when no path holds it (a masked cell).
std::string cell_colour(const std::string& svg, size_t row, size_t column) {
  const std::string square = "M" + std::to_string(column) + " " + std::to_string(row) + "h1v1h-1z";
  static const std::regex path("<path fill=\"(#[0-9a-f]{6})\" d=\"([^\"]*)\"");
  for (std::sregex_iterator it(svg.begin(), svg.end(), path), end; it != end; ++it) {
    const std::string d = (*it)[2];
    for (size_t at = d.find(square); at != std::string::npos; at = d.find(square, at + 1))
      if (at == 0 || d[at - 1] == 'z') return (*it)[1];
  }
  return "";
}

// The masked (hatched) cells of a chart: one closed square each in the masked paths.
size_t masked_cells(const std::string& svg) {
  static const std::regex path("<path class=\"masked\"[^>]* d=\"([^\"]*)\"");
  size_t cells = 0;
  for (std::sregex_iterator it(svg.begin(), svg.end(), path), end; it != end; ++it) {
    const std::string d = (*it)[1];
    cells += static_cast<size_t>(std::count(d.begin(), d.end(), 'z'));
  }
  return cells;
}

std::string check_well_formed(const std::string& page) {
  static const std::set<std::string> void_elements = {"area", "base", "br",   "col",  "embed",  "hr",    "img",
                                                      "input", "link", "meta", "source", "track", "wbr"};
  std::vector<std::string> open;
  auto where = [&page](size_t at) { return " at offset " + std::to_string(at) + ": '" + page.substr(at, 60) + "'"; };
  auto check_entity = [&page, &where](size_t at) -> std::string {
    static const std::regex entity("^&([a-zA-Z]+|#[0-9]+|#x[0-9a-fA-F]+);");
    if (!std::regex_search(page.substr(at, 12), entity)) return "bare '&'" + where(at);
    return "";
  };
  size_t i = 0;
  while (i < page.size()) {
    if (page[i] == '&') {
      if (auto error = check_entity(i); !error.empty()) return error;
      ++i;
      continue;
    }
    if (page[i] == '>') return "bare '>' in text" + where(i);
    if (page[i] != '<') {
      ++i;
      continue;
    }
    if (page.compare(i, 4, "<!--") == 0) {
      const size_t end = page.find("-->", i);
      if (end == std::string::npos) return "unclosed comment" + where(i);
      i = end + 3;
      continue;
    }
    if (page.compare(i, 2, "<!") == 0) {  // <!DOCTYPE html>
      i = page.find('>', i) + 1;
      continue;
    }
    const bool closing = page.compare(i, 2, "</") == 0;
    size_t j = i + (closing ? 2 : 1);
    const size_t name_start = j;
    while (j < page.size() && (std::isalnum(static_cast<unsigned char>(page[j])) || page[j] == '-')) ++j;
    const std::string name = page.substr(name_start, j - name_start);
    if (name.empty()) return "'<' not starting a tag" + where(i);
    // Attributes: '>' ends the tag only outside quotes.
    char quote = 0;
    for (; j < page.size(); ++j) {
      if (quote) {
        if (page[j] == quote) quote = 0;
        else if (page[j] == '<') return "'<' inside an attribute value" + where(i);
        else if (page[j] == '&') {
          if (auto error = check_entity(j); !error.empty()) return error;
        }
      } else if (page[j] == '"' || page[j] == '\'') {
        quote = page[j];
      } else if (page[j] == '>') {
        break;
      }
    }
    if (j >= page.size()) return "tag never ends (unbalanced quotes?)" + where(i);
    const bool self_closing = page[j - 1] == '/';
    i = j + 1;
    if (closing) {
      if (open.empty()) return "</" + name + "> closes nothing" + where(name_start);
      if (open.back() != name) return "</" + name + "> closes <" + open.back() + ">" + where(name_start);
      open.pop_back();
    } else if (!self_closing && !void_elements.count(name)) {
      if (name == "style" || name == "script") {  // raw text up to its end tag
        const size_t end = page.find("</" + name + ">", i);
        if (end == std::string::npos) return "unclosed <" + name + ">";
        i = end + name.size() + 3;
        continue;
      }
      open.push_back(name);
    }
  }
  if (!open.empty()) return "unclosed <" + open.back() + "> (" + std::to_string(open.size()) + " open)";
  return "";
}

// ---- Fixture: a tiny study of three schemes, two seeds, context 4 ------------------------------
// Vocab 6: tokens 1..4 content, 5 = <copy>. The first scheme's name is hostile HTML.
const char* kHostile = "<b>&x";

json attention_maps(bool causal) {
  // [member][layer][head][T][T], rows summing to 1; causal rows only up to the diagonal.
  json members = json::array();
  for (int m = 0; m < 2; ++m) {
    json layers = json::array();
    for (int l = 0; l < 2; ++l) {
      json rows = json::array();
      for (int i = 0; i < 4; ++i) {
        json row = json::array();
        const int visible = causal ? i + 1 : 4;
        for (int j = 0; j < 4; ++j) row.push_back(j < visible ? 1.0 / visible : 0.0);
        rows.push_back(row);
      }
      layers.push_back(json::array({rows}));
    }
    members.push_back(layers);
  }
  return members;
}

json run_entry(int seed, double test_exact) {
  return {{"seed", seed},       {"test_exact", test_exact}, {"test_token", 0.9},    {"train_exact", 1.0},
          {"train_token", 1.0}, {"final_loss", 0.05},       {"test_loss", 0.07},    {"steps", 40},
          {"seconds", 1.5},     {"batch_members", 6},       {"test_exact_by_length", {{"1", 1.0}, {"2", test_exact}}}};
}

json summary(double a, double b) {
  return {{"n", 2}, {"mean", (a + b) / 2}, {"std", std::abs(a - b) / std::sqrt(2.0)}, {"min", std::min(a, b)},
          {"max", std::max(a, b)}, {"ci95", json::array({std::min(a, b) - 0.1, std::max(a, b) + 0.1})}};
}

ReportInputs fixture() {
  ReportInputs in;
  json results_file, positional_file;  // the files as written, then read through their records
  in.config = json::parse(R"({
    "task": {"vocab_size": 6, "context": 4, "min_len": 1, "max_len": 2, "examples": 40, "test_fraction": 0.25, "seed": 0},
    "model": {"positional": "sinusoidal", "causal": false, "embed": 8, "heads": 1, "blocks": 2, "hidden": 16, "dropout": 0.1},
    "train": {"steps": 40, "batch_size": 8, "lr": 0.003, "eval_every": 20, "seeds": [0, 1], "device": "cpu", "threads": 1},
    "report": {"probes": ["1 2"]}})");
  in.config["compare"]["schemes"] = json::array(
      {{{"name", kHostile}, {"model.positional", "alibi"}, {"model.causal", true}},
       {{"name", "rope"}, {"model.positional", "rope"}},
       {{"name", "learned"}, {"model.positional", "learned"}}});
  in.run = json({{"version", "0.1.0"}, {"git_commit", "abc123"}, {"libtorch", "1.13.0"}, {"device", "cpu"},
                 {"threads", 1}, {"command", "copytask compare --out /tmp/x"}, {"started", "2026-11-21T05:26:12Z"},
                 {"ended", "2026-11-21T05:27:12Z"}, {"status", "ok"}})
               .get<RunInfo>();
  const std::vector<std::tuple<std::string, std::string, bool, double, double>> schemes = {
      {kHostile, "alibi", true, 0.4321, 0.5678}, {"rope", "rope", false, 0.9876, 0.9912},
      {"learned", "learned", false, 0.9611, 0.9733}};
  for (const auto& [name, positional, causal, a, b] : schemes) {
    json& entry = results_file["schemes"][name];
    entry["runs"] = json::array({run_entry(0, a), run_entry(1, b)});
    entry["test_exact"] = summary(a, b);
    for (const char* key : {"test_token", "train_exact", "train_token", "final_loss"}) entry[key] = summary(0.9, 0.95);
    entry["positional"] = positional;
    entry["causal"] = causal;
    entry["overrides"] = {{"model.positional", positional}, {"model.causal", causal}};
    for (int seed = 0; seed < 2; ++seed)
      for (int step : {20, 40})
        in.metrics.push_back(json({{"step", step}, {"scheme", name}, {"seed", seed}, {"seconds", step * 0.01},
                                   {"train_loss", 2.0 / step}, {"train_exact", 0.5}, {"train_token", 0.8},
                                   {"test_loss", 2.5 / step}, {"test_exact", step == 40 ? (seed ? b : a) : 0.25},
                                   {"test_token", 0.7}, {"test_exact_by_length", {{"1", 1.0}, {"2", 0.5}}}})
                                 .get<MetricsLine>());
    in.attention["schemes"][name] = {
        {"seeds", {0, 1}},
        {"probes", json::array({{{"attention", attention_maps(causal)}, {"output", json::parse("[[1, 2, 5, 1], [1, 2, 5, 2]]")}}})}};
  }
  in.attention["probes"] = json::array({"1 2"});
  in.attention["inputs"] = json::parse("[[1, 2, 5, 0]]");

  // positional.json as docs/design.md section 5 describes it, by hand.
  json bias = json::array();
  for (int i = 0; i < 4; ++i) {
    json row = json::array();
    for (int j = 0; j < 4; ++j) row.push_back(-0.5 * std::abs(i - j));
    bias.push_back(row);
  }
  const json square = json::parse("[[1, 0.5, -0.25, -1], [0.5, 1, 0.5, -0.25], [-0.25, 0.5, 1, 0.5], [-1, -0.25, 0.5, 1]]");
  const json points = json::parse("[[-1.5, 0.2], [-0.5, -0.4], [0.5, -0.3], [1.5, 0.5]]");
  positional_file = {{"context", 4}};
  json alibi_run = {{"seed", 0}};
  alibi_run["slopes"] = json::array({0.5});
  alibi_run["bias"] = json::array({bias});
  alibi_run["bias_by_distance"] = {{"distance", json::array({-3, -2, -1, 0, 1, 2, 3})},
                                   {"heads", json::array({json::array({-1.5, -1.0, -0.5, 0.0, -0.5, -1.0, -1.5})})}};
  positional_file["schemes"][kHostile] = {{"positional", "alibi"}, {"causal", true}};
  positional_file["schemes"][kHostile]["runs"] = json::array({alibi_run});

  json rope_run = {{"seed", 0}};
  rope_run["relative_kernel"]["distance"] = json::array({-3, -2, -1, 0, 1, 2, 3});
  rope_run["relative_kernel"]["score"] = json::array({0.1, 0.4, 0.8, 1.0, 0.8, 0.4, 0.1});
  rope_run["relative_kernel"]["head_dim"] = 8;
  positional_file["schemes"]["rope"] = {{"positional", "rope"}, {"causal", false}};
  positional_file["schemes"]["rope"]["runs"] = json::array({rope_run});

  json learned_run = {{"seed", 0}};
  learned_run["vectors"]["dot"] = square;
  learned_run["vectors"]["cosine"] = square;
  learned_run["vectors"]["pca"]["points"] = points;
  learned_run["vectors"]["pca"]["explained_variance_ratio"] = json::array({0.7, 0.2});
  learned_run["path"] = json::array();
  learned_run["path"].push_back({{"step", 20}, {"points", json::parse("[[0,0],[0.1,0],[0.2,0],[0.3,0]]")}});
  learned_run["path"].push_back({{"step", 40}, {"points", points}});
  positional_file["schemes"]["learned"] = {{"positional", "learned"}, {"causal", false}};
  positional_file["schemes"]["learned"]["runs"] = json::array({learned_run});
  in.results = results_file.get<StudyResults>();
  in.positional = positional_file.get<PositionalStudy>();
  return in;
}

// The <svg ...>...</svg> element whose opening tag contains `marker` ("" when none).
std::string svg_with(const std::string& page, const std::string& marker) {
  const size_t at = page.find(marker);
  if (at == std::string::npos) return "";
  const size_t start = page.rfind("<svg", at);
  const size_t end = page.find("</svg>", at);
  return start == std::string::npos || end == std::string::npos ? "" : page.substr(start, end + 6 - start);
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

TEST(Report, PageIsWellFormedAndSelfContained) {
  const std::string page = report_html(fixture());
  EXPECT_EQ(check_well_formed(page), "");
  EXPECT_EQ(page.rfind("<!DOCTYPE html>", 0), 0u);
  // Nothing loaded from elsewhere, nothing that needs scripts.
  EXPECT_EQ(page.find("<script"), std::string::npos);
  EXPECT_EQ(count(page, "http://"), count(page, "http://www.w3.org/2000/svg")) << "only the SVG namespace";
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find("<link"), std::string::npos);
}

// The title names the study folder the report was written for, whatever command line made
// the study (the report reads files, not options); escaped like any text.
TEST(Report, TheTitleNamesTheStudyFolder) {
  ReportInputs in = fixture();
  in.run->command = "copytask compare --out somewhere/else";
  in.study = "runs/a<b";
  EXPECT_NE(report_html(in).find("<title>copytask study report: runs/a&lt;b</title>"), std::string::npos);
  in.study.clear();
  EXPECT_NE(report_html(in).find("<title>copytask study report</title>"), std::string::npos);
}

TEST(Report, WellFormednessCheckerCatchesBrokenPages) {
  // The checker itself must be able to fail.
  EXPECT_NE(check_well_formed("<div><span></div></span>"), "");
  EXPECT_NE(check_well_formed("<div>"), "");
  EXPECT_NE(check_well_formed("<p title=\"a>b</p>"), "");
  EXPECT_NE(check_well_formed("<p>a & b</p>"), "");
  EXPECT_NE(check_well_formed("<p>a <b c</p>"), "");
  EXPECT_EQ(check_well_formed("<p>a &amp; b<br><svg><rect x=\"1\"/></svg></p>"), "");
}

TEST(Report, HasEveryChart) {
  const std::string page = report_html(fixture());
  for (const char* kind : {"accuracy", "curves", "loss", "by-length", "heatmap-cosine", "heatmap-dot", "pca",
                           "pca-path", "rope-kernel", "score-bias", "bias-distance"})
    EXPECT_EQ(count(page, std::string("class=\"chart ") + kind + "\""), 1u) << kind;
  // One attention chart per scheme and probe, each with one map per layer and head (2 x 1).
  EXPECT_EQ(count(page, "class=\"chart attention\""), 3u);
  const std::string rope = svg_with(page, "id=\"chart-attention-0-rope-1\"");
  ASSERT_FALSE(rope.empty());
  EXPECT_EQ(count(rope, "class=\"heatmap\""), 2u);
  EXPECT_NE(rope.find(">layer 2, head 1<"), std::string::npos);
  // Every colour scale is labelled.
  EXPECT_NE(rope.find(">attention weight<"), std::string::npos);
  EXPECT_NE(svg_with(page, "class=\"chart heatmap-cosine\"").find(">cosine similarity<"), std::string::npos);
  EXPECT_NE(svg_with(page, "class=\"chart score-bias\"").find(">score bias<"), std::string::npos);
  // The attention caption names the seed shown and the predicted output.
  EXPECT_NE(page.find("seed 0 (first of 2)"), std::string::npos);
}

// Length generalization: only where the study evaluated it; mean over seeds by length, the
// training maximum marked, skipped lengths left out.
TEST(Report, LengthGeneralizationChartWithTheTrainedMaximumMarked) {
  ReportInputs in = fixture();
  EXPECT_EQ(report_html(in).find("class=\"chart length-generalization\""), std::string::npos) << "not asked for";
  auto lengths = [](double k3, bool skip4) {
    json by_length = {{"1", {{"exact", 1.0}, {"token", 1.0}}}, {"2", {{"exact", 0.75}, {"token", 0.9}}},
                      {"3", {{"exact", k3}, {"token", 0.5}}}};
    by_length["4"] = skip4 ? json{{"exact", nullptr}, {"token", nullptr}, {"skipped", "beyond the rows"}}
                           : json{{"exact", 0.125}, {"token", 0.25}};
    return json{{"train_max_len", 2}, {"positions_trained", 4}, {"by_length", by_length}};
  };
  in.results->schemes["rope"].runs[0].length_generalization = lengths(0.5, false);
  in.results->schemes["rope"].runs[1].length_generalization = lengths(0.25, false);
  in.results->schemes["learned"].runs[0].length_generalization = lengths(0.0, true);
  const std::string page = report_html(in);
  EXPECT_EQ(check_well_formed(page), "");
  const std::string chart = svg_with(page, "class=\"chart length-generalization\"");
  ASSERT_FALSE(chart.empty());
  EXPECT_NE(chart.find(">trained up to k = 2<"), std::string::npos) << "the marker";
  EXPECT_NE(chart.find("rope, 3 content token(s): mean exact match over the copy 0.3750 over 2 seed(s)"), std::string::npos);
  EXPECT_EQ(chart.find("learned, 4 content token(s)"), std::string::npos) << "a skipped length is not drawn";
  EXPECT_NE(page.find("k = 2*"), std::string::npos);
  EXPECT_NE(page.find("k = 3<"), std::string::npos);
}

TEST(Report, NumbersAppearOnHoverAndMapsNameTheirFile) {
  const std::string page = report_html(fixture());
  const std::string accuracy = svg_with(page, "class=\"chart accuracy\"");
  ASSERT_FALSE(accuracy.empty());
  EXPECT_NE(accuracy.find("<title>rope, seed 1: test exact-match 0.9912</title>"), std::string::npos);
  EXPECT_EQ(count(accuracy, "class=\"seed\""), 6u) << "every seed a dot";
  EXPECT_EQ(count(accuracy, "class=\"ci\""), 3u) << "every scheme an error bar";
  EXPECT_NE(page.find("<td class=\"num\">0.9912</td>"), std::string::npos);
  // The mean of rope (0.9894) in the summary table, its CI in the bar's hover text.
  EXPECT_NE(page.find("<td class=\"num\">0.9894</td>"), std::string::npos);
  EXPECT_NE(accuracy.find("95% CI of the mean [0.8876, 1.0912]"), std::string::npos);
  // Curves: the mean over seeds at step 40, on hover.
  const std::string curves = svg_with(page, "class=\"chart curves\"");
  EXPECT_NE(curves.find("rope, step 40: mean test exact-match 0.9894 over 2 seed(s)"), std::string::npos);
  // Attention weights as the cells' colours, each map's hover naming attention.json: the causal
  // scheme's third query spreads 1/3 over three keys; the cells above the diagonal are masked.
  const std::string causal = svg_with(page, "id=\"chart-attention-0-b-x-0\"");
  const charts::ColourScale attention_scale{charts::ColourScale::Kind::sequential, 0, 1, "attention weight"};
  for (size_t key = 0; key <= 2; ++key)
    EXPECT_EQ(cell_colour(causal, 2, key), html::hex(attention_scale.step(1.0 / 3))) << "key " << key;
  EXPECT_EQ(cell_colour(causal, 2, 3), "") << "masked";
  EXPECT_EQ(cell_colour(causal, 0, 0), html::hex(attention_scale(1.0))) << "the first query puts all on key 0";
  EXPECT_NE(causal.find("<title>layer 2, head 1: the values are in attention.json</title>"), std::string::npos);
  // The positional maps' hover names positional.json.
  EXPECT_NE(svg_with(page, "class=\"chart heatmap-cosine\"")
                .find("<title>cosine similarity: the values are in positional.json</title>"),
            std::string::npos);
  EXPECT_NE(svg_with(page, "class=\"chart score-bias\"").find("<title>head 1, slope 0.5: the values are in "
                                                               "positional.json</title>"),
            std::string::npos);
  // Each PCA point's coordinates on hover.
  EXPECT_NE(svg_with(page, "class=\"chart pca\"").find("<title>position 3: (1.500, 0.500)</title>"), std::string::npos);
  // The RoPE kernel and the ALiBi slope.
  EXPECT_NE(page.find("distance -1: score 0.8000"), std::string::npos);
  EXPECT_NE(page.find("head 1, slope 0.5"), std::string::npos);
  // The bias against the signed distance, each point on hover.
  EXPECT_NE(svg_with(page, "class=\"chart bias-distance\"").find("<title>head 1, d = -2: bias -1.0000</title>"),
            std::string::npos);
  // By content length: rope's mean at k = 2.
  EXPECT_NE(page.find("rope, 2 content token(s): mean test exact-match 0.9894"), std::string::npos);
}

// The page carries what its charts show and the tables that are content of their own (the
// accuracy summary and every run, by length, the reported slopes, the config); the numbers
// behind the maps and curves are left to the files that hold them, and the page says which.
TEST(Report, CarriesOnlyWhatItsChartsShow) {
  const std::string page = report_html(fixture());
  std::set<std::string> tables;
  static const std::regex table("<table class=\"([^\"]*)\"");
  for (std::sregex_iterator it(page.begin(), page.end(), table), end; it != end; ++it) tables.insert((*it)[1]);
  EXPECT_EQ(tables, (std::set<std::string>{"summary", "runs", "by-length", "slopes", "config", "run", "schemes"}));
  // No copy of a chart's values: no matrix of attention weights, similarities or biases, no
  // curve, kernel, PCA or path table.
  EXPECT_EQ(page.find("<td class=\"num\">0.333</td>"), std::string::npos) << "an attention weight";
  EXPECT_EQ(page.find("Table: "), std::string::npos);
  EXPECT_EQ(page.find("Tables: "), std::string::npos);
  EXPECT_EQ(count(page, "<details>"), 2u) << "every run, the config as JSON";
  EXPECT_NE(page.find("<summary>Every run (6)</summary>"), std::string::npos);
  // Where the numbers are instead.
  EXPECT_NE(page.find("The weights themselves are in attention.json."), std::string::npos);
  EXPECT_NE(page.find("The numbers of every seed at every evaluation are in metrics.jsonl."), std::string::npos);
  EXPECT_NE(page.find("The points at every evaluation are in positional.json."), std::string::npos);
  // The ALiBi slope, a value no chart carries to its last digits, stays in its table.
  EXPECT_NE(page.find("<td class=\"num\">0.500000</td>"), std::string::npos);
}

// Heatmap cells take the nearest of 64 evenly spaced colours of their scale.
TEST(Report, HeatmapColoursAreTheScalesSteps) {
  const charts::ColourScale sequential{charts::ColourScale::Kind::sequential, 0, 2, ""};
  EXPECT_EQ(html::hex(sequential.step(0)), html::hex(sequential(0)));
  EXPECT_EQ(html::hex(sequential.step(2)), html::hex(sequential(2)));
  EXPECT_EQ(html::hex(sequential.step(2.0 / 3)), html::hex(sequential(2.0 * 21 / 64)));  // 64 / 3 = 21.3
  EXPECT_EQ(html::hex(sequential.step(5)), html::hex(sequential(2))) << "beyond the scale: its end";
  const charts::ColourScale diverging{charts::ColourScale::Kind::diverging, -0.5, 4, ""};  // symmetric: -4..4
  EXPECT_EQ(html::hex(diverging.step(0)), html::hex(diverging(0)));
  EXPECT_EQ(html::hex(diverging.step(-1.01)), html::hex(diverging(-1)));  // steps of 1/8
  EXPECT_EQ(html::hex(diverging.step(-4)), html::hex(diverging(-4)));
}

TEST(Report, EscapesUserText) {
  const std::string page = report_html(fixture());
  EXPECT_EQ(page.find(kHostile), std::string::npos) << "a scheme name reached the page unescaped";
  EXPECT_GE(count(page, "&lt;b&gt;&amp;x"), 5u);
  EXPECT_EQ(check_well_formed(page), "");
}

TEST(Report, CausalMaskIsVisible) {
  const std::string page = report_html(fixture());
  const std::string causal = svg_with(page, "id=\"chart-attention-0-b-x-0\"");
  const std::string rope = svg_with(page, "id=\"chart-attention-0-rope-1\"");
  ASSERT_FALSE(causal.empty());
  // 2 layers x 1 head x the 6 cells above the diagonal of a 4 x 4 map, hatched, with a legend.
  EXPECT_EQ(masked_cells(causal), 12u);
  EXPECT_EQ(cell_colour(causal, 0, 1), "") << "a masked cell has no colour of its own";
  EXPECT_NE(causal.find("url(#chart-attention-0-b-x-0-hatch)"), std::string::npos);
  EXPECT_NE(causal.find(">masked (causal)<"), std::string::npos);
  EXPECT_EQ(masked_cells(rope), 0u);
  // The causal ALiBi bias shows the mask too.
  EXPECT_EQ(masked_cells(svg_with(page, "class=\"chart score-bias\"")), 6u);
}

TEST(Report, WrongOutputTokensAreMarked) {
  const std::string page = report_html(fixture());
  // Target of "1 2 <copy> _" is "1 2 <copy> 1"; every scheme's first seed outputs 1 2 5 1: all right.
  EXPECT_EQ(count(page, "class=\"tok wrong\""), 1u) << "only the legend's example";
  ReportInputs in = fixture();
  in.attention["schemes"]["rope"]["probes"][0]["output"][0] = json::array({1, 2, 5, 3});
  const std::string changed = report_html(in);
  EXPECT_EQ(count(changed, "class=\"tok wrong\""), 2u);
  EXPECT_NE(changed.find("title=\"position 3: expected 1\""), std::string::npos);
}

TEST(Report, SchemeOrderFollowsResultsThenConfig) {
  ReportInputs in = fixture();
  auto order_in = [](const std::string& page) {
    const std::string chart = svg_with(page, "class=\"chart accuracy\"");
    return std::make_pair(chart.find(">rope<"), chart.find(">learned<"));
  };
  auto [rope, learned] = order_in(report_html(in));
  EXPECT_LT(rope, learned) << "config order: rope before learned";
  in.results->scheme_order = {"learned", kHostile, "rope"};
  std::tie(rope, learned) = order_in(report_html(in));
  EXPECT_GT(rope, learned) << "results.json scheme_order wins";
}

TEST(Report, IncompleteStudyIsSaid) {
  ReportInputs in = fixture();
  EXPECT_EQ(report_html(in).find("Incomplete study"), std::string::npos);
  in.results->complete = {5, 6, {"rope/1"}};
  const std::string page = report_html(in);
  EXPECT_NE(page.find("Incomplete study: 5 of 6 runs recorded; missing: rope/1."), std::string::npos);
}

TEST(Report, MissingOptionalFilesSayNotRecorded) {
  ReportInputs in;
  in.config = fixture().config;
  const std::string page = report_html(in);
  EXPECT_EQ(check_well_formed(page), "");
  for (const char* file : {"results.json", "metrics.jsonl", "attention.json", "positional.json", "run.json"})
    EXPECT_NE(page.find(std::string("<code>") + file + "</code> not recorded"), std::string::npos) << file;
  EXPECT_EQ(page.find("class=\"chart "), std::string::npos);
  // The config is still there.
  EXPECT_NE(page.find("&lt;b&gt;&amp;x"), std::string::npos);
}

TEST(Report, UnexpectedShapesGiveANoteNotAFailure) {
  ReportInputs in = fixture();
  in.results->schemes["rope"].summaries["test_exact"] = "not a summary";
  in.attention["schemes"]["rope"]["probes"][0]["attention"] = 3;
  in.positional->schemes["learned"].runs[0]["vectors"]["cosine"] = json::parse("[[\"x\"]]");
  std::string page;
  ASSERT_NO_THROW(page = report_html(in));
  EXPECT_EQ(check_well_formed(page), "");
  EXPECT_EQ(count(page, "class=\"chart attention\""), 2u);
}

// ---- Writing from a study folder ---------------------------------------------------------------

fs::path fresh_report_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("copytask_report_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

void write(const fs::path& path, const std::string& text) {
  std::ofstream file(path);
  file << text;
}

TEST(ReportWrite, ReadsTheStudyFolderAndWritesAtomically) {
  const fs::path dir = fresh_report_dir("study");
  const ReportInputs in = fixture();
  write(dir / "config.json", in.config.dump());
  write(dir / "run.json", json(*in.run).dump());
  write(dir / "results.json", json(*in.results).dump());
  write(dir / "attention.json", in.attention.dump());
  write(dir / "positional.json", json(*in.positional).dump());
  std::string metrics;
  for (const auto& line : in.metrics) metrics += json(line).dump() + "\n";
  write(dir / "metrics.jsonl", metrics + "{\"step\": 60, \"sch");  // a crash mid-append: skipped
  fs::create_directories(dir / "shards");
  write(dir / "shards" / "1.json", json({{"status", "ok"}, {"device", "cuda:1"}}).dump());
  write(dir / "shards" / "0.json", json({{"status", "failed"}, {"device", "cuda:0"}}).dump());

  const fs::path out = dir / "report.html";
  ASSERT_NO_THROW(report_html_write(dir.string(), out.string()));
  std::ifstream file(out);
  const std::string page((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(page, report_html([&] {
              ReportInputs expected = in;
              expected.study = dir.string();
              expected.shard_runs = {json({{"status", "failed"}, {"device", "cuda:0"}}).get<RunInfo>(),
                                     json({{"status", "ok"}, {"device", "cuda:1"}}).get<RunInfo>()};
              return expected;
            }()));
  EXPECT_NE(page.find("Shards (2)"), std::string::npos);
  EXPECT_LT(page.find("cuda:0"), page.find("cuda:1"));
  for (const auto& entry : fs::directory_iterator(dir))
    EXPECT_EQ(entry.path().string().find(".tmp."), std::string::npos) << "leftover " << entry.path();
  fs::remove_all(dir);
}

TEST(ReportWrite, RefusesAFolderWithoutConfigOrWithBadJson) {
  const fs::path dir = fresh_report_dir("bad");
  try {
    report_html_write(dir.string(), (dir / "r.html").string());
    FAIL() << "no config.json must throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("config.json"), std::string::npos) << error.what();
  }
  write(dir / "config.json", "{}");
  write(dir / "results.json", "{\"schemes\": ");
  try {
    report_html_write(dir.string(), (dir / "r.html").string());
    FAIL() << "invalid results.json must throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("results.json"), std::string::npos) << error.what();
  }
  // Valid JSON that is not of results.json's record: named, with how to mend it.
  write(dir / "results.json", R"({"schemes": {"rope": {"runs": "not a list"}}})");
  try {
    report_html_write(dir.string(), (dir / "r.html").string());
    FAIL() << "a results.json of another shape must throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("results.json is not of its record's shape"), std::string::npos)
        << error.what();
  }
  write(dir / "results.json", R"({"schemes": {}})");
  const std::string good_line = json(fixture().metrics.front()).dump();
  write(dir / "metrics.jsonl", good_line + "\nnot json\n" + good_line + "\n");
  try {
    report_html_write(dir.string(), (dir / "r.html").string());
    FAIL() << "a bad line inside metrics.jsonl must throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("metrics.jsonl line 2 is not valid JSON"), std::string::npos) << error.what();
  }
  // Valid JSON that is not a metrics line (its record lacks the field) is named too.
  write(dir / "metrics.jsonl", good_line + "\n" + good_line + "\n{\"step\": 2}\n");
  try {
    report_html_write(dir.string(), (dir / "r.html").string());
    FAIL() << "a line without a metrics line's fields must throw";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("metrics.jsonl line 3 is not a metrics line"), std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("scheme"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(fs::exists(dir / "r.html"));
  fs::remove_all(dir);
}

// ---- Building blocks --------------------------------------------------------------------------

TEST(ReportSvg, EscapeFormatAndTicks) {
  EXPECT_EQ(html::escape("<a href=\"x\">'&'</a>"), "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  EXPECT_EQ(html::fixed(0.99512, 4), "0.9951");
  EXPECT_EQ(html::fixed(-0.00001, 3), "0.000");
  EXPECT_EQ(html::fixed(NAN, 3), "n/a");
  EXPECT_EQ(html::compact(1200.0), "1200");
  EXPECT_EQ(html::compact(0.1 + 0.2), "0.3");
  auto expect_ticks = [](const std::vector<double>& ticks, const std::vector<double>& expected) {
    ASSERT_EQ(ticks.size(), expected.size());
    for (size_t i = 0; i < ticks.size(); ++i) EXPECT_NEAR(ticks[i], expected[i], 1e-9) << i;
  };
  expect_ticks(html::nice_ticks(0, 1, 5), {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  expect_ticks(html::nice_ticks(0, 2000, 4), {0, 500, 1000, 1500, 2000});
  expect_ticks(html::nice_ticks(-3, 3, 6), {-3, -2, -1, 0, 1, 2, 3});
  const auto domain = html::nice_domain(0.13, 0.87, 5);
  EXPECT_NEAR(domain.first, 0.1, 1e-12);  // widened outwards to the 0.1 tick step
  EXPECT_NEAR(domain.second, 0.9, 1e-12);
  EXPECT_EQ(html::truncate("alibi@model.heads=2", 8), "alibi@m\u2026");
  EXPECT_EQ(html::hex(html::viridis(0)), "#440154");
  EXPECT_EQ(html::hex(html::viridis(1)), "#fde725");
  EXPECT_EQ(html::hex(html::diverging(0)), "#f7f7f7");
  EXPECT_NE(html::scheme_colour(0), html::scheme_colour(1));
}


// A whole-split metric added to the list (records/split_metrics.h) in the test binary, as a
// contributor adds one: the evaluation's scores give it, and it reaches result.json and
// results.json's runs, results.json's summaries, results.csv, metrics.jsonl, eval's identical
// check and the report's tables, with nothing else written for it; a file from before it still
// reads, and outside its scope the list is as it was.
TEST(SplitMetrics, AMetricAddedToTheListReachesEveryFileAndTheReport) {
  const size_t before = split_metrics().size();
  {
    const SplitMetricScope scope({"test_error", "", "test", "test error", SplitSummary::share, false,
                                  [](const SplitScores& s) { return 1.0 - s.exact; }});
    ASSERT_EQ(split_metrics().size(), before + 1);
    const SplitScores train{0.125, 1.0, 1.0, {}, 36}, test{0.5, 0.75, 0.875, {}, 4}, other{0.5, 0.5, 0.75, {}, 4};
    const RunRecord a = run_record_of(0, train, test), b = run_record_of(1, train, other);
    // result.json and results.json's runs.
    const json written = a;
    EXPECT_EQ(written.at("test_error"), 0.25);
    EXPECT_EQ(json(written.get<RunRecord>()), written);
    // results.json's summaries over the seeds.
    json scheme = scheme_results_json({a, b});
    EXPECT_EQ(scheme.at("test_error").at("n"), 2);
    EXPECT_DOUBLE_EQ(scheme.at("test_error").at("mean").get<double>(), 0.375);
    // results.csv: a row per run, after the metrics before it in the list.
    scheme["positional"] = "rope";
    scheme["causal"] = false;
    scheme["overrides"] = json::object();
    json results_file = {{"schemes", {{"rope", scheme}}}, {"scheme_order", {"rope"}}};
    const StudyResults results = results_file.get<StudyResults>();
    const std::vector<TidyRow> rows = results_tidy_rows(results);
    std::vector<std::string> metrics_of_seed_0;
    for (const auto& row : rows)
      if (row.seed == 0 && row.length < 0) metrics_of_seed_0.push_back(row.metric);
    ASSERT_FALSE(metrics_of_seed_0.empty());
    EXPECT_EQ(metrics_of_seed_0.back(), "test_error");
    EXPECT_NE(results_csv(rows).find("rope,rope,false,1,,,test_error,0.5"), std::string::npos) << results_csv(rows);
    // metrics.jsonl.
    MetricsLine line;
    line.scheme = "rope";
    line.whole_split = split_metric_values(test, train, /*line_names=*/true);
    const json line_json = line;
    EXPECT_EQ(line_json.at("test_error"), 0.25);
    EXPECT_EQ(line_json.get<MetricsLine>().metric("test_error"), 0.25);
    // eval's identical check reads it too.
    RunRecord moved = a;
    moved.whole_split["test_error"] = 0.3;
    EXPECT_TRUE(same_whole_split_numbers(a, a));
    EXPECT_FALSE(same_whole_split_numbers(a, moved));
    // A file from before the metric reads, without it, and nothing invents it.
    json older = written;
    older.erase("test_error");
    EXPECT_EQ(older.get<RunRecord>().whole_split.count("test_error"), 0u);
    EXPECT_EQ(json(older.get<RunRecord>()), older);
    // The report's run table and summary table get its column.
    ReportInputs in = fixture();
    in.results->schemes.at("rope").runs = results.schemes.at("rope").runs;
    in.results->schemes.at("rope").summaries = results.schemes.at("rope").summaries;
    const std::string page = report_html(in);
    EXPECT_EQ(count(page, "<th>test error</th>"), 2u) << "the runs' table and the summary's";
    EXPECT_NE(page.find("0.2500"), std::string::npos);
  }
  EXPECT_EQ(split_metrics().size(), before) << "the scope removed it";
  EXPECT_EQ(json(RunRecord()).count("test_error"), 0u);
}

}  // namespace
}  // namespace copytask
