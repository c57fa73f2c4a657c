#pragma once
// Where the tests find the source tree (configs, docs, fixtures) and the copytask binary:
// the build's own paths, unless the environment names others, as a prebuilt bundle run on
// another machine does (scripts/cuda_build.sh --bundle: its `run` script sets both).
#include <cstdlib>
#include <string>

namespace copytask::test {

inline std::string path_from_environment(const char* variable, const char* built) {
  const char* value = std::getenv(variable);
  return value != nullptr && *value != '\0' ? value : built;
}

// The source tree: COPYTASK_SOURCE_DIR, else the one this build was configured from.
inline std::string source_dir() { return path_from_environment("COPYTASK_SOURCE_DIR", COPYTASK_BUILT_SOURCE_DIR); }
inline std::string fixtures_dir() { return source_dir() + "/tests/fixtures"; }
// The copytask binary: COPYTASK_BINARY, else the one this build made.
inline std::string copytask_binary() { return path_from_environment("COPYTASK_BINARY", COPYTASK_BUILT_BINARY); }

}  // namespace copytask::test
