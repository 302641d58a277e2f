#include "src/common/npz_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace pstrain {
namespace {

constexpr uint64_t kZipLimit = 0xFFFFFFFFull;           // no zip64: offsets and sizes are u32
constexpr uint16_t kDosDate = (0 << 9) | (1 << 5) | 1;  // 1980-01-01: reproducible output

void Le(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(v >> (8 * i)));
}

size_t ItemSize(NpyType t) { return t == NpyType::kFloat32 ? 4 : t == NpyType::kInt64 ? 8 : 1; }

// The local header of a stored (uncompressed) entry.
std::string LocalHeader(const std::string& name, uint32_t crc, uint64_t size) {
  std::string h;
  Le(&h, 0x04034b50, 4);
  Le(&h, 20, 2);  // version needed
  Le(&h, 0, 2);   // flags
  Le(&h, 0, 2);   // stored
  Le(&h, 0, 2);   // time
  Le(&h, kDosDate, 2);
  Le(&h, crc, 4);
  Le(&h, size, 4);
  Le(&h, size, 4);
  Le(&h, name.size(), 2);
  Le(&h, 0, 2);  // extra
  return h + name;
}

}  // namespace

std::string NpyHeader(NpyType type, const std::vector<int64_t>& shape) {
  std::string dims;
  for (int64_t d : shape) dims += fmt::format("{}, ", d);
  if (shape.size() > 1) dims.resize(dims.size() - 2);  // (3,) but (3, 4)
  if (shape.size() == 1) dims.pop_back();
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}",
                                 type == NpyType::kFloat32 ? "<f4"
                                 : type == NpyType::kInt64 ? "<i8"
                                                           : "|u1",
                                 dims);
  const size_t unpadded = 10 + dict.size() + 1;  // magic+version+length, dict, '\n'
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string h("\x93NUMPY\x01\x00", 8);
  Le(&h, dict.size(), 2);
  return h + dict;
}

StatusOr<std::unique_ptr<NpzWriter>> NpzWriter::Create(const std::string& path) {
  const std::string tmp = fmt::format("{}.tmp-{}", path, ::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wbe");
  if (f == nullptr)
    return Internal(fmt::format("{}: create: {}", tmp, std::generic_category().message(errno)));
  return std::unique_ptr<NpzWriter>(new NpzWriter(path, tmp, f));
}

NpzWriter::~NpzWriter() {
  if (f_ != nullptr) std::fclose(f_);
  if (!finished_) ::unlink(tmp_.c_str());
}

Status NpzWriter::Error(const char* op) const {
  return Internal(fmt::format("{}: {}: {}", tmp_, op, std::generic_category().message(errno)));
}

Status NpzWriter::Put(const void* data, size_t bytes) {
  if (written_ + bytes > kZipLimit)
    return FailedPrecondition(fmt::format(
        "{}: the export would pass 4 GiB, which .npz without zip64 cannot hold", path_));
  if (bytes > 0 && std::fwrite(data, 1, bytes, f_) != bytes) return Error("write");
  written_ += bytes;
  return Status::OK();
}

Status NpzWriter::BeginArray(const std::string& name, NpyType type,
                             const std::vector<int64_t>& shape) {
  if (in_array_ || finished_) return Internal("NpzWriter: BeginArray inside an array");
  if (name.empty() || name.size() > 1000) return InvalidArgument("array name empty or too long");
  uint64_t elements = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d > 0 && elements > kZipLimit / static_cast<uint64_t>(d)))
      return InvalidArgument(fmt::format("array '{}': bad or too large shape", name));
    elements *= static_cast<uint64_t>(d);
  }
  Entry e;
  e.file_name = name + ".npy";
  e.offset = written_;
  const std::string npy = NpyHeader(type, shape);
  // Sizes and CRC are patched in by EndArray.
  const std::string local = LocalHeader(e.file_name, 0, 0);
  PSTRAIN_RETURN_IF_ERROR(Put(local.data(), local.size()));
  PSTRAIN_RETURN_IF_ERROR(Put(npy.data(), npy.size()));
  e.crc = static_cast<uint32_t>(crc32(0, reinterpret_cast<const Bytef*>(npy.data()), npy.size()));
  e.size = npy.size();
  entries_.push_back(std::move(e));
  expected_ = elements * ItemSize(type);
  in_array_ = true;
  return Status::OK();
}

Status NpzWriter::Write(const void* data, size_t bytes) {
  if (!in_array_ || bytes > expected_)
    return Internal(fmt::format("NpzWriter: {} bytes more than the array holds", bytes));
  Entry& e = entries_.back();
  const auto* p = static_cast<const Bytef*>(data);
  for (size_t done = 0; done < bytes;) {  // crc32 takes a 32-bit length
    const auto chunk = static_cast<uInt>(std::min<size_t>(bytes - done, 1u << 30));
    e.crc = static_cast<uint32_t>(crc32(e.crc, p + done, chunk));
    done += chunk;
  }
  PSTRAIN_RETURN_IF_ERROR(Put(data, bytes));
  e.size += bytes;
  expected_ -= bytes;
  return Status::OK();
}

Status NpzWriter::EndArray() {
  if (!in_array_ || expected_ != 0)
    return Internal(fmt::format("NpzWriter: array ended {} bytes short", expected_));
  in_array_ = false;
  const Entry& e = entries_.back();
  const std::string local = LocalHeader(e.file_name, e.crc, e.size);
  if (std::fflush(f_) != 0) return Error("write");
  if (::pwrite(fileno(f_), local.data(), local.size(), static_cast<off_t>(e.offset)) !=
      static_cast<ssize_t>(local.size()))
    return Error("write");
  return Status::OK();
}

Status NpzWriter::Finish() {
  if (in_array_ || finished_) return Internal("NpzWriter: Finish inside an array");
  const uint64_t directory = written_;
  std::string cd;
  for (const Entry& e : entries_) {
    Le(&cd, 0x02014b50, 4);
    Le(&cd, 20, 2);  // made by
    Le(&cd, 20, 2);  // needed
    Le(&cd, 0, 2);
    Le(&cd, 0, 2);
    Le(&cd, 0, 2);
    Le(&cd, kDosDate, 2);
    Le(&cd, e.crc, 4);
    Le(&cd, e.size, 4);
    Le(&cd, e.size, 4);
    Le(&cd, e.file_name.size(), 2);
    Le(&cd, 0, 2);  // extra
    Le(&cd, 0, 2);  // comment
    Le(&cd, 0, 2);  // disk
    Le(&cd, 0, 2);  // internal attributes
    Le(&cd, 0, 4);  // external attributes
    Le(&cd, e.offset, 4);
    cd += e.file_name;
  }
  if (entries_.size() > 0xFFFF) return FailedPrecondition(path_ + ": more than 65535 arrays");
  std::string end;
  Le(&end, 0x06054b50, 4);
  Le(&end, 0, 2);
  Le(&end, 0, 2);
  Le(&end, entries_.size(), 2);
  Le(&end, entries_.size(), 2);
  Le(&end, cd.size(), 4);
  Le(&end, directory, 4);
  Le(&end, 0, 2);
  PSTRAIN_RETURN_IF_ERROR(Put(cd.data(), cd.size()));
  PSTRAIN_RETURN_IF_ERROR(Put(end.data(), end.size()));
  if (std::fflush(f_) != 0 || ::fsync(fileno(f_)) != 0) return Error("write");
  const int closed = std::fclose(f_);
  f_ = nullptr;
  if (closed != 0) return Error("close");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0) return Error("rename");
  finished_ = true;
  return Status::OK();
}

}  // namespace pstrain
