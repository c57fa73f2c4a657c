#include "util/gzip_files.h"

#include <filesystem>
#include <stdexcept>

#include "util/atomic_files.h"

#ifdef COPYTASK_HAVE_ZLIB
#include <zlib.h>
#endif

namespace copytask {
namespace fs = std::filesystem;

namespace {
#ifdef COPYTASK_HAVE_ZLIB
// inflate with automatic gzip header detection (windowBits 15 + 32), member after member
// (a file of concatenated gzip members is one stream to gunzip).
std::string gunzip(const std::string& packed, const std::string& path) {
  std::string out;
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 32) != Z_OK) throw std::runtime_error("cannot start zlib to read " + path);
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(packed.data()));
  stream.avail_in = static_cast<uInt>(packed.size());
  char buffer[1 << 16];
  while (true) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    const int status = inflate(&stream, Z_NO_FLUSH);
    out.append(buffer, sizeof(buffer) - stream.avail_out);
    if (status == Z_STREAM_END) {
      if (stream.avail_in == 0) break;
      inflateReset(&stream);  // another gzip member follows
      continue;
    }
    if (status != Z_OK) {
      inflateEnd(&stream);
      throw std::runtime_error(path + " is not a complete gzip file (" + (stream.msg ? stream.msg : "zlib error") +
                               "); restore it, or collect the study again from its members");
    }
    if (stream.avail_in == 0 && stream.avail_out != 0) {
      inflateEnd(&stream);
      throw std::runtime_error(path + " ends before its gzip stream does (cut short?); restore it");
    }
  }
  inflateEnd(&stream);
  return out;
}

std::string gzip(const std::string& plain, const std::string& path) {
  z_stream stream{};
  // windowBits 15 + 16: a gzip header; level 9, as `gzip -9`.
  if (deflateInit2(&stream, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw std::runtime_error("cannot start zlib to write " + path);
  std::string out(deflateBound(&stream, static_cast<uLong>(plain.size())), '\0');
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(plain.data()));
  stream.avail_in = static_cast<uInt>(plain.size());
  stream.next_out = reinterpret_cast<Bytef*>(out.data());
  stream.avail_out = static_cast<uInt>(out.size());
  const int status = deflate(&stream, Z_FINISH);
  deflateEnd(&stream);
  if (status != Z_STREAM_END) throw std::runtime_error("cannot gzip " + path);
  out.resize(stream.total_out);
  return out;
}
#endif
}  // namespace

bool gzipped_path(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

bool gzip_available() {
#ifdef COPYTASK_HAVE_ZLIB
  return true;
#else
  return false;
#endif
}

std::string stored_file(const std::string& dir, const std::string& name) {
  const fs::path plain = fs::path(dir) / name;
  if (fs::exists(plain)) return plain.string();
  const fs::path packed = fs::path(dir) / (name + ".gz");
  return fs::exists(packed) ? packed.string() : std::string();
}

std::string file_read_stored(const std::string& path) {
  const std::string bytes = file_read(path);
  if (!gzipped_path(path)) return bytes;
#ifdef COPYTASK_HAVE_ZLIB
  return gunzip(bytes, path);
#else
  throw std::runtime_error(path + " is gzipped and this build has no zlib: gunzip it (gunzip -k " + path +
                           "), or build copytask where zlib's headers are installed (Debian: zlib1g-dev)");
#endif
}

void file_write_gzipped_atomic(const std::string& path, const std::string& content) {
#ifdef COPYTASK_HAVE_ZLIB
  file_write_atomic(path, gzip(content, path));
#else
  (void)content;
  throw std::runtime_error("cannot write " + path + ": this build has no zlib (Debian: install zlib1g-dev and rebuild)");
#endif
}

}  // namespace copytask
