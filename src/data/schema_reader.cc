#include "src/data/schema_reader.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cassert>
#include <charconv>
#include <cmath>
#include <new>
#include <nlohmann/json.hpp>

#include "src/data/criteo_reader.h"
#include "src/data/line_reader.h"

namespace pstrain {
namespace {

constexpr size_t kShownBytes = 40;   // of a bad value, in messages
constexpr size_t kNamedBadRows = 5;  // skipped lines named, per dataset

std::string_view Shown(std::string_view v) { return v.substr(0, kShownBytes); }

// An integer or any decimal number, a leading '+' allowed (libsvm's +1);
// false when `v` is not one.
bool ParseNumber(std::string_view v, double* x) {
  if (v.size() > 1 && v[0] == '+' && v[1] != '-' && v[1] != '+') v.remove_prefix(1);
  const char* end = v.data() + v.size();
  int64_t i = 0;
  auto r = std::from_chars(v.data(), end, i);
  if (r.ec == std::errc() && r.ptr == end) {
    *x = static_cast<double>(i);
    return true;
  }
  auto d = std::from_chars(v.data(), end, *x);
  return d.ec == std::errc() && d.ptr == end && std::isfinite(*x);
}

std::string DelimiterName(char c) {
  switch (c) {
    case '\t':
      return "tab";
    case ',':
      return "comma";
    case ' ':
      return "space";
    default:
      return fmt::format("'{}'", c);
  }
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// log(1 + max(x, 0)). Count columns hold mostly small whole numbers (92%
// of Criteo's dense cells are below 1024), whose values a table computed
// once by std::log1p gives bit for bit, at a sixth of the parse's cost.
double Log1p(double x) {
  constexpr int kTabled = 1024;
  static const std::array<double, kTabled> table = [] {
    std::array<double, kTabled> t{};
    for (int i = 0; i < kTabled; ++i) t[i] = std::log1p(static_cast<double>(i));
    return t;
  }();
  // (-0.0 is left to std::log1p, which keeps its sign.)
  if (x >= 0 && x < kTabled && !std::signbit(x)) {
    const int i = static_cast<int>(x);
    if (i == x) return table[i];
  }
  return std::log1p(std::max(x, 0.0));
}

// The label the column makes of `x`: x, or 0/1 by its threshold.
float LabelOf(const ColumnConfig& c, double x) {
  return c.has_threshold ? (x > c.threshold ? 1.0f : 0.0f) : static_cast<float>(x);
}

}  // namespace

RowParser::RowParser(DataFormat format, const std::vector<ColumnConfig>& columns, char delimiter,
                     int64_t vocab)
    : format_(format), delimiter_(delimiter) {
  assert(vocab > 0);
  int id_columns = 0;
  for (const ColumnConfig& config : columns) {
    Column& c = columns_.emplace_back();
    c.config = config;
    switch (config.type) {
      case ColumnType::kDense:
        c.slot = dense_++;
        break;
      case ColumnType::kCategorical:
      case ColumnType::kMultiHot:
        c.field = id_columns++;
        c.vocab = config.vocab > 0 ? config.vocab : vocab;
        c.slot = fields_;
        fields_ += IdSlots(config);
        weighted_ = weighted_ || config.type == ColumnType::kMultiHot;
        c.empty_id = config.raw_ids ? 0 : HashedId(c, "");
        break;
      default:
        break;
    }
  }
}

RowParser RowParser::For(const DataConfig& config) {
  if (config.format == DataFormat::kCriteo) {
    RowParser parser(DataFormat::kCsv, CriteoColumns(), '\t', config.vocab);
    parser.binary_labels_ = true;
    return parser;
  }
  return RowParser(config.format, config.columns, config.delimiter[0], config.vocab);
}

Status RowParser::Id(const Column& c, std::string_view value, int64_t* id) const {
  if (!c.config.raw_ids) {
    *id = HashedId(c, value);
    return Status::OK();
  }
  return RawId(c, value, id);
}

Status RowParser::RawId(const Column& c, std::string_view value, int64_t* id) const {
  const char* end = value.data() + value.size();
  auto r = std::from_chars(value.data(), end, *id);
  if (r.ec != std::errc() || r.ptr != end || *id < 0 || *id >= c.vocab) {
    return InvalidArgument(fmt::format("{} id '{}': expected an integer in [0, {}) (ids: raw)",
                                       c.config.name, Shown(value), c.vocab));
  }
  return Status::OK();
}

// A csv multi_hot cell: its values split at the separator, empty ones left out.
Status RowParser::ParseMultiHot(const Column& c, std::string_view cell, int64_t* ids,
                                float* weights) const {
  const std::string& sep = c.config.separator;
  int n = 0;
  for (size_t start = 0; start <= cell.size();) {
    size_t at = cell.find(sep, start);
    if (at == std::string_view::npos) at = cell.size();
    const std::string_view value = cell.substr(start, at - start);
    start = at + sep.size();
    if (value.empty()) continue;
    if (n == c.config.max_ids) {
      return InvalidArgument(
          fmt::format("{}: more than max_ids {} values", c.config.name, c.config.max_ids));
    }
    PSTRAIN_RETURN_IF_ERROR(Id(c, value, &ids[c.slot + n]));
    weights[c.slot + n] = 1;
    ++n;
  }
  for (; n < c.config.max_ids; ++n) {
    ids[c.slot + n] = c.empty_id;
    weights[c.slot + n] = 0;
  }
  return Status::OK();
}

// `label id:value id:value ...`, blanks between.
Status RowParser::ParseLibsvm(std::string_view line, float* label, int64_t* ids,
                              float* weights) const {
  assert(columns_.size() == 2 && weights != nullptr);  // ReadData's libsvm schema
  const Column& labels = columns_[0];
  const Column& features = columns_[1];
  size_t at = 0;
  auto next_token = [&]() {
    while (at < line.size() && IsBlank(line[at])) ++at;
    const size_t start = at;
    while (at < line.size() && !IsBlank(line[at])) ++at;
    return line.substr(start, at - start);
  };
  const std::string_view first = next_token();
  double x = 0;
  if (!ParseNumber(first, &x)) {
    return InvalidArgument(
        fmt::format("{} '{}': expected a number", labels.config.name, Shown(first)));
  }
  *label = LabelOf(labels.config, x);
  if (!std::isfinite(*label))
    return InvalidArgument(
        fmt::format("{} '{}': out of a float's range", labels.config.name, Shown(first)));
  const int max_ids = features.config.max_ids;
  int n = 0;
  for (std::string_view pair = next_token(); !pair.empty(); pair = next_token()) {
    if (n == max_ids) {
      return InvalidArgument(fmt::format("more than max_ids {} id:value pairs", max_ids));
    }
    const size_t colon = pair.find(':');
    double value = 0;
    if (colon == std::string_view::npos || !ParseNumber(pair.substr(colon + 1), &value)) {
      return InvalidArgument(fmt::format("pair '{}': expected id:value", Shown(pair)));
    }
    PSTRAIN_RETURN_IF_ERROR(Id(features, pair.substr(0, colon), &ids[n]));
    weights[n] = static_cast<float>(value);
    if (!std::isfinite(weights[n]))
      return InvalidArgument(fmt::format("pair '{}': the value is out of range", Shown(pair)));
    ++n;
  }
  for (; n < max_ids; ++n) {
    ids[n] = features.empty_id;
    weights[n] = 0;
  }
  return Status::OK();
}

// One csv cell of any column but a multi_hot one: false when it does not
// parse (CellError says why), with no Status made for a good cell.
bool RowParser::FastCell(const Column& c, std::string_view cell, float* label, float* dense,
                         int64_t* ids, float* weights) const {
  double x = 0;
  switch (c.config.type) {
    case ColumnType::kLabel:
      if (binary_labels_ && cell != "0" && cell != "1") return false;
      if (!ParseNumber(cell, &x)) return false;
      *label = LabelOf(c.config, x);
      return std::isfinite(*label);
    case ColumnType::kDense:
      x = c.config.fill;
      if (!cell.empty() && !ParseNumber(cell, &x)) return false;
      if (c.config.transform == DenseTransform::kLog1p) x = Log1p(x);
      if (c.config.transform == DenseTransform::kStandardize)
        x = (x - c.config.mean) / c.config.std;
      dense[c.slot] = static_cast<float>(x);
      return std::isfinite(dense[c.slot]);
    case ColumnType::kCategorical:
      if (weights != nullptr) weights[c.slot] = 1;
      if (c.config.raw_ids) return RawId(c, cell, &ids[c.slot]).ok();
      ids[c.slot] = HashedId(c, cell);
      return true;
    default:
      return true;
  }
}

// Why FastCell refused `cell`.
Status RowParser::CellError(const Column& c, std::string_view cell) const {
  int64_t id = 0;
  if (c.config.type == ColumnType::kCategorical) return RawId(c, cell, &id);
  double x = 0;
  if (c.config.type == ColumnType::kLabel && binary_labels_)
    return InvalidArgument(fmt::format("{} '{}': expected 0 or 1", c.config.name, Shown(cell)));
  // Only a dense cell may be empty (it is then `fill`).
  if ((c.config.type == ColumnType::kLabel || !cell.empty()) && !ParseNumber(cell, &x))
    return InvalidArgument(fmt::format("{} '{}': expected a number", c.config.name, Shown(cell)));
  return InvalidArgument(
      fmt::format("{} '{}': out of a float's range", c.config.name, Shown(cell)));
}

Status RowParser::Parse(std::string_view line, float* label, float* dense, int64_t* ids,
                        float* weights) const {
  if (format_ == DataFormat::kLibsvm) return ParseLibsvm(line, label, ids, weights);
  // A wrong number of fields is the error whatever the values: counted
  // only when something is wrong, so a good line is read in one pass.
  auto fail = [&](Status value_error) {
    const size_t fields = 1 + static_cast<size_t>(std::count(line.begin(), line.end(), delimiter_));
    if (fields == columns_.size()) return value_error;
    return InvalidArgument(fmt::format("expected {} {}-separated fields, got {}", columns_.size(),
                                       DelimiterName(delimiter_), fields));
  };
  const size_t n = columns_.size();
  size_t start = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t end = line.find(delimiter_, start);
    if ((end == std::string_view::npos) != (i + 1 == n)) return fail(Status::OK());
    if (end == std::string_view::npos) end = line.size();
    const Column& c = columns_[i];
    const std::string_view cell = line.substr(start, end - start);
    start = end + 1;
    if (c.config.type == ColumnType::kMultiHot) {
      Status s = ParseMultiHot(c, cell, ids, weights);
      if (!s.ok()) return fail(std::move(s));
    } else if (!FastCell(c, cell, label, dense, ids, weights)) {
      return fail(CellError(c, cell));
    }
  }
  return Status::OK();
}

std::string SchemaJson(const DataConfig& config) {
  if (config.format == DataFormat::kIdx) return "";
  static const char* const kTypes[] = {"label", "dense", "categorical", "multi_hot", "skip"};
  static const char* const kTransforms[] = {"none", "log1p", "standardize"};
  const RowParser parser = RowParser::For(config);
  nlohmann::ordered_json columns = nlohmann::ordered_json::array();
  for (const RowParser::Column& c : parser.columns_) {
    nlohmann::ordered_json col = {{"name", c.config.name},
                                  {"type", kTypes[static_cast<int>(c.config.type)]}};
    switch (c.config.type) {
      case ColumnType::kLabel:
        if (c.config.has_threshold) col["threshold"] = c.config.threshold;
        break;
      case ColumnType::kDense:
        col["input_index"] = c.slot;
        col["fill"] = c.config.fill;
        col["transform"] = kTransforms[static_cast<int>(c.config.transform)];
        if (c.config.transform == DenseTransform::kStandardize) {
          col["mean"] = c.config.mean;
          col["std"] = c.config.std;
        }
        break;
      case ColumnType::kCategorical:
      case ColumnType::kMultiHot:
        col["field"] = c.field;
        col["first_slot"] = c.slot;
        col["slots"] = IdSlots(c.config);
        col["ids"] = c.config.raw_ids ? "raw" : "hash";
        col["vocab"] = c.vocab;
        if (!c.config.tables.empty()) col["tables"] = c.config.tables;
        if (c.config.type == ColumnType::kMultiHot && config.format == DataFormat::kCsv)
          col["separator"] = c.config.separator;
        break;
      case ColumnType::kSkip:
        break;
    }
    columns.push_back(std::move(col));
  }
  nlohmann::ordered_json schema = {
      {"format", DataFormatName(config.format)},
      {"vocab", config.vocab},
      {"hash",
       "CriteoHash(field, value) % vocab: 64-bit FNV-1a over field as 4 bytes little-endian, "
       "then the value's bytes, finished by SplitMix64's mix"},
      {"columns", std::move(columns)}};
  if (config.format != DataFormat::kLibsvm) {
    schema["delimiter"] = std::string(1, parser.delimiter_);
    schema["header"] = config.format == DataFormat::kCsv && config.header;
  }
  return schema.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

Status AppendLines(const std::string& path, const DataConfig& config, const RowParser& parser,
                   int64_t max_samples, Dataset* out) {
  const int dense = parser.dense(), fields = parser.fields();
  const bool skip_bad = config.on_bad_row == OnBadRow::kSkip;
  const bool header = config.format == DataFormat::kCsv && config.header;
  auto full = [&] { return max_samples > 0 && out->size() >= max_samples; };
  return ForEachLine(path, full, [&](const TextLine& line) {
    if (header && line.number == 1) return Status::OK();
    const size_t at = out->labels.size();
    out->labels.resize(at + 1);
    out->dense.resize((at + 1) * dense);
    out->sparse.resize((at + 1) * fields);
    if (parser.weighted()) out->weights.resize((at + 1) * fields);
    Status s = parser.Parse(line.text, &out->labels[at], out->dense.data() + at * dense,
                            out->sparse.data() + at * fields,
                            parser.weighted() ? out->weights.data() + at * fields : nullptr);
    if (s.ok()) return s;
    s = s.WithContext(fmt::format("{}: line {} (offset {})", path, line.number, line.offset));
    if (!skip_bad) return s;
    out->labels.resize(at);
    out->dense.resize(at * dense);
    out->sparse.resize(at * fields);
    if (parser.weighted()) out->weights.resize(at * fields);
    if (out->skipped_examples.size() < kNamedBadRows) out->skipped_examples.push_back(s.message());
    ++out->skipped_rows;
    return Status::OK();
  });
}

}  // namespace

Status AppendRows(const std::string& path, const DataConfig& config, int64_t max_samples,
                  Dataset* out) {
  const RowParser parser = RowParser::For(config);
  if (out->sample_shape.empty()) {
    out->sample_shape = {parser.dense()};
    out->fields = parser.fields();
  }
  assert(out->sample_shape == Shape{parser.dense()} && out->fields == parser.fields());
  const int64_t before = out->size();
  try {
    return AppendLines(path, config, parser, max_samples, out);
  } catch (const std::bad_alloc&) {
    // Memory grows with the file's lines: an error naming it, never an abort.
    return Unavailable(fmt::format(
        "{}: not enough memory for its samples (std::bad_alloc after {} of its lines, {} "
        "samples loaded in all, {} MiB)",
        path, out->size() - before, out->size(),
        (out->dense.capacity() * sizeof(float) + out->sparse.capacity() * sizeof(int64_t) +
         out->weights.capacity() * sizeof(float)) >>
            20));
  }
}

}  // namespace pstrain
