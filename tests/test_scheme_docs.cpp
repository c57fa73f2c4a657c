// The lists of schemes outside the code are checked against the registry, so none goes stale
// silently: docs/schemes.md's table has one row per registered scheme and a section per
// option; the README keeps no list of its own (it points to `copytask schemes`). (The Python
// reference and its fixtures are checked by ctest's python_reference_registry; the config
// key table by Config.TheDocsKeyTableIsCopytaskKeys.)
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "autograd_only_scheme.h"
#include "model/positional.h"
#include "test_paths.h"

namespace copytask {
namespace {
namespace fs = std::filesystem;

std::string source_file(const std::string& relative) {
  std::ifstream file(fs::path(test::source_dir()) / relative);
  EXPECT_TRUE(file) << relative << " is missing";
  std::stringstream text;
  text << file.rdbuf();
  return text.str();
}

std::string lowercase(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  return text;
}

// The schemes the project ships (not the test binary's own).
std::set<std::string> shipped_schemes() {
  std::set<std::string> names;
  for (const auto& name : positional_names())
    if (!test::is_test_only_scheme(name)) names.insert(name);
  return names;
}

TEST(SchemeDocs, SchemesMdHasARowForEveryRegisteredSchemeAndASectionForEveryOption) {
  const std::string docs = source_file("docs/schemes.md");
  // The scheme table's rows: lines that start "| `name` |".
  std::set<std::string> rows;
  std::istringstream lines(docs);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("| `", 0) == 0) {
      const size_t end = line.find('`', 3);
      if (end != std::string::npos && line.compare(end, 3, "` |") == 0) rows.insert(line.substr(3, end - 3));
    }
  for (const auto& name : shipped_schemes())
    EXPECT_TRUE(rows.count(name)) << "docs/schemes.md has no row \"| `" << name << "` | ...\" in its scheme table: "
                                  << "add the scheme's hooks, options and causal rule there";
  for (const auto& row : rows) {
    if (row.rfind("model.", 0) != 0) {
      EXPECT_TRUE(shipped_schemes().count(row)) << "docs/schemes.md has a row for `" << row
                                                << "`, which the registry does not have (src/model/schemes/registry.cpp)";
    }
  }
  for (const auto& option : positional_option_registry())
    EXPECT_NE(docs.find("(option `model." + option.key + "`"), std::string::npos)
        << "docs/schemes.md has no section \"## ... (option `model." << option.key << "`; ...)\" for the option";
}

// The README does not keep a list of its own that a new scheme would have to extend: its
// opening paragraph sends the reader to `copytask schemes` and docs/schemes.md, and
// claims no count of schemes that a new one would make wrong.
TEST(SchemeDocs, TheReadmeDefersTheListToTheRegistry) {
  const std::string readme = source_file("README.md");
  const std::string opening = readme.substr(0, readme.find("```"));
  EXPECT_NE(opening.find("`copytask schemes`"), std::string::npos)
      << "README.md's opening paragraph must point to `copytask schemes` for the list of schemes";
  EXPECT_NE(opening.find("docs/schemes.md"), std::string::npos);
  const std::string lower = lowercase(opening);
  for (const char* count : {"eleven ", "twelve ", "thirteen ", "fourteen ", "fifteen ", "sixteen ", "seventeen "})
    EXPECT_EQ(lower.find(std::string(count) + "positional schemes"), std::string::npos)
        << "README.md counts the schemes (\"" << count << "positional schemes\"): a new scheme would make it wrong";
}

}  // namespace
}  // namespace copytask
