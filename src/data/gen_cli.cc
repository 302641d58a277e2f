#include "src/data/gen_cli.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdio>
#include <string_view>

#include "src/data/criteo_gen.h"

namespace pstrain {
namespace {

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
constexpr char kUsage[] =
    "usage: pstrain gen criteo --rows N --out DIR [--shards K] [--test-rows M] [--seed S] "
    "[--zipf Z]";

int Usage(const std::string& why) {
  std::fprintf(stderr, "pstrain gen: %s (%s)\n", why.c_str(), kUsage);
  return kExitUsage;
}

template <typename T>
bool ParseValue(std::string_view text, T* out) {
  const char* end = text.data() + text.size();
  auto r = std::from_chars(text.data(), end, *out);
  return r.ec == std::errc() && r.ptr == end;
}

// A JSON string literal (the directory may hold quotes or backslashes).
std::string JsonString(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

int RunGen(const std::vector<std::string>& args) {
  if (args.empty()) return Usage("which data set?");
  if (args[0] != "criteo") return Usage("unknown data set '" + args[0] + "'");
  GenOptions options;
  bool have_rows = false;
  for (size_t i = 1; i < args.size(); i += 2) {
    const std::string& flag = args[i];
    if (i + 1 >= args.size()) return Usage(flag + " needs a value");
    const std::string& value = args[i + 1];
    bool ok = true;
    if (flag == "--rows") {
      ok = ParseValue(value, &options.rows) && options.rows > 0;
      have_rows = true;
    } else if (flag == "--shards") {
      ok = ParseValue(value, &options.shards) && options.shards > 0;
    } else if (flag == "--test-rows") {
      ok = ParseValue(value, &options.test_rows) && options.test_rows >= 0;
    } else if (flag == "--seed") {
      ok = ParseValue(value, &options.seed);
    } else if (flag == "--zipf") {
      ok = ParseValue(value, &options.zipf);
    } else if (flag == "--out") {
      ok = !value.empty();
      options.out_dir = value;
    } else {
      return Usage("unknown flag " + flag);
    }
    if (!ok) return Usage("bad value for " + flag + ": '" + value + "'");
  }
  if (!have_rows) return Usage("--rows is required");
  if (options.out_dir.empty()) return Usage("--out is required");
  auto report = GenerateCriteo(options);
  if (!report.ok()) {
    const bool usage = report.status().code() == StatusCode::kInvalidArgument;
    std::fprintf(stderr, "pstrain gen: %s\n", report.status().message().c_str());
    return usage ? kExitUsage : kExitFailed;
  }
  std::printf("%s\n", fmt::format("{{\"gen\":\"criteo\",\"rows\":{},\"shards\":{},\"test_rows\":{},"
                                  "\"out\":{},\"planted_auc\":{:.4f}}}",
                                  report->train_rows, options.shards, report->test_rows,
                                  JsonString(options.out_dir), report->planted_auc)
                          .c_str());
  return 0;
}

}  // namespace pstrain
