#include "roles/checkpoint/model_layout.h"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "roles/placement/placed_model.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

constexpr int kMaxDims = 8;
constexpr int64_t kMaxElements = int64_t{1} << 40;
constexpr size_t kMaxSchemaBytes = 64 << 20;

bool ParseInt(const std::string& s, int64_t* out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty() && *out > 0;
}

bool ParseShape(const std::string& text, Shape* shape) {
  std::stringstream in(text);
  std::string dim;
  int64_t elements = 1;
  while (std::getline(in, dim, ',')) {
    int64_t d = 0;
    if (!ParseInt(dim, &d) || d > kMaxElements / elements) return false;
    elements *= d;
    shape->push_back(d);
  }
  return !shape->empty() && shape->size() <= kMaxDims;
}

}  // namespace

StatusOr<ModelLayout> LayoutOf(const Config& config) {
  // One sample's rows are room enough: a table's rows are not in the layout.
  auto placed = PlaceModel(config, /*max_batch=*/1);
  if (!placed.ok()) return placed.status();
  ModelLayout layout;
  for (const ServerTable& t : placed->tables)
    layout.tables.push_back({t.options.name, t.options.dim});
  for (const PlacedParam& p : placed->params) {
    if (p.place == ParamPlace::kServerTable) continue;
    layout.tensors.push_back(
        {p.param->name,
         p.place == ParamPlace::kAllReduced ? WeightPlace::kAllReduced : WeightPlace::kServers,
         p.param->value.shape});
  }
  return layout;
}

StatusOr<std::string> WriteModelLayout(const std::string& step_dir, const ModelLayout& layout) {
  std::string text = "layout 1\n";
  for (const LayoutTensor& t : layout.tensors) {
    std::string dims;
    for (int64_t d : t.shape) dims += (dims.empty() ? "" : ",") + std::to_string(d);
    text += fmt::format("tensor {} {} {}\n", t.name,
                        t.place == WeightPlace::kServers ? "ps" : "allreduced", dims);
  }
  for (const LayoutTable& t : layout.tables) text += fmt::format("table {} {}\n", t.name, t.dim);
  std::vector<SectionView> sections = {SectionView{"layout", text.data(), text.size()}};
  if (!layout.data_schema.empty())
    sections.push_back(SectionView{"data", layout.data_schema.data(), layout.data_schema.size()});
  PSTRAIN_RETURN_IF_ERROR(WriteCheckpointFile(step_dir + "/" + kModelLayoutFileName, sections));
  return std::string(kModelLayoutFileName);
}

StatusOr<ModelLayout> ReadModelLayout(const std::string& path) {
  auto sections = ReadCheckpointFile(path);
  if (!sections.ok()) return sections.status();
  const bool data = sections->size() == 2 && (*sections)[1].name == "data";
  if ((sections->size() != 1 && !data) || (*sections)[0].name != "layout")
    return InvalidArgument(
        path + ": expected a section 'layout', optionally followed by one named 'data'");
  const std::vector<uint8_t>& bytes = (*sections)[0].bytes;
  std::stringstream in(std::string(bytes.begin(), bytes.end()));
  std::string line;
  if (!std::getline(in, line) || line != "layout 1")
    return InvalidArgument(path + ": does not begin with 'layout 1'");
  ModelLayout layout;
  for (int n = 2; std::getline(in, line); ++n) {
    std::stringstream fields(line);
    std::string kind, name, a, b, extra;
    fields >> kind >> name >> a >> b >> extra;
    auto bad = [&] {
      return InvalidArgument(
          fmt::format("{}: line {} is not a tensor or table: '{}'", path, n, line.substr(0, 120)));
    };
    if (kind == "tensor" && (a == "ps" || a == "allreduced") && extra.empty()) {
      LayoutTensor t{name, a == "ps" ? WeightPlace::kServers : WeightPlace::kAllReduced, {}};
      if (!ParseShape(b, &t.shape)) return bad();
      layout.tensors.push_back(std::move(t));
    } else if (kind == "table" && b.empty()) {
      LayoutTable t{name, 0};
      if (!ParseInt(a, &t.dim) || t.dim > (1 << 20)) return bad();
      layout.tables.push_back(std::move(t));
    } else {
      return bad();
    }
  }
  if (data) {
    const std::vector<uint8_t>& schema = (*sections)[1].bytes;
    if (schema.size() > kMaxSchemaBytes)
      return InvalidArgument(fmt::format("{}: a data schema of {} bytes (at most {})", path,
                                         schema.size(), kMaxSchemaBytes));
    layout.data_schema.assign(schema.begin(), schema.end());
  }
  return layout;
}

}  // namespace pstrain
