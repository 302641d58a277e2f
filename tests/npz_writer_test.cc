// NpzWriter (src/common/npz_writer.h): the bytes numpy needs (the .npy
// header padded to 64, a zip numpy can index), streaming in pieces, and the
// file appearing only once finished. numpy itself reads the output in
// tests/export_eval_test.sh.
#include "src/common/npz_writer.h"

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tests/test_util.h"

namespace pstrain {
namespace {

using testing::TempDir;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

uint32_t U32(const std::string& s, size_t at) {
  uint32_t v;
  std::memcpy(&v, s.data() + at, 4);
  return v;
}

TEST_CASE("npy headers are padded to 64 bytes and spell the shape as numpy does") {
  const std::string h = NpyHeader(NpyType::kFloat32, {3, 4});
  CHECK(h.size() % 64 == 0);
  CHECK(h.compare(0, 6, "\x93NUMPY") == 0);
  CHECK(h.find("'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }") != std::string::npos);
  CHECK(h.back() == '\n');
  CHECK(NpyHeader(NpyType::kInt64, {5}).find("'<i8'") != std::string::npos);
  CHECK(NpyHeader(NpyType::kInt64, {5}).find("(5,)") != std::string::npos);
  CHECK(NpyHeader(NpyType::kFloat32, {}).find("()") != std::string::npos);
}

TEST_CASE("arrays written in pieces land whole, with the zip's CRC and directory") {
  TempDir dir;
  const std::string path = dir.path() + "/m.npz";
  auto w = NpzWriter::Create(path);
  REQUIRE(w.ok());
  std::vector<float> a = {1, 2, 3, 4, 5, 6};
  REQUIRE((*w)->BeginArray("fc.weight", NpyType::kFloat32, {2, 3}).ok());
  REQUIRE((*w)->Write(a.data(), 2 * sizeof(float)).ok());
  REQUIRE((*w)->Write(a.data() + 2, 4 * sizeof(float)).ok());
  REQUIRE((*w)->EndArray().ok());
  std::vector<int64_t> ids = {7, 9};
  REQUIRE((*w)->BeginArray("t.ids", NpyType::kInt64, {2}).ok());
  REQUIRE((*w)->Write(ids.data(), 16).ok());
  REQUIRE((*w)->EndArray().ok());
  CHECK(!std::filesystem::exists(path));  // not before Finish
  REQUIRE((*w)->Finish().ok());
  const std::string z = ReadAll(path);
  CHECK(U32(z, 0) == 0x04034b50);
  const std::string npy = NpyHeader(NpyType::kFloat32, {2, 3});
  const size_t data_at = 30 + std::string("fc.weight.npy").size() + npy.size();
  CHECK(U32(z, 18) == npy.size() + 24);  // compressed size: header and data
  CHECK(std::memcmp(z.data() + data_at, a.data(), 24) == 0);
  // The end record: 2 entries, and the directory where it says.
  const size_t end = z.size() - 22;
  CHECK(U32(z, end) == 0x06054b50);
  CHECK((U32(z, end + 8) & 0xffff) == 2);
  CHECK(U32(z, U32(z, end + 16)) == 0x02014b50);
  std::vector<std::string> left;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    left.push_back(e.path().filename());
  CHECK(left == std::vector<std::string>{"m.npz"});
}

TEST_CASE("a wrong byte count is an error, and an unfinished writer leaves nothing") {
  TempDir dir;
  const std::string path = dir.path() + "/m.npz";
  {
    auto w = NpzWriter::Create(path);
    REQUIRE(w.ok());
    float v[4] = {};
    REQUIRE((*w)->BeginArray("x", NpyType::kFloat32, {3}).ok());
    CHECK(!(*w)->Write(v, sizeof v).ok());  // 16 bytes into 12
    REQUIRE((*w)->Write(v, 8).ok());
    CHECK(!(*w)->EndArray().ok());  // 4 short
    CHECK(!(*w)->Finish().ok());    // inside an array
  }
  CHECK(std::filesystem::is_empty(dir.path()));
  CHECK(!NpzWriter::Create(dir.path() + "/no/such/dir/m.npz").ok());
}

}  // namespace
}  // namespace pstrain
