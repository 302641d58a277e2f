// Checkpoint files: their on-disk format, atomic writes, and finding the
// newest checkpoint that is complete and undamaged.
//
// A checkpoint of step N is a directory <dir>/step-<N, 12 digits>/ holding one
// file per participant (each parameter server's shard, worker 0's weights),
// plus a MANIFEST written last, once every participant has written its file.
// The MANIFEST lists each file with its size and CRC-32, so a step is complete
// exactly when its MANIFEST verifies and every listed file matches it. A step
// without a MANIFEST is partial (a crash mid-checkpoint) and is never resumed.
//
// File format (all integers little-endian, fixed width):
//   "PSTRCKPT"            8 bytes, magic
//   version               u32, kCheckpointFormatVersion
//   section count         u32
//   per section:          name length u32, name bytes, byte length u64, bytes
//   CRC-32                u32, zlib crc32 of every byte before it
//
// Every write goes to "<path>.tmp-<pid>", is fsynced, renamed over <path>, and
// the directory is fsynced, so a reader sees the old file, the new file, or
// none, never a torn one; a leftover .tmp file is never listed or read.
//
// Thread safety: the functions share no state; calls on different paths may
// run concurrently. Two threads of one process must not write the same path at
// once (they would share the .tmp name). Errors never throw or abort: damaged
// or hostile files yield a Status naming the file and the byte offset.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/status.h"

namespace pstrain {

inline constexpr uint32_t kCheckpointFormatVersion = 1;

// A named blob to write ("conv1.weight/p0/value", "conv1.weight/p0/m",
// "meta"). Borrowed: `data` must stay valid for the call; may be null when
// `size` is 0.
struct SectionView {
  std::string name;
  const void* data;
  size_t size;
};

// A named blob read back; owns its bytes.
struct Section {
  std::string name;
  std::vector<uint8_t> bytes;
};

// A file's sections by name, borrowing their bytes (from ByName's
// argument, which must outlive it).
using SectionsByName = std::map<std::string, const std::vector<uint8_t>*>;
SectionsByName ByName(const std::vector<Section>& sections);
// Section `name`, which must hold exactly `bytes` bytes; the error names
// the section and asks whether the model changed (the caller adds the file).
StatusOr<const std::vector<uint8_t>*> FindSection(const SectionsByName& sections,
                                                  const std::string& name, uint64_t bytes);

// Writes `sections` to `path` atomically (see above), creating missing
// directories. Sections are streamed to the file one by one, checksummed on
// the way, without copying large payloads. Returns the file's CRC-32 (the
// value stored at its end) via *crc, which may be null.
Status WriteCheckpointFile(const std::string& path, const std::vector<SectionView>& sections,
                           uint32_t* crc = nullptr);

// Reads and verifies a whole file: magic, version, every length against what
// is left of the file (checked before allocating), and the checksum. NotFound
// when the file does not exist; InvalidArgument naming the file and offset
// when it is damaged ("...: checksum mismatch (file says 0x.., contents
// 0x..)", "...: truncated at offset 1234: section 3 ('m') claims 4096 bytes,
// 100 left").
StatusOr<std::vector<Section>> ReadCheckpointFile(const std::string& path);

// Whether `name` may be listed: one path component, no spaces or control
// characters, not "MANIFEST".
bool ValidCheckpointFileName(std::string_view name);

// "<dir>/step-000000000100" for step 100. `step` must be >= 0.
std::string CheckpointStepDir(const std::string& dir, int64_t step);

// Writes <step dir>/MANIFEST listing `files`, names inside the step dir: a
// section "manifest" of text lines "step <n>" then "file <name> <size>
// <crc32, 8 hex digits>", and, when `job` is not empty, a section "job"
// holding it: the identity of the job that wrote the step
// (src/common/config/identity.h), so that no other job takes it for its
// own. Reads and verifies each file first and fails, naming it, if one is
// missing or damaged: a manifest never vouches for a bad file. Call it only
// after every participant's file is written.
Status WriteManifest(const std::string& dir, int64_t step, const std::vector<std::string>& files,
                     const std::string& job = "");

// A complete checkpoint: its step, its directory, the files its MANIFEST
// lists (names inside step_dir, in manifest order), and the identity of the
// job that wrote it (empty: not recorded, written by an older pstrain).
struct CheckpointRef {
  int64_t step;
  std::string step_dir;
  std::vector<std::string> files;
  std::string job;
};

// The newest step whose MANIFEST verifies and whose listed files all exist
// with the listed size and CRC and read back clean; with `job`, only a step
// of that job (or one that records none). Each newer step passed over
// (partial, damaged, another job's, or not a checkpoint at all) adds one line
// to *skipped (may be null) naming the file and the reason. NotFound when no
// step is complete, including when `dir` does not exist; other errors when
// `dir` cannot be listed. Reads every byte of the steps it checks.
StatusOr<CheckpointRef> FindNewestCheckpoint(const std::string& dir,
                                             std::vector<std::string>* skipped = nullptr,
                                             const std::string* job = nullptr);

// OK when step `step`'s MANIFEST under `dir` and every file it lists verify
// (*ref then describes it); with `job`, FailedPrecondition when the MANIFEST
// names another job.
Status VerifyStep(const std::string& dir, int64_t step, CheckpointRef* ref,
                  const std::string* job = nullptr);

// The newest step directory under `dir`, complete or not; -1 when there is
// none or `dir` does not exist.
StatusOr<int64_t> NewestStepDirectory(const std::string& dir);

// OK when a file can be created in `dir` (made when missing): checked by
// creating one and removing it. The error names the directory and the
// reason ("Permission denied", "Read-only file system").
Status CheckWritableDirectory(const std::string& dir);

// Keeps the newest `keep` (>= 1) complete steps. Deletes every step older than
// the oldest kept one, and partial or damaged steps older than the newest
// complete one; newer partial steps stay (they may still be being written).
// With `job`, steps of another job are neither counted nor deleted; the
// steps in `keep_also` are not deleted (nor counted). Deletes
// nothing when no step is complete; OK when `dir` does not exist, and when a
// step vanishes while being deleted (someone else removed it).
Status PruneCheckpoints(const std::string& dir, int keep, const std::string* job = nullptr,
                        const std::vector<int64_t>& keep_also = {});

}  // namespace pstrain
