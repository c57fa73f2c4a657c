#pragma once
// Writing result files safely: every file that is not append-only is written whole or not
// at all (a temporary file in the same folder, flushed, then renamed over the target).
#include <string>

#include <nlohmann/json_fwd.hpp>

namespace copytask {

// Throws std::runtime_error naming the path when the file cannot be written.
void file_write_atomic(const std::string& path, const std::string& content);
void json_write_atomic(const std::string& path, const nlohmann::json& value);

// Appends one compact JSON line and flushes it, so a crash loses at most that line.
void jsonl_append(const std::string& path, const nlohmann::json& value);

// Reads a whole file; throws std::runtime_error naming the path.
std::string file_read(const std::string& path);

}  // namespace copytask
