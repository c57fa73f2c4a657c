#pragma once
// A study's large files kept gzipped: an experiment's folder holds results.json.gz,
// attention.json.gz, positional.json.gz and metrics.jsonl.gz beside its README, so that a
// clone stays small. Readers ask for the plain name and get whichever form is there.
#include <string>

namespace copytask {

// Whether `path` names a gzipped file (ends in ".gz").
bool gzipped_path(const std::string& path);

// Whether this build reads and writes gzip (zlib's headers were there when it was built).
bool gzip_available();

// The path of `name` in `dir` as it is kept: dir/name where it exists, else dir/name.gz
// where that exists, else "" (neither).
std::string stored_file(const std::string& dir, const std::string& name);

// Reads a whole file, un-gzipping one whose name ends in ".gz"; throws std::runtime_error
// naming the path (and, in a build without zlib, how to read it anyway).
std::string file_read_stored(const std::string& path);

// Writes `content` gzipped, whole or not at all (as file_write_atomic).
void file_write_gzipped_atomic(const std::string& path, const std::string& content);

}  // namespace copytask
