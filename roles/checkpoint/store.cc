#include "roles/checkpoint/store.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <sstream>

#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

Status FileCrc(const std::string& path, uint64_t size, uint32_t* crc) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Internal(fmt::format("{}: {}", path, std::strerror(errno)));
  std::vector<uint8_t> buffer(1 << 20);
  uLong sum = crc32_z(0, nullptr, 0);
  uint64_t total = 0;
  while (true) {
    ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return Internal(fmt::format("{}: {}", path, std::strerror(err)));
    }
    if (n == 0) break;
    sum = crc32_z(sum, buffer.data(), static_cast<size_t>(n));
    total += static_cast<uint64_t>(n);
  }
  ::close(fd);
  if (total != size)
    return Internal(fmt::format("{}: {} bytes read, the file had {}", path, total, size));
  *crc = static_cast<uint32_t>(sum);
  return Status::OK();
}

StatusOr<std::vector<std::string>> Names(const std::string& dir) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return NotFound(fmt::format("{}: {}", dir, std::strerror(errno)));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

StatusOr<std::vector<StoreFile>> StoreDigests::List(const std::string& dir) {
  auto names = Names(dir);
  if (!names.ok()) return names.status();
  std::vector<StoreFile> files;
  for (const std::string& name : *names) {
    const std::string path = dir + "/" + name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0)
      return Internal(fmt::format("{}: {}", path, std::strerror(errno)));
    if (!S_ISREG(st.st_mode) || !ValidCheckpointFileName(name))
      return FailedPrecondition(fmt::format("{}: not a plain file a store writes", path));
    StoreFile f{name, static_cast<uint64_t>(st.st_size), 0};
    const Key key{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), f.size,
                  static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    auto known = known_.find(key);
    if (known != known_.end()) {
      f.crc = known->second;
    } else {
      PSTRAIN_RETURN_IF_ERROR(FileCrc(path, f.size, &f.crc));
      known_[key] = f.crc;
    }
    files.push_back(std::move(f));
  }
  return files;
}

Status CheckStoreFiles(const std::string& dir, const std::vector<StoreFile>& files) {
  auto names = Names(dir);
  if (!names.ok()) return names.status();
  for (const StoreFile& f : files) {
    const std::string path = dir + "/" + f.name;
    struct stat st;
    if (::lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return InvalidArgument(fmt::format("{}: missing", path));
    if (static_cast<uint64_t>(st.st_size) != f.size)
      return InvalidArgument(
          fmt::format("{}: {} bytes, the checkpoint lists {}", path, st.st_size, f.size));
    uint32_t crc = 0;
    PSTRAIN_RETURN_IF_ERROR(FileCrc(path, f.size, &crc));
    if (crc != f.crc)
      return InvalidArgument(fmt::format(
          "{}: checksum mismatch (listed 0x{:08x}, contents 0x{:08x})", path, f.crc, crc));
  }
  for (const std::string& name : *names) {
    const bool listed =
        std::any_of(files.begin(), files.end(), [&](const StoreFile& f) { return f.name == name; });
    if (!listed)
      return InvalidArgument(fmt::format("{}/{}: not listed in the checkpoint", dir, name));
  }
  return Status::OK();
}

std::string FormatStoreFiles(const std::vector<StoreFile>& files) {
  std::string text;
  for (const StoreFile& f : files)
    text += fmt::format("file {} {} {:08x}\n", f.name, f.size, f.crc);
  return text;
}

StatusOr<std::vector<StoreFile>> ParseStoreFiles(const std::string& text) {
  std::vector<StoreFile> files;
  std::istringstream in(text);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    auto bad = [&] {
      return InvalidArgument(
          fmt::format("store file list, line {}: not 'file <name> <size> <crc>'", n));
    };
    std::istringstream fields(line);
    std::string word, name, size, crc, extra;
    if (!(fields >> word >> name >> size >> crc) || (fields >> extra) || word != "file" ||
        !ValidCheckpointFileName(name))
      return bad();
    StoreFile f{name, 0, 0};
    auto s = std::from_chars(size.data(), size.data() + size.size(), f.size);
    auto c = std::from_chars(crc.data(), crc.data() + crc.size(), f.crc, 16);
    if (s.ec != std::errc() || s.ptr != size.data() + size.size() || c.ec != std::errc() ||
        c.ptr != crc.data() + crc.size() || crc.size() != 8)
      return bad();
    files.push_back(std::move(f));
  }
  return files;
}

}  // namespace pstrain
