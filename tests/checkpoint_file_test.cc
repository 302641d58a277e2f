// Checkpoint files: what a resuming job sees when checkpoints are intact,
// partial, damaged or mixed with garbage.
#include "src/common/checkpoint_file.h"

#include <doctest/doctest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with everything in it at the end.
using testing::TempDir;

std::vector<uint8_t> ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void WriteBytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

std::vector<uint8_t> Pattern(size_t n, uint32_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 13);
  return v;
}

// Writes a small shard file with three sections; returns its bytes.
std::vector<uint8_t> WriteShard(const std::string& path, uint32_t seed = 1) {
  std::vector<uint8_t> value = Pattern(64, seed), m = Pattern(32, seed + 1);
  std::string meta = "step 100";
  REQUIRE(WriteCheckpointFile(path, {{"meta", meta.data(), meta.size()},
                                     {"w/p0/value", value.data(), value.size()},
                                     {"w/p0/m", m.data(), m.size()}})
              .ok());
  return ReadBytes(path);
}

// Writes every file of `step` and, when `manifest`, its MANIFEST.
void WriteStep(const std::string& dir, int64_t step, bool manifest = true,
               const std::string& job = "") {
  const std::string step_dir = CheckpointStepDir(dir, step);
  WriteShard(step_dir + "/server-0.ckpt", static_cast<uint32_t>(step));
  WriteShard(step_dir + "/server-1.ckpt", static_cast<uint32_t>(step) + 7);
  if (manifest) REQUIRE(WriteManifest(dir, step, {"server-0.ckpt", "server-1.ckpt"}, job).ok());
}

std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

void FlipByte(const std::string& path, size_t offset) {
  std::vector<uint8_t> bytes = ReadBytes(path);
  REQUIRE(offset < bytes.size());
  bytes[offset] ^= 0x20;
  WriteBytes(path, bytes);
}

// The CRC-32 a file ends with (little-endian).
uint32_t StoredCrc(const std::vector<uint8_t>& file) {
  REQUIRE(file.size() >= 4);
  uint32_t crc = 0;
  for (int i = 0; i < 4; ++i) crc |= uint32_t{file[file.size() - 4 + i]} << (8 * i);
  return crc;
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& needle) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return Contains(l, needle); });
}

TEST_CASE("sections round trip, including an empty and a 5 MiB one") {
  TempDir tmp;
  const std::string path = tmp.path() + "/a/b/server-1.ckpt";  // directories are created
  std::vector<uint8_t> big = Pattern(5 << 20, 3), small = Pattern(10, 4);
  std::string meta = "step 7";
  std::vector<SectionView> views = {{"meta", meta.data(), meta.size()},
                                    {"empty", nullptr, 0},
                                    {"conv1.weight/p0/value", big.data(), big.size()},
                                    {"conv1.weight/p0/m", small.data(), small.size()}};
  uint32_t crc = 0;
  REQUIRE(WriteCheckpointFile(path, views, &crc).ok());

  std::vector<uint8_t> file = ReadBytes(path);
  size_t expected_size = 16 + 4;
  for (const SectionView& v : views) expected_size += 12 + v.name.size() + v.size;
  CHECK(file.size() == expected_size);
  CHECK(std::string(file.begin(), file.begin() + 8) == "PSTRCKPT");
  CHECK(StoredCrc(file) == crc);

  auto read = ReadCheckpointFile(path);
  REQUIRE(read.ok());
  REQUIRE(read->size() == 4);
  CHECK((*read)[0].name == "meta");
  CHECK(std::string((*read)[0].bytes.begin(), (*read)[0].bytes.end()) == meta);
  CHECK((*read)[1].name == "empty");
  CHECK((*read)[1].bytes.empty());
  CHECK((*read)[2].name == "conv1.weight/p0/value");
  CHECK((*read)[2].bytes == big);
  CHECK((*read)[3].bytes == small);

  for (const auto& e : fs::directory_iterator(tmp.path() + "/a/b"))  // no .tmp left behind
    CHECK(e.path().filename() == "server-1.ckpt");
}

TEST_CASE("an empty section list and rewriting a file in place") {
  TempDir tmp;
  const std::string path = tmp.path() + "/x.ckpt";
  REQUIRE(WriteCheckpointFile(path, {}).ok());
  auto read = ReadCheckpointFile(path);
  REQUIRE(read.ok());
  CHECK(read->empty());
  WriteShard(path);
  read = ReadCheckpointFile(path);
  REQUIRE(read.ok());
  CHECK(read->size() == 3);
}

TEST_CASE("a flipped byte at any offset is refused, naming the file") {
  TempDir tmp;
  const std::string path = tmp.path() + "/server-1.ckpt";
  const std::vector<uint8_t> good = WriteShard(path);
  // Every byte: magic, version, count, lengths, names, payloads, the CRC.
  for (size_t offset = 0; offset < good.size(); ++offset) {
    for (uint8_t mask : {0x01, 0x80, 0xff}) {
      std::vector<uint8_t> bad = good;
      bad[offset] ^= mask;
      WriteBytes(path, bad);
      auto read = ReadCheckpointFile(path);
      INFO("offset ", offset, " mask ", int{mask});
      REQUIRE_FALSE(read.ok());
      CHECK(read.status().code() == StatusCode::kInvalidArgument);
      CHECK(Contains(read.status().message(), path + ": "));
    }
  }
  std::vector<uint8_t> bad = good;
  bad[0] ^= 1;
  WriteBytes(path, bad);
  CHECK(Contains(ReadCheckpointFile(path).status().message(), "bad magic at offset 0"));
  bad = good;
  bad[good.size() - 20] ^= 1;  // inside the last payload
  WriteBytes(path, bad);
  CHECK(Contains(ReadCheckpointFile(path).status().message(), "checksum mismatch (file says 0x"));
  bad = good;
  bad[good.size() - 1] ^= 1;  // the CRC itself
  WriteBytes(path, bad);
  CHECK(Contains(ReadCheckpointFile(path).status().message(), "checksum mismatch"));
}

TEST_CASE("a corrupted length is refused without allocating what it claims") {
  TempDir tmp;
  const std::string path = tmp.path() + "/server-0.ckpt";
  std::vector<uint8_t> bytes = WriteShard(path);
  // Section 0 is "meta": its byte length is the u64 at 16 + 4 + 4.
  for (int i = 0; i < 8; ++i) bytes[24 + i] = 0xff;
  WriteBytes(path, bytes);
  auto read = ReadCheckpointFile(path);
  REQUIRE_FALSE(read.ok());
  CHECK(
      Contains(read.status().message(),
               path + ": truncated at offset 32: section 0 ('meta') claims 18446744073709551615"));
}

TEST_CASE("truncation at any offset is refused, naming the offset") {
  TempDir tmp;
  const std::string path = tmp.path() + "/server-1.ckpt";
  const std::vector<uint8_t> good = WriteShard(path);
  for (size_t size = 0; size < good.size(); ++size) {
    WriteBytes(path, std::vector<uint8_t>(good.begin(), good.begin() + size));
    auto read = ReadCheckpointFile(path);
    INFO("truncated to ", size, " bytes: ", read.status().message());
    REQUIRE_FALSE(read.ok());
    CHECK(Contains(read.status().message(), path + ": truncated at offset "));
  }
  // Cut inside section 2's payload: it starts after the header, "meta" (12 + 4 + 8 bytes),
  // "w/p0/value" (12 + 10 + 64) and its own name and lengths (12 + 6).
  const size_t payload = 16 + 24 + 86 + 18;
  WriteBytes(path, std::vector<uint8_t>(good.begin(), good.begin() + payload + 10));
  CHECK(ReadCheckpointFile(path).status().message() ==
        path + ": truncated at offset " + std::to_string(payload) +
            ": section 2 ('w/p0/m') claims 32 bytes, 6 left");
}

TEST_CASE("garbage never crashes the reader") {
  TempDir tmp;
  const std::string path = tmp.path() + "/garbage";
  std::mt19937 rng(42);
  for (int i = 0; i < 500; ++i) {
    std::vector<uint8_t> bytes(rng() % 200);
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    if (i % 2 == 0 && bytes.size() >= 12) {  // a valid header, so parsing goes deeper
      std::copy_n("PSTRCKPT\x01\x00\x00\x00", 12, bytes.begin());
    }
    WriteBytes(path, bytes);
    CHECK_FALSE(ReadCheckpointFile(path).ok());
  }
  CHECK(ReadCheckpointFile(tmp.path() + "/missing").status().code() == StatusCode::kNotFound);
  CHECK(Contains(ReadCheckpointFile(tmp.path() + "/missing").status().message(), "/missing"));
  CHECK_FALSE(ReadCheckpointFile(tmp.path()).ok());  // a directory
}

TEST_CASE("the manifest lists each file with its size and CRC") {
  TempDir tmp;
  WriteStep(tmp.path(), 100);
  const std::string step_dir = CheckpointStepDir(tmp.path(), 100);
  CHECK(step_dir == tmp.path() + "/step-000000000100");
  auto manifest = ReadCheckpointFile(step_dir + "/MANIFEST");
  REQUIRE(manifest.ok());
  REQUIRE(manifest->size() == 1);
  CHECK((*manifest)[0].name == "manifest");
  const std::string text((*manifest)[0].bytes.begin(), (*manifest)[0].bytes.end());
  const std::vector<uint8_t> file = ReadBytes(step_dir + "/server-0.ckpt");
  char line[128];
  snprintf(line, sizeof line, "file server-0.ckpt %zu %08x\n", file.size(), StoredCrc(file));
  CHECK(text.rfind("step 100\n", 0) == 0);
  CHECK(Contains(text, line));
  CHECK(Contains(text, "file server-1.ckpt "));
}

TEST_CASE("WriteManifest refuses to vouch for a missing or damaged file") {
  TempDir tmp;
  WriteStep(tmp.path(), 5, /*manifest=*/false);
  const std::string step_dir = CheckpointStepDir(tmp.path(), 5);
  FlipByte(step_dir + "/server-1.ckpt", 40);
  Status s = WriteManifest(tmp.path(), 5, {"server-0.ckpt", "server-1.ckpt"});
  CHECK_FALSE(s.ok());
  CHECK(Contains(s.message(), step_dir + "/server-1.ckpt: "));
  s = WriteManifest(tmp.path(), 5, {"server-0.ckpt", "server-2.ckpt"});
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(Contains(s.message(), "server-2.ckpt"));
  CHECK_FALSE(WriteManifest(tmp.path(), 5, {}).ok());
  CHECK_FALSE(WriteManifest(tmp.path(), 5, {"../server-0.ckpt"}).ok());
  CHECK_FALSE(WriteManifest(tmp.path(), 5, {"server-0.ckpt", "server-0.ckpt"}).ok());
  CHECK_FALSE(fs::exists(step_dir + "/MANIFEST"));
}

TEST_CASE("a leftover .tmp file does not count") {
  TempDir tmp;
  const std::string step_dir = CheckpointStepDir(tmp.path(), 9);
  WriteShard(step_dir + "/server-0.ckpt");
  fs::rename(step_dir + "/server-0.ckpt", step_dir + "/server-0.ckpt.tmp-12345");  // crashed
  Status s = WriteManifest(tmp.path(), 9, {"server-0.ckpt"});
  CHECK(s.code() == StatusCode::kNotFound);
  CHECK(FindNewestCheckpoint(tmp.path()).status().code() == StatusCode::kNotFound);

  WriteShard(step_dir + "/server-0.ckpt");  // the retry succeeds; the leftover is ignored
  REQUIRE(WriteManifest(tmp.path(), 9, {"server-0.ckpt"}).ok());
  auto found = FindNewestCheckpoint(tmp.path());
  REQUIRE(found.ok());
  CHECK(found->files == std::vector<std::string>{"server-0.ckpt"});
}

TEST_CASE("FindNewestCheckpoint picks the newest complete step and reports what it skipped") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  WriteStep(dir, 100);
  WriteStep(dir, 200);
  WriteStep(dir, 300, /*manifest=*/false);  // crashed before the manifest
  WriteStep(dir, 400);
  FlipByte(CheckpointStepDir(dir, 400) + "/server-1.ckpt", 50);
  WriteStep(dir, 500);
  WriteShard(CheckpointStepDir(dir, 500) + "/server-0.ckpt", 99);  // valid, but not the listed one
  fs::copy(CheckpointStepDir(dir, 200), CheckpointStepDir(dir, 600));  // manifest says step 200
  WriteStep(dir, 700);
  WriteBytes(CheckpointStepDir(dir, 700) + "/MANIFEST", Pattern(100, 5));
  WriteBytes(dir + "/step-000000000800", Pattern(10, 6));  // a file, not a directory
  fs::create_directories(dir + "/step-abc");
  fs::create_directories(dir + "/step-900");  // not a canonical name
  WriteBytes(dir + "/notes.txt", Pattern(10, 7));

  std::vector<std::string> skipped;
  auto found = FindNewestCheckpoint(dir, &skipped);
  REQUIRE(found.ok());
  CHECK(found->step == 200);
  CHECK(found->step_dir == CheckpointStepDir(dir, 200));
  CHECK(found->files == std::vector<std::string>{"server-0.ckpt", "server-1.ckpt"});
  REQUIRE(skipped.size() == 6);
  CHECK(Contains(skipped[0], "step-000000000800/MANIFEST"));
  CHECK(Contains(skipped[1], "step-000000000700/MANIFEST: not a checkpoint file"));
  CHECK(Contains(skipped[2], "step-000000000600/MANIFEST: does not begin with 'step 600'"));
  CHECK(Contains(skipped[3], "step-000000000500/server-0.ckpt: "));
  CHECK(Contains(skipped[3], "MANIFEST says"));
  CHECK(Contains(skipped[4], "step-000000000400/server-1.ckpt: checksum mismatch"));
  CHECK(Contains(skipped[5], "step-000000000300/MANIFEST: missing"));

  // Damage the chosen step too: the older one is used.
  FlipByte(CheckpointStepDir(dir, 200) + "/MANIFEST", 30);
  found = FindNewestCheckpoint(dir);
  REQUIRE(found.ok());
  CHECK(found->step == 100);
}

TEST_CASE("a step whose shard or MANIFEST was cut short is skipped") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  WriteStep(dir, 100);
  WriteStep(dir, 200);
  WriteStep(dir, 300);
  for (auto [step, file] :
       {std::pair<int64_t, const char*>{300, "MANIFEST"}, {200, "server-1.ckpt"}}) {
    const std::string path = CheckpointStepDir(dir, step) + "/" + file;
    std::vector<uint8_t> bytes = ReadBytes(path);
    bytes.resize(bytes.size() / 2);
    WriteBytes(path, bytes);
  }
  std::vector<std::string> skipped;
  auto found = FindNewestCheckpoint(dir, &skipped);
  REQUIRE(found.ok());
  CHECK(found->step == 100);
  REQUIRE(skipped.size() == 2);
  CHECK(Contains(skipped[0], "step-000000000300/MANIFEST"));
  CHECK(Contains(skipped[1], "step-000000000200/server-1.ckpt"));
}

TEST_CASE("FindNewestCheckpoint: NotFound for a missing, empty or all-partial directory") {
  TempDir tmp;
  CHECK(FindNewestCheckpoint(tmp.path() + "/nope").status().code() == StatusCode::kNotFound);
  CHECK(FindNewestCheckpoint(tmp.path()).status().code() == StatusCode::kNotFound);
  WriteStep(tmp.path(), 1, /*manifest=*/false);
  std::vector<std::string> skipped;
  auto found = FindNewestCheckpoint(tmp.path(), &skipped);
  CHECK(found.status().code() == StatusCode::kNotFound);
  CHECK(AnyContains(skipped, "MANIFEST: missing"));
}

TEST_CASE("PruneCheckpoints keeps the newest N complete steps and in-progress ones") {
  TempDir tmp;
  for (int64_t step : {10, 20, 30, 40, 50}) WriteStep(tmp.path(), step);
  WriteStep(tmp.path(), 35, /*manifest=*/false);  // abandoned: older than the newest complete
  WriteStep(tmp.path(), 60, /*manifest=*/false);  // may still be being written
  FlipByte(CheckpointStepDir(tmp.path(), 50) + "/server-0.ckpt", 45);  // damaged: not counted,
                                                                       // kept while it is newest
  WriteBytes(tmp.path() + "/notes.txt", Pattern(10, 1));

  CHECK(PruneCheckpoints(tmp.path(), 0).code() == StatusCode::kInvalidArgument);
  REQUIRE(PruneCheckpoints(tmp.path(), 2).ok());
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(tmp.path())) left.push_back(e.path().filename());
  std::sort(left.begin(), left.end());
  CHECK(left == std::vector<std::string>{"notes.txt", "step-000000000030", "step-000000000040",
                                         "step-000000000050", "step-000000000060"});
  auto found = FindNewestCheckpoint(tmp.path());
  REQUIRE(found.ok());
  CHECK(found->step == 40);
  CHECK(PruneCheckpoints(tmp.path() + "/nope", 1).ok());
}

TEST_CASE("a job finds, keeps and prunes only its own steps") {
  TempDir tmp;
  const std::string ours = "train.optimizer.lr: 0.002\n", theirs = "train.optimizer.lr: 0.001\n";
  WriteStep(tmp.path(), 10, true, ours);
  WriteStep(tmp.path(), 20, true, ours);
  WriteStep(tmp.path(), 25, true, "");  // an older pstrain's: no job recorded
  WriteStep(tmp.path(), 200, true, theirs);
  WriteStep(tmp.path(), 5, true, theirs);

  // Without a job the newest step is taken, and says whose it is.
  auto newest = FindNewestCheckpoint(tmp.path());
  REQUIRE(newest.ok());
  CHECK(newest->step == 200);
  CHECK(newest->job == theirs);
  // With one, another job's steps are passed over, naming how they differ.
  std::vector<std::string> skipped;
  auto found = FindNewestCheckpoint(tmp.path(), &skipped, &ours);
  REQUIRE(found.ok());
  CHECK(found->step == 25);
  REQUIRE(skipped.size() == 1);
  CHECK(Contains(skipped[0],
                 "step-000000000200: another job's checkpoint (train.optimizer.lr is "
                 "0.001 there, 0.002 in this job)"));

  REQUIRE(PruneCheckpoints(tmp.path(), 1, &ours).ok());
  CHECK(Entries(tmp.path()) ==
        std::vector<std::string>{"step-000000000005", "step-000000000025", "step-000000000200"});
  CHECK(NewestStepDirectory(tmp.path()).value() == 200);
  CHECK(NewestStepDirectory(tmp.path() + "/nope").value() == -1);
}

TEST_CASE("pruning goes on when another process removes steps under it") {
  TempDir tmp;
  const std::string dir = tmp.path() + "/ckpt";
  WriteStep(dir, 1000);
  // Rounds of 40 old steps of many files each, which one thread prunes
  // while another removes them: a step vanishing mid-prune is no error.
  for (int round = 0; round < 20; ++round) {
    for (int64_t step = 1; step <= 40; ++step) {
      fs::create_directories(CheckpointStepDir(dir, step));
      for (int f = 0; f < 20; ++f)
        WriteBytes(CheckpointStepDir(dir, step) + "/f" + std::to_string(f), Pattern(10, f));
    }
    std::thread remover([&] {
      for (int64_t step = 1; step <= 40; ++step) {
        std::error_code ec;
        fs::remove_all(CheckpointStepDir(dir, step), ec);
      }
    });
    Status pruned = PruneCheckpoints(dir, 1);
    remover.join();
    REQUIRE_MESSAGE(pruned.ok(), pruned.message());
  }
  CHECK(Entries(dir) == std::vector<std::string>{"step-000000001000"});
}

TEST_CASE("CheckWritableDirectory makes the directory and refuses a read-only one") {
  TempDir tmp;
  CHECK(CheckWritableDirectory(tmp.path() + "/a/b").ok());
  CHECK(fs::is_directory(tmp.path() + "/a/b"));
  CHECK(Entries(tmp.path() + "/a/b").empty());  // the probe file is gone
  if (::geteuid() == 0) return;                 // root writes anywhere
  fs::permissions(tmp.path() + "/a/b", fs::perms::owner_read | fs::perms::owner_exec);
  Status st = CheckWritableDirectory(tmp.path() + "/a/b");
  CHECK(!st.ok());
  CHECK(Contains(st.message(), "a/b: not writable: Permission denied"));
}

}  // namespace
}  // namespace pstrain
