// The disk tier of a server's embedding tables in a checkpoint.
//
// The rows on disk are not copied into the shard file: RocksDB's own
// checkpoint (embedding/row_store.h: hard links, cheap whatever the size)
// goes to <step dir>/server-<rank>-store/, and the shard file, written after
// it, lists every file there with its size and CRC-32 ("store" section,
// roles/checkpoint/shard_file.h). The MANIFEST vouches for the shard file as for any
// other, so it vouches for the store through that list; a resume checks each
// store file against it before restoring, and a damaged or missing one is an
// error naming the file.
//
// Checksums cost a read of every byte, so they are remembered per file
// (device, inode, size, mtime): RocksDB's table files never change once
// written, and a checkpoint hard-links them, so each is read once in the
// job, however many checkpoints list it.
//
// Threads: a StoreDigests belongs to one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "roles/checkpoint/step_files.h"
#include "src/common/status.h"

namespace pstrain {

struct StoreFile {
  std::string name;  // inside the store's checkpoint directory
  uint64_t size = 0;
  uint32_t crc = 0;
};

class StoreDigests {
 public:
  // Every regular file directly in `dir`, by name, with size and CRC-32.
  // A subdirectory or anything else that is not a plain file is an error.
  StatusOr<std::vector<StoreFile>> List(const std::string& dir);

 private:
  using Key = std::tuple<uint64_t, uint64_t, uint64_t, int64_t>;  // dev, ino, size, mtime ns
  std::map<Key, uint32_t> known_;
};

// Checks that `dir` holds exactly `files` (no file missing, none extra),
// each with its size and CRC-32; the error names the file.
Status CheckStoreFiles(const std::string& dir, const std::vector<StoreFile>& files);

// The list as text, one "file <name> <size> <crc32 hex>" line each, and back;
// Parse refuses anything else (it comes from a file), naming the line.
std::string FormatStoreFiles(const std::vector<StoreFile>& files);
StatusOr<std::vector<StoreFile>> ParseStoreFiles(const std::string& text);

}  // namespace pstrain
