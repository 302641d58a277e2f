// The store's file list in a checkpoint (roles/checkpoint/store.h): what a
// resume restores is exactly what the checkpoint listed, or an error naming
// the file; checksums are read once per file.
#include <doctest/doctest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "roles/checkpoint/store.h"
#include "tests/test_util.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST_CASE("a store's files are listed with size and CRC, and checked back exactly") {
  testing::TempDir dir;
  Write(dir.path() + "/000012.sst", std::string(300000, 'a') + "tail");
  Write(dir.path() + "/CURRENT", "MANIFEST-000005\n");
  Write(dir.path() + "/MANIFEST-000005", "x");
  StoreDigests digests;
  auto files = digests.List(dir.path());
  REQUIRE_MESSAGE(files.ok(), files.status().message());
  REQUIRE(files->size() == 3);
  CHECK((*files)[0].name == "000012.sst");
  CHECK((*files)[0].size == 300004);
  CHECK(CheckStoreFiles(dir.path(), *files).ok());

  auto parsed = ParseStoreFiles(FormatStoreFiles(*files));
  REQUIRE_MESSAGE(parsed.ok(), parsed.status().message());
  REQUIRE(parsed->size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK((*parsed)[i].name == (*files)[i].name);
    CHECK((*parsed)[i].size == (*files)[i].size);
    CHECK((*parsed)[i].crc == (*files)[i].crc);
  }

  SUBCASE("a flipped byte") {
    {
      std::fstream f(dir.path() + "/000012.sst", std::ios::in | std::ios::out | std::ios::binary);
      f.seekp(1234);
      f.put('b');
    }
    Status st = CheckStoreFiles(dir.path(), *files);
    CHECK(st.message().find("000012.sst: checksum mismatch") != std::string::npos);
  }
  SUBCASE("a missing file, a shorter one, an extra one") {
    fs::remove(dir.path() + "/CURRENT");
    CHECK(CheckStoreFiles(dir.path(), *files).message().find("CURRENT: missing") !=
          std::string::npos);
    Write(dir.path() + "/CURRENT", "MANIFEST");
    CHECK(CheckStoreFiles(dir.path(), *files)
              .message()
              .find("CURRENT: 8 bytes, the checkpoint "
                    "lists 16") != std::string::npos);
    Write(dir.path() + "/CURRENT", "MANIFEST-000005\n");
    Write(dir.path() + "/000013.sst", "new");
    CHECK(CheckStoreFiles(dir.path(), *files).message().find("000013.sst: not listed") !=
          std::string::npos);
  }
  SUBCASE("a subdirectory is not a store file") {
    fs::create_directory(dir.path() + "/sub");
    CHECK(digests.List(dir.path()).status().message().find("sub: not a plain file") !=
          std::string::npos);
  }
}

TEST_CASE("a file already listed is not read again (its inode, size and time are known)") {
  testing::TempDir dir;
  const std::string path = dir.path() + "/000007.sst";
  Write(path, std::string(1 << 16, 'z'));
  StoreDigests digests;
  auto first = digests.List(dir.path());
  REQUIRE(first.ok());
  // Changed behind the cache's back (same size, time put back): a table
  // file never is, so List keeps what it read; a resume's check reads again.
  const auto written = fs::last_write_time(path);
  Write(path, std::string(1 << 16, 'y'));
  fs::last_write_time(path, written);
  // A hard link, as a checkpoint makes: the same inode, known already.
  fs::create_directory(dir.path() + "/ckpt");
  fs::create_hard_link(path, dir.path() + "/ckpt/000007.sst");
  auto linked = digests.List(dir.path() + "/ckpt");
  REQUIRE_MESSAGE(linked.ok(), linked.status().message());
  CHECK((*linked)[0].crc == (*first)[0].crc);
  CHECK(CheckStoreFiles(dir.path() + "/ckpt", *linked).message().find("checksum mismatch") !=
        std::string::npos);
  StoreDigests fresh;
  auto reread = fresh.List(dir.path() + "/ckpt");
  REQUIRE(reread.ok());
  CHECK((*reread)[0].crc != (*first)[0].crc);
}

TEST_CASE("a store file list from a file is refused line by line unless well formed") {
  for (const char* bad :
       {"file a 1\n", "file a 1 0000000g\n", "file a -1 00000000\n", "file a/b 1 00000000\n",
        "blob a 1 00000000\n", "file a 1 00000000 extra\n", "file a 1 0\n",
        "file a 99999999999999999999999 00000000\n"}) {
    INFO(bad);
    auto parsed = ParseStoreFiles(bad);
    REQUIRE_FALSE(parsed.ok());
    CHECK(parsed.status().message().find("store file list, line 1") != std::string::npos);
  }
  CHECK(ParseStoreFiles("").ok());
}

}  // namespace
}  // namespace pstrain
