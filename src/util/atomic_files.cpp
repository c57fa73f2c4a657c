#include "util/atomic_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

namespace copytask {
namespace {
std::runtime_error io_error(const std::string& what, const std::string& path) {
  return std::runtime_error("cannot " + what + " " + path + ": " + std::strerror(errno));
}
}  // namespace

void file_write_atomic(const std::string& path, const std::string& content) {
  const std::string temporary = path + ".tmp." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw io_error("create", temporary);
  size_t written = 0;
  while (written < content.size()) {
    const ssize_t n = ::write(fd, content.data() + written, content.size() - written);
    if (n < 0) {
      if (errno == EINTR) continue;
      ::close(fd);
      ::unlink(temporary.c_str());
      throw io_error("write", temporary);
    }
    written += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    ::unlink(temporary.c_str());
    throw io_error("flush", temporary);
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    ::unlink(temporary.c_str());
    throw io_error("rename a temporary file to", path);
  }
}

void json_write_atomic(const std::string& path, const nlohmann::json& value) {
  file_write_atomic(path, value.dump(2) + "\n");
}

void jsonl_append(const std::string& path, const nlohmann::json& value) {
  std::ofstream file(path, std::ios::app);
  if (!file) throw io_error("open for appending", path);
  file << value.dump() << '\n';
  file.flush();
  if (!file) throw io_error("append to", path);
}

std::string file_read(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw io_error("open", path);
  std::stringstream content;
  content << file.rdbuf();
  return content.str();
}

}  // namespace copytask
