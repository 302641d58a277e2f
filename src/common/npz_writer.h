// NpzWriter: writes numpy's .npz format (an uncompressed zip of .npy files,
// what numpy.savez writes), so a file reads back with numpy.load alone.
// Arrays are streamed: BeginArray, any number of Write calls that together
// give exactly the array's bytes (little-endian, C order), EndArray. Nothing
// is held in memory but a small header per array.
//
// The file is written to "<path>.tmp-<pid>" and renamed over `path` by
// Finish (after an fsync), so readers never see a partial file; a writer
// destroyed before Finish removes its temporary file.
//
// Limits: no zip64, so the whole file must stay under 4 GiB (an error says
// so; it is not silently truncated). Not thread-safe.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

enum class NpyType { kFloat32, kInt64, kUint8 };

class NpzWriter {
 public:
  static StatusOr<std::unique_ptr<NpzWriter>> Create(const std::string& path);
  ~NpzWriter();

  // `name` becomes "<name>.npy" in the zip (numpy's key is `name`).
  Status BeginArray(const std::string& name, NpyType type, const std::vector<int64_t>& shape);
  Status Write(const void* data, size_t bytes);
  Status EndArray();
  // Writes the zip's directory, syncs and renames into place.
  Status Finish();

 private:
  struct Entry {
    std::string file_name;
    uint32_t crc = 0;
    uint64_t size = 0;
    uint64_t offset = 0;  // of its local header
  };
  NpzWriter(std::string path, std::string tmp, std::FILE* f)
      : path_(std::move(path)), tmp_(std::move(tmp)), f_(f) {}
  Status Put(const void* data, size_t bytes);  // to the file, no CRC
  Status Error(const char* op) const;

  std::string path_, tmp_;
  std::FILE* f_;
  std::vector<Entry> entries_;
  bool in_array_ = false;
  uint64_t expected_ = 0;  // bytes the open array still needs (data only)
  uint64_t written_ = 0;   // file offset
  bool finished_ = false;
};

// The .npy header of an array (magic, version 1.0, the dict, padding to 64).
std::string NpyHeader(NpyType type, const std::vector<int64_t>& shape);

}  // namespace pstrain
