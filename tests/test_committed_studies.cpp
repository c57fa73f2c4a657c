// The committed studies (every folder of experiments/ with a results.json) read through
// today's records and rendered by today's report: a renamed or dropped field, or a reader
// that no longer takes an older file, fails here by the study's name, not in a user's
// `copytask report` of an experiment.
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "records/study_results.h"
#include "util/atomic_files.h"
#include "util/gzip_files.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;
using test::Outcome;

// Every study folder under experiments/: one holding study.json and results.json (or .gz).
std::vector<fs::path> committed_studies() {
  std::vector<fs::path> out;
  const fs::path root = fs::path(test::source_dir()) / "experiments";
  for (const auto& entry : fs::recursive_directory_iterator(root))
    if (entry.is_directory() && fs::exists(entry.path() / "study.json") &&
        !stored_file(entry.path().string(), "results.json").empty())
      out.push_back(entry.path());
  if (fs::exists(root / "study.json")) out.push_back(root);
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CommittedStudies, EveryResultsFileReadsThroughTodaysRecordsUnchanged) {
  const auto studies = committed_studies();
  ASSERT_GE(studies.size(), 10u) << "experiments/ holds at least the studies the docs cite";
  for (const auto& dir : studies) {
    SCOPED_TRACE(dir.string());
    const nlohmann::json saved = nlohmann::json::parse(file_read_stored(stored_file(dir.string(), "results.json")));
    StudyResults read;
    ASSERT_NO_THROW(read = saved.get<StudyResults>());
    EXPECT_FALSE(read.schemes.empty());
    // Written back, the same file: every field today's records know is kept, none renamed.
    EXPECT_EQ(nlohmann::json(read), saved);
  }
}

// Each study's files copied without anything else (as a user who cloned the project has
// them): `copytask report` renders its page, and the results.csv it derives from today's
// records is the committed one, byte for byte, where one is committed.
TEST(CommittedStudies, EveryReportRendersFromTheCommittedFiles) {
  for (const auto& dir : committed_studies()) {
    SCOPED_TRACE(dir.string());
    const fs::path copy = test::fresh_dir("committed-" + std::to_string(std::hash<std::string>{}(dir.string())));
    fs::create_directories(copy);
    for (const auto& entry : fs::directory_iterator(dir))
      if (entry.is_regular_file()) fs::copy_file(entry.path(), copy / entry.path().filename());
    const std::string committed_csv = stored_file(dir.string(), "results.csv");
    Outcome report = test::run("report --run " + copy.string());
    ASSERT_EQ(report.exit_code, 0) << report.output;
    ASSERT_TRUE(fs::exists(copy / "report.html"));
    EXPECT_GT(fs::file_size(copy / "report.html"), 1000u);
    if (!committed_csv.empty()) {
      EXPECT_EQ(file_read_stored(stored_file(copy.string(), "results.csv")), file_read_stored(committed_csv))
          << "results.csv from today's records";
    }
    fs::remove_all(copy);
  }
}

}  // namespace
}  // namespace copytask
