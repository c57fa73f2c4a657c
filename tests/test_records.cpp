// The study's files as typed records (src/records/): each record's to_json and from_json
// are inverses, a record missing a field is refused naming it, and results.csv holds
// results.json's numbers as tidy rows that read back to the same doubles.
#include <cmath>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "records/member_result.h"
#include "records/metrics_line.h"
#include "records/positional_record.h"
#include "records/results_csv.h"
#include "records/run_info.h"
#include "records/study_results.h"
#include "util/atomic_files.h"
#include "util/gzip_files.h"
#include "cli_util.h"

namespace copytask {
namespace {
using nlohmann::json;

// A run with every field set to a value no default has, and per-length entries (one skipped).
RunRecord a_run(int64_t seed) {
  RunRecord run;
  run.seed = seed;
  run.whole_split = {{"test_exact", 0.1 + 0.2},  // not a short decimal: the CSV must keep every bit
                     {"test_token", 0.75},
                     {"train_exact", 0.5},
                     {"train_token", 0.875},
                     {"final_loss", 1.0 / 3.0},
                     {"test_loss", 0.25}};
  run.steps = 40;
  run.seconds = 1.5;
  run.batch_members = 3;
  run.test_exact_by_length = {-1, 1.0, -1, 0.625};
  run.length_generalization = json::parse(R"({"train_max_len": 3, "positions_trained": 8, "by_length": {
      "3": {"n": 20, "context": 8, "trained": true, "exact": 0.5, "token": 0.75},
      "9": {"n": 20, "context": 20, "trained": false, "exact": null, "token": null, "skipped": "too long"}}})");
  run.length_generalization_rescaled = json::parse(R"({"yarn": {"factor": 0, "train_max_len": 3, "by_length": {
      "9": {"n": 20, "context": 20, "trained": false, "exact": 0.25, "token": 0.5}}}})");
  return run;
}

template <typename Record>
void expect_round_trip(const Record& record) {
  const json written = record;
  const Record read = written.template get<Record>();
  EXPECT_EQ(json(read), written);
}

TEST(Records, EachRecordReadsBackWhatItWrote) {
  expect_round_trip(a_run(7));

  MemberResult result;
  result.run = a_run(2);
  result.arm = "alibi+causal";
  result.positional = "alibi";
  result.causal = true;
  result.overrides = {{"model.causal", true}};
  result.model = {{"embed", 8}};
  result.training_step = "fused CPU";
  result.device = "cpu";
  result.threads = 2;
  result.finished = "2026-11-25T12:00:00Z";
  expect_round_trip(result);
  const json file = result;
  EXPECT_EQ(file.at("scheme"), "alibi+causal") << "the file contract calls an arm a scheme";
  EXPECT_EQ(file.at("seed"), 2) << "the run's numbers sit at the top level of result.json";

  RunInfo info;
  info.version = "0.1.0";
  info.command = "copytask compare";
  info.device = "cuda:0";
  info.gpu = "H100";
  info.cuda_runtime = "13.0";
  info.threads = 16;
  info.started = "2026-11-25T12:00:00Z";
  info.status = "failed";
  info.error = "out of memory";
  info.shard = "2/3";
  info.members_trained = {"rope/seed-0"};
  info.members_skipped = 4;
  info.batches = {{{"rope/seed-0"}, "autograd", "has no fused CPU step"}, {{"t5/seed-0"}, "fused CPU", ""}};
  info.earlier_runs = json::array({{{"unreadable", "not JSON"}}});
  expect_round_trip(info);
  EXPECT_EQ(json(info).at("training_step"), "autograd, fused CPU") << "derived from the batches";
  EXPECT_TRUE(json(RunInfo()).at("ended").is_null()) << "ended is null while running";

  MetricsLine line;
  line.step = 20;
  line.scheme = "rope";
  line.seed = 1;
  line.seconds = 0.5;
  line.whole_split = {{"train_loss", 2.5},  {"train_exact", 0.5}, {"train_token", 0.875},
                      {"test_loss", 0.25},  {"test_exact", 0.1 + 0.2}, {"test_token", 0.75}};
  line.test_exact_by_length = {-1, 0.5};
  line.length_generalization[12] = {0.25, 0.5, {{0.9, 0.1}}, {{1.5, 2.0}}};
  expect_round_trip(line);

  StudyResults results;
  results.scheme_order = {"rope", "missing-arm"};
  results.schemes["rope"].positional = "rope";
  results.schemes["rope"].task = "reverse";
  results.schemes["rope"].runs = {a_run(0), a_run(1)};
  results.schemes["rope"].summaries = {{"test_exact", {{"mean", 0.3}, {"n", 2}}}};
  results.complete = {2, 4, {"missing-arm/seed-0", "missing-arm/seed-1"}};
  expect_round_trip(results);
  EXPECT_EQ(json(results)["schemes"]["rope"]["test_exact"]["n"], 2) << "the summaries sit beside the runs";

  PositionalStudy positional;
  positional.context = 12;
  positional.schemes["learned"] = {"learned", false, {json{{"vectors", {{"cosine", {{1.0}}}}}}}};
  expect_round_trip(positional);
}

TEST(Records, ARecordMissingAFieldIsRefusedNamingIt) {
  json run = a_run(0);
  run.erase("final_loss");
  try {
    (void)run.get<RunRecord>();
    FAIL() << "a run without final_loss must not read";
  } catch (const json::exception& error) {
    EXPECT_NE(std::string(error.what()).find("final_loss"), std::string::npos) << error.what();
  }
  json results = StudyResults{{"rope"}, {{"rope", SchemeResults{"rope", false, "copy", nullptr, {a_run(0)}, json::object(), "placeholders"}}}, {}};
  results["schemes"]["rope"]["runs"][0]["test_exact"] = "high";
  EXPECT_THROW((void)results.get<StudyResults>(), json::exception) << "a number of another type";
  // A run record from an older copytask (no cpu_kernel, no batches) still reads.
  EXPECT_EQ(json::parse(R"({"status": "ok", "device": "cpu"})").get<RunInfo>().status, "ok");
}

// Splits one CSV line without quotes (the rows below have none but the arm's).
std::vector<std::string> fields_of(const std::string& line) {
  std::vector<std::string> fields;
  std::stringstream stream(line);
  std::string field;
  while (std::getline(stream, field, ',')) fields.push_back(field);
  if (!line.empty() && line.back() == ',') fields.push_back("");
  return fields;
}

TEST(Records, ResultsCsvIsOneTidyRowPerNumberThatReadsBackBitForBit) {
  StudyResults results;
  results.scheme_order = {"rope", "not-trained"};
  results.schemes["rope"] = {"rope", true, "selective", nullptr, {a_run(0), a_run(3)}, json::object(), "placeholders"};
  const std::vector<TidyRow> rows = results_tidy_rows(results);
  // Per run: 6 whole-split numbers, 2 test lengths (1 and 3), length 3's exact and token
  // (length 9 skipped: no row), and yarn's exact and token at 9.
  ASSERT_EQ(rows.size(), 2u * (6 + 2 + 2 + 2));
  const std::string csv = results_csv(rows);
  std::stringstream lines(csv);
  std::string line;
  std::getline(lines, line);
  EXPECT_EQ(line, kResultsCsvHeader);
  std::vector<std::vector<std::string>> table;
  while (std::getline(lines, line)) table.push_back(fields_of(line));
  ASSERT_EQ(table.size(), rows.size());
  for (const auto& fields : table) ASSERT_EQ(fields.size(), 8u) << "arm,scheme,causal,seed,task,length,metric,value";
  EXPECT_EQ(table[0], (std::vector<std::string>{"rope", "rope", "true", "0", "selective", "", "test_exact",
                                                json(0.1 + 0.2).dump()}));
  EXPECT_EQ(std::stod(table[0][7]), 0.1 + 0.2) << "every bit of the double";
  auto find = [&](const std::string& seed, const std::string& length, const std::string& metric) {
    for (const auto& fields : table)
      if (fields[3] == seed && fields[5] == length && fields[6] == metric) return std::stod(fields[7]);
    ADD_FAILURE() << "no row " << seed << " " << length << " " << metric;
    return std::nan("");
  };
  EXPECT_EQ(find("3", "", "final_loss"), 1.0 / 3.0);
  EXPECT_EQ(find("3", "3", "test_exact_by_length"), 0.625);
  EXPECT_EQ(find("0", "3", "length_token"), 0.75);
  EXPECT_EQ(find("0", "9", "length_exact_yarn"), 0.25);
  for (const auto& fields : table) EXPECT_FALSE(fields[5] == "9" && fields[6] == "length_exact") << "skipped: no row";

  // An arm's name with a comma or a quote is quoted as RFC 4180 says.
  TidyRow odd;
  odd.arm = "rope, \"half\"";
  odd.metric = "test_exact";
  odd.value = NAN;
  EXPECT_EQ(results_csv({odd}), std::string(kResultsCsvHeader) + "\n\"rope, \"\"half\"\"\",,false,0,,,test_exact,\n");
}

// An experiment keeps its large study files gzipped: a reader asks for the plain name and
// gets the same bytes from either form; a gzip file cut short is refused naming the file.
TEST(Records, StudyFilesReadTheSameGzippedAsPlain) {
  namespace fs = std::filesystem;
  if (!gzip_available()) GTEST_SKIP() << "built without zlib";
  const fs::path dir = test::fresh_dir("gzip-files");
  fs::create_directories(dir);
  std::string text;
  for (int i = 0; i < 20000; ++i) text += "{\"line\": " + std::to_string(i * 7919 % 10007) + "}\n";  // > one 64 KiB buffer
  EXPECT_EQ(stored_file(dir.string(), "metrics.jsonl"), "") << "neither form";
  file_write_gzipped_atomic((dir / "metrics.jsonl.gz").string(), text);
  EXPECT_LT(fs::file_size(dir / "metrics.jsonl.gz"), text.size() / 3) << "compressed";
  EXPECT_EQ(stored_file(dir.string(), "metrics.jsonl"), (dir / "metrics.jsonl.gz").string());
  EXPECT_EQ(file_read_stored((dir / "metrics.jsonl.gz").string()), text);
  file_write_atomic((dir / "metrics.jsonl").string(), "plain");
  EXPECT_EQ(stored_file(dir.string(), "metrics.jsonl"), (dir / "metrics.jsonl").string()) << "the plain form first";

  // Two gzip members one after the other are one stream (as gunzip reads `cat a.gz b.gz`).
  const std::string first = file_read((dir / "metrics.jsonl.gz").string());
  file_write_gzipped_atomic((dir / "tail.gz").string(), "and more\n");
  file_write_atomic((dir / "both.gz").string(), first + file_read((dir / "tail.gz").string()));
  EXPECT_EQ(file_read_stored((dir / "both.gz").string()), text + "and more\n");

  file_write_atomic((dir / "cut.json.gz").string(), first.substr(0, first.size() / 2));
  try {
    file_read_stored((dir / "cut.json.gz").string());
    ADD_FAILURE() << "a file cut short was read";
  } catch (const std::runtime_error& error) {
    EXPECT_NE(std::string(error.what()).find("cut.json.gz"), std::string::npos) << error.what();
  }
  file_write_atomic((dir / "not.json.gz").string(), "not gzip at all");
  EXPECT_THROW(file_read_stored((dir / "not.json.gz").string()), std::runtime_error);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace copytask
