#include "study/member_files.h"

#include <filesystem>
#include <stdexcept>

#include "util/atomic_files.h"

namespace copytask {
namespace fs = std::filesystem;

std::string member_dir(const std::string& study_dir, const std::string& scheme, int64_t seed) {
  return (fs::path(study_dir) / "members" / scheme / ("seed-" + std::to_string(seed))).string();
}

bool member_complete(const std::string& study_dir, const std::string& scheme, int64_t seed) {
  const fs::path path = fs::path(member_dir(study_dir, scheme, seed)) / "result.json";
  if (!fs::exists(path)) return false;
  try {
    return nlohmann::json::parse(file_read(path.string())).is_object();
  } catch (const std::exception&) {
    return false;  // unreadable: train it again
  }
}

nlohmann::json member_json_read(const std::string& study_dir, const std::string& scheme, int64_t seed,
                                const std::string& file) {
  const std::string path = (fs::path(member_dir(study_dir, scheme, seed)) / file).string();
  try {
    return nlohmann::json::parse(file_read(path));
  } catch (const nlohmann::json::parse_error& error) {
    throw std::runtime_error(path + " is not valid JSON (" + error.what() +
                             "); delete that member's folder and rerun the study to train it again");
  }
}

}  // namespace copytask
