#include "src/common/checkpoint_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string_view>
#include <system_error>

#include "src/common/settings_text.h"

namespace pstrain {
namespace {

constexpr char kMagic[8] = {'P', 'S', 'T', 'R', 'C', 'K', 'P', 'T'};
constexpr uint64_t kHeaderBytes = 16;      // magic, version, section count
constexpr uint64_t kMinSectionBytes = 12;  // name length, byte length
constexpr uint64_t kTrailerBytes = 4;      // CRC-32
constexpr size_t kScratchBytes = 1 << 20;  // for verifying without keeping
constexpr char kManifestName[] = "MANIFEST";

Status OsError(const std::string& path, const char* op, int err) {
  std::string m = fmt::format("{}: {}: {}", path, op, std::generic_category().message(err));
  return err == ENOENT ? NotFound(std::move(m)) : Internal(std::move(m));
}

uint32_t Crc(uint32_t crc, const void* data, size_t n) {
  // crc32_z(crc, nullptr, 0) would return the initial value, not `crc`.
  return n == 0 ? crc : crc32_z(crc, static_cast<const Bytef*>(data), n);
}

void PutLE(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

uint64_t GetLE(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{p[i]} << (8 * i);
  return v;
}

std::string ParentDir(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

Status SyncDir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return OsError(dir, "open directory", errno);
  Status s = ::fsync(fd) == 0 ? Status::OK() : OsError(dir, "fsync directory", errno);
  ::close(fd);
  return s;
}

// mkdir -p; each new directory is made durable by syncing its parent.
Status MakeDirs(const std::string& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) == 0) {
    return S_ISDIR(st.st_mode) ? Status::OK() : FailedPrecondition(dir + ": not a directory");
  }
  std::string parent = ParentDir(dir);
  if (parent != dir) PSTRAIN_RETURN_IF_ERROR(MakeDirs(parent));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return OsError(dir, "mkdir", errno);
  return SyncDir(parent);
}

// Writes the format to `f`, checksumming as it goes. stdio buffers the small
// fields; glibc hands a payload larger than its buffer straight to write(), so
// sections are not copied. False on a write error (errno says why).
bool WriteSections(std::FILE* f, const std::vector<SectionView>& sections, uint32_t* crc) {
  *crc = 0;
  auto put = [&](const void* data, size_t n) {
    *crc = Crc(*crc, data, n);
    return n == 0 || std::fwrite(data, 1, n, f) == n;
  };
  std::string head(kMagic, sizeof kMagic);
  PutLE(kCheckpointFormatVersion, 4, &head);
  PutLE(sections.size(), 4, &head);
  bool ok = put(head.data(), head.size());
  for (const SectionView& s : sections) {
    head.clear();
    PutLE(s.name.size(), 4, &head);
    head += s.name;
    PutLE(s.size, 8, &head);
    ok = ok && put(head.data(), head.size()) && put(s.data, s.size);
  }
  std::string trailer;
  PutLE(*crc, 4, &trailer);
  return ok && std::fwrite(trailer.data(), 1, 4, f) == 4 && std::fflush(f) == 0;
}

// Reads a file front to back, checksumming as it goes. Every length is checked
// against what is left of the file (Need) before anything is allocated or read.
class ChecksumReader {
 public:
  explicit ChecksumReader(const std::string& path) : path_(path) {}
  ~ChecksumReader() {
    if (f_ != nullptr) std::fclose(f_);
  }
  Status Open() {
    f_ = std::fopen(path_.c_str(), "rbe");
    if (f_ == nullptr) return OsError(path_, "open", errno);
    struct stat st;
    if (::fstat(fileno(f_), &st) != 0) return OsError(path_, "stat", errno);
    if (!S_ISREG(st.st_mode)) return InvalidArgument(path_ + ": not a regular file");
    size_ = static_cast<uint64_t>(st.st_size);
    if (size_ >= kHeaderBytes + kTrailerBytes) return Status::OK();
    return InvalidArgument(fmt::format(
        "{}: truncated at offset {}: shorter than a header and checksum", path_, size_));
  }
  uint64_t size() const { return size_; }
  uint64_t offset() const { return offset_; }
  uint64_t left() const { return size_ - kTrailerBytes - offset_; }  // before the CRC
  uint32_t crc() const { return crc_; }

  // "truncated at offset 1234: section 3 ('m') claims 4096 bytes, 100 left".
  Status Need(uint64_t n, const std::string& what) const {
    if (n <= left()) return Status::OK();
    return InvalidArgument(fmt::format("{}: truncated at offset {}: {} {} bytes, {} left", path_,
                                       offset_, what, n, left()));
  }
  Status Read(void* dst, size_t n, bool checksum = true) {
    if (n > 0 && std::fread(dst, 1, n, f_) != n) {
      if (std::ferror(f_)) return OsError(path_, "read", errno);
      return InvalidArgument(path_ + ": file shrank while being read");
    }
    if (checksum) crc_ = Crc(crc_, dst, n);
    offset_ += n;
    return Status::OK();
  }
  // A little-endian integer field of 4 or 8 bytes, checked to be there.
  Status Field(int bytes, const std::string& what, uint64_t* v) {
    uint8_t b[8];
    PSTRAIN_RETURN_IF_ERROR(Need(bytes, what + " needs"));
    PSTRAIN_RETURN_IF_ERROR(Read(b, bytes));
    *v = GetLE(b, bytes);
    return Status::OK();
  }

 private:
  const std::string& path_;
  std::FILE* f_ = nullptr;
  uint64_t size_ = 0, offset_ = 0;
  uint32_t crc_ = 0;
};

struct FileInfo {
  uint64_t size = 0;
  uint32_t crc = 0;
};

// Verifies `path` and, when `sections` is non-null, keeps its contents.
Status ScanFile(const std::string& path, std::vector<Section>* sections, FileInfo* info) {
  ChecksumReader r(path);
  PSTRAIN_RETURN_IF_ERROR(r.Open());
  auto bad = [&](const std::string& m) { return InvalidArgument(path + ": " + m); };
  uint8_t magic[sizeof kMagic];
  PSTRAIN_RETURN_IF_ERROR(r.Read(magic, sizeof magic));
  if (std::memcmp(magic, kMagic, sizeof kMagic) != 0) {
    return bad("not a checkpoint file (bad magic at offset 0)");
  }
  uint64_t version = 0, count = 0, name_len = 0, size = 0;
  PSTRAIN_RETURN_IF_ERROR(r.Field(4, "version", &version));
  PSTRAIN_RETURN_IF_ERROR(r.Field(4, "section count", &count));
  if (version != kCheckpointFormatVersion) {
    return bad(fmt::format("unsupported format version {} at offset 8", version));
  }
  PSTRAIN_RETURN_IF_ERROR(r.Need(count * kMinSectionBytes, fmt::format("{} sections need", count)));
  if (sections != nullptr) sections->reserve(count);
  std::vector<uint8_t> scratch;
  for (uint64_t i = 0; i < count; ++i) {
    std::string what = fmt::format("section {}", i);
    PSTRAIN_RETURN_IF_ERROR(r.Field(4, what + " name length", &name_len));
    PSTRAIN_RETURN_IF_ERROR(r.Need(name_len, what + " name claims"));
    std::string name(name_len, '\0');
    PSTRAIN_RETURN_IF_ERROR(r.Read(name.data(), name_len));
    what += " ('" + name + "')";
    PSTRAIN_RETURN_IF_ERROR(r.Field(8, what + " byte length", &size));
    PSTRAIN_RETURN_IF_ERROR(r.Need(size, what + " claims"));
    if (sections != nullptr) {
      sections->push_back(Section{std::move(name), std::vector<uint8_t>(size)});
      PSTRAIN_RETURN_IF_ERROR(r.Read(sections->back().bytes.data(), size));
      continue;
    }
    scratch.resize(std::min<uint64_t>(size, kScratchBytes));
    for (uint64_t done = 0; done < size; done += scratch.size()) {  // verify, don't keep
      PSTRAIN_RETURN_IF_ERROR(
          r.Read(scratch.data(), std::min<uint64_t>(size - done, scratch.size())));
    }
  }
  if (r.left() != 0) {
    return bad(fmt::format("{} unexpected bytes at offset {} after the last section", r.left(),
                           r.offset()));
  }
  uint32_t contents = r.crc();
  uint8_t trailer[kTrailerBytes];
  PSTRAIN_RETURN_IF_ERROR(r.Read(trailer, sizeof trailer, /*checksum=*/false));
  uint32_t stored = static_cast<uint32_t>(GetLE(trailer, 4));
  if (stored != contents) {
    return bad(
        fmt::format("checksum mismatch (file says 0x{:08x}, contents 0x{:08x})", stored, contents));
  }
  if (info != nullptr) *info = FileInfo{r.size(), stored};
  return Status::OK();
}

std::string StepDirName(int64_t step) { return fmt::format("step-{:012}", step); }

// A whole non-negative number, nothing before or after it.
template <typename T>
bool ParseNumber(std::string_view s, T* out, int base = 10) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out, base);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && s[0] != '-';
}

std::vector<std::string_view> Split(std::string_view s, char sep) {
  std::vector<std::string_view> parts;
  for (size_t at = 0, end = 0; end != s.npos; at = end + 1) {
    end = s.find(sep, at);
    parts.push_back(s.substr(at, end == s.npos ? s.npos : end - at));
  }
  return parts;
}

struct ManifestEntry {
  std::string name;
  uint64_t size;
  uint32_t crc;
};

Status ReadManifest(const std::string& path, int64_t step, std::vector<ManifestEntry>* entries,
                    std::string* job) {
  auto sections = ReadCheckpointFile(path);
  if (sections.status().code() == StatusCode::kNotFound) {
    return NotFound(path + ": missing, the checkpoint is incomplete");
  }
  if (!sections.ok()) return sections.status();
  auto bad = [&](const std::string& m) { return InvalidArgument(path + ": " + m); };
  const size_t count = sections->size();
  if (count < 1 || count > 2 || (*sections)[0].name != "manifest" ||
      (count == 2 && (*sections)[1].name != "job")) {
    return bad("expected a section named 'manifest', then at most one named 'job'");
  }
  if (count == 2) job->assign((*sections)[1].bytes.begin(), (*sections)[1].bytes.end());
  const std::vector<uint8_t>& text = (*sections)[0].bytes;
  std::vector<std::string_view> lines =
      Split(std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), '\n');
  if (lines.back().empty()) lines.pop_back();
  int64_t listed_step = -1;
  if (lines.empty() || lines[0].substr(0, 5) != "step " ||
      !ParseNumber(lines[0].substr(5), &listed_step) || listed_step != step) {
    return bad(fmt::format("does not begin with 'step {}'", step));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<std::string_view> f = Split(lines[i], ' ');
    ManifestEntry e{};
    if (f.size() != 4 || f[0] != "file" || !ValidCheckpointFileName(f[1]) ||
        !ParseNumber(f[2], &e.size) || f[3].size() != 8 || !ParseNumber(f[3], &e.crc, 16)) {
      return bad(fmt::format("line {} is not 'file <name> <size> <crc32>'", i + 1));
    }
    e.name = std::string(f[1]);
    entries->push_back(std::move(e));
  }
  return entries->empty() ? bad("lists no files") : Status::OK();
}

// Whether step `step`'s MANIFEST names a job other than `job` (reads only
// the MANIFEST: a partial or damaged step is nobody else's).
bool IsAnotherJobs(const std::string& dir, int64_t step, const std::string& job) {
  std::vector<ManifestEntry> entries;
  std::string written_by;
  const std::string path = CheckpointStepDir(dir, step) + "/" + kManifestName;
  return ReadManifest(path, step, &entries, &written_by).ok() && !written_by.empty() &&
         written_by != job;
}

// The steps under `dir` (names "step-" + canonical digits), newest first.
Status ListSteps(const std::string& dir, std::vector<int64_t>* steps) {
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    int err = errno;
    if (err == ENOENT || err == ENOTDIR) return NotFound(dir + ": no such checkpoint directory");
    return OsError(dir, "list", err);
  }
  while (const dirent* e = ::readdir(d)) {
    std::string_view name(e->d_name);
    int64_t step = 0;
    if (name.substr(0, 5) == "step-" && ParseNumber(name.substr(5), &step) &&
        name == StepDirName(step)) {
      steps->push_back(step);
    }
  }
  ::closedir(d);
  std::sort(steps->rbegin(), steps->rend());
  return Status::OK();
}

}  // namespace

Status VerifyStep(const std::string& dir, int64_t step, CheckpointRef* ref,
                  const std::string* job) {
  const std::string step_dir = CheckpointStepDir(dir, step);
  std::vector<ManifestEntry> entries;
  std::string written_by;
  PSTRAIN_RETURN_IF_ERROR(
      ReadManifest(step_dir + "/" + kManifestName, step, &entries, &written_by));
  if (job != nullptr && !written_by.empty() && written_by != *job)
    return FailedPrecondition(
        fmt::format("{}: another job's checkpoint ({})", step_dir,
                    DescribeConfigDifference(written_by, "there", *job, "in this job")));
  *ref = CheckpointRef{step, step_dir, {}, written_by};
  for (const ManifestEntry& e : entries) {
    const std::string path = step_dir + "/" + e.name;
    FileInfo info;
    PSTRAIN_RETURN_IF_ERROR(ScanFile(path, nullptr, &info));
    if (info.size != e.size || info.crc != e.crc) {
      return InvalidArgument(
          fmt::format("{}: {} bytes with CRC 0x{:08x}, MANIFEST says {} bytes with CRC 0x{:08x}",
                      path, info.size, info.crc, e.size, e.crc));
    }
    ref->files.push_back(e.name);
  }
  return Status::OK();
}

Status WriteCheckpointFile(const std::string& path, const std::vector<SectionView>& sections,
                           uint32_t* crc) {
  if (sections.size() > UINT32_MAX) return InvalidArgument(path + ": too many sections");
  for (const SectionView& s : sections) {
    if (s.name.size() > UINT32_MAX) return InvalidArgument(path + ": section name too long");
  }
  const std::string dir = ParentDir(path);
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");
  if (f == nullptr) return OsError(tmp, "create", errno);
  uint32_t file_crc = 0;
  Status s = WriteSections(f, sections, &file_crc) ? Status::OK() : OsError(tmp, "write", errno);
  if (s.ok() && ::fsync(fileno(f)) != 0) s = OsError(tmp, "fsync", errno);
  if (std::fclose(f) != 0 && s.ok()) s = OsError(tmp, "close", errno);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = OsError(tmp, "rename", errno);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  if (crc != nullptr) *crc = file_crc;
  return SyncDir(dir);
}

bool ValidCheckpointFileName(std::string_view name) {
  if (name.empty() || name == "." || name == ".." || name == kManifestName) return false;
  return std::none_of(name.begin(), name.end(), [](char c) {
    return c == '/' || static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
  });
}

SectionsByName ByName(const std::vector<Section>& sections) {
  SectionsByName by_name;
  for (const Section& s : sections) by_name[s.name] = &s.bytes;
  return by_name;
}

StatusOr<const std::vector<uint8_t>*> FindSection(const SectionsByName& sections,
                                                  const std::string& name, uint64_t bytes) {
  auto it = sections.find(name);
  if (it == sections.end())
    return InvalidArgument(fmt::format("no section '{}' (was the model changed?)", name));
  if (it->second->size() != bytes)
    return InvalidArgument(fmt::format("section '{}' has {} bytes, the model needs {}", name,
                                       it->second->size(), bytes));
  return it->second;
}

StatusOr<std::vector<Section>> ReadCheckpointFile(const std::string& path) {
  std::vector<Section> sections;
  PSTRAIN_RETURN_IF_ERROR(ScanFile(path, &sections, nullptr));
  return sections;
}

std::string CheckpointStepDir(const std::string& dir, int64_t step) {
  assert(step >= 0);
  return dir + "/" + StepDirName(step);
}

Status WriteManifest(const std::string& dir, int64_t step, const std::vector<std::string>& files,
                     const std::string& job) {
  const std::string context = fmt::format("write manifest of step {}", step);
  if (step < 0) return InvalidArgument(context + ": negative step");
  if (files.empty()) return InvalidArgument(context + ": no files to list");
  const std::string step_dir = CheckpointStepDir(dir, step);
  std::string text = fmt::format("step {}\n", step);
  for (const std::string& name : files) {
    if (!ValidCheckpointFileName(name) || std::count(files.begin(), files.end(), name) > 1) {
      return InvalidArgument(fmt::format("{}: cannot list file name '{}'", context, name));
    }
    FileInfo info;
    Status s = ScanFile(step_dir + "/" + name, nullptr, &info);
    if (!s.ok()) return s.WithContext(context);
    text += fmt::format("file {} {} {:08x}\n", name, info.size, info.crc);
  }
  std::vector<SectionView> sections = {SectionView{"manifest", text.data(), text.size()}};
  if (!job.empty()) sections.push_back(SectionView{"job", job.data(), job.size()});
  return WriteCheckpointFile(step_dir + "/" + kManifestName, sections);
}

StatusOr<CheckpointRef> FindNewestCheckpoint(const std::string& dir,
                                             std::vector<std::string>* skipped,
                                             const std::string* job) {
  std::vector<int64_t> steps;
  PSTRAIN_RETURN_IF_ERROR(ListSteps(dir, &steps));
  for (int64_t step : steps) {
    CheckpointRef ref;
    Status s = VerifyStep(dir, step, &ref, job);
    if (s.ok()) return ref;
    if (skipped != nullptr) skipped->push_back(s.message());
  }
  return NotFound(fmt::format("{}: no complete checkpoint ({} incomplete or damaged steps)", dir,
                              steps.size()));
}

Status CheckWritableDirectory(const std::string& dir) {
  PSTRAIN_RETURN_IF_ERROR(MakeDirs(dir));
  std::string probe = dir + "/.pstrain-write-test-XXXXXX";
  int fd = ::mkstemp(probe.data());
  if (fd < 0)
    return FailedPrecondition(fmt::format("{}: not writable: {}", dir, std::strerror(errno)));
  ::close(fd);
  ::unlink(probe.c_str());
  return Status::OK();
}

StatusOr<int64_t> NewestStepDirectory(const std::string& dir) {
  std::vector<int64_t> steps;
  Status listed = ListSteps(dir, &steps);
  if (listed.code() == StatusCode::kNotFound) return int64_t{-1};
  PSTRAIN_RETURN_IF_ERROR(listed);
  return steps.empty() ? -1 : steps.front();
}

Status PruneCheckpoints(const std::string& dir, int keep, const std::string* job,
                        const std::vector<int64_t>& keep_also) {
  if (keep < 1) return InvalidArgument(fmt::format("prune checkpoints: keep {} < 1", keep));
  std::vector<int64_t> steps;
  Status listed = ListSteps(dir, &steps);
  if (listed.code() == StatusCode::kNotFound) return Status::OK();
  PSTRAIN_RETURN_IF_ERROR(listed);
  int complete = 0;
  for (int64_t step : steps) {
    if (job != nullptr && IsAnotherJobs(dir, step, *job)) continue;  // never ours to delete
    if (std::find(keep_also.begin(), keep_also.end(), step) != keep_also.end()) continue;
    if (complete < keep) {
      CheckpointRef ref;
      if (VerifyStep(dir, step, &ref).ok()) {
        ++complete;
        continue;
      }
      if (complete == 0) continue;  // newer than every complete step: may still be being written
    }
    std::error_code ec;
    std::filesystem::remove_all(CheckpointStepDir(dir, step), ec);
    if (ec && ec != std::errc::no_such_file_or_directory)
      return Internal(CheckpointStepDir(dir, step) + ": remove: " + ec.message());
  }
  return Status::OK();
}

}  // namespace pstrain
