// Reading the `data:` section of the config and its `columns:` schema. What
// each field means, and its default, is in model_config.h; this file checks
// that the values are in range and fit together, so src/data can trust them.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "src/common/config/config.h"
#include "src/common/config/reader.h"
#include "src/common/config/sizes.h"

namespace pstrain {
namespace config_internal {
namespace {

// Bounds on a schema, so that a small config cannot ask a reader for huge
// rows: columns of a line, and id slots of one multi_hot column.
constexpr int kMaxColumns = 100000;
constexpr int kMaxIdsPerColumn = 100000;
constexpr int64_t kMaxIdSlots = 1 << 20;  // of a sample, over all id columns
constexpr size_t kMaxSeparatorBytes = 8;

const char* ColumnTypeName(ColumnType type) {
  switch (type) {
    case ColumnType::kLabel:
      return "label";
    case ColumnType::kDense:
      return "dense";
    case ColumnType::kCategorical:
      return "categorical";
    case ColumnType::kMultiHot:
      return "multi_hot";
    case ColumnType::kSkip:
      return "skip";
  }
  return "unknown";
}

// The keys each column type takes besides `name` and `type`.
std::vector<std::string> ColumnKeys(ColumnType type) {
  switch (type) {
    case ColumnType::kLabel:
      return {"threshold"};
    case ColumnType::kDense:
      return {"fill", "transform", "mean", "std"};
    case ColumnType::kCategorical:
      return {"ids", "table"};
    case ColumnType::kMultiHot:
      return {"ids", "table", "separator", "max_ids"};
    case ColumnType::kSkip:
      return {};
  }
  return {};
}

std::vector<Field> ColumnFields(ColumnConfig* c) {
  auto threshold = Float("threshold", &c->threshold, Bound::kAny);
  return {Required(NonEmptyString("name", &c->name)),
          Required(Enum("type", &c->type,
                        {ColumnType::kLabel, ColumnType::kDense, ColumnType::kCategorical,
                         ColumnType::kMultiHot, ColumnType::kSkip},
                        &ColumnTypeName)),
          {"threshold",
           [c, threshold](const Value& v) {
             c->has_threshold = true;
             return threshold.read(v);
           }},
          Float("fill", &c->fill, Bound::kAny),
          Enum("transform", &c->transform,
               {{"none", DenseTransform::kNone},
                {"log1p", DenseTransform::kLog1p},
                {"standardize", DenseTransform::kStandardize}}),
          Float("mean", &c->mean, Bound::kAny),
          Float("std", &c->std, Bound::kPositive),
          Enum("ids", &c->raw_ids, {{"hash", false}, {"raw", true}}),
          Strings("table", "an embedding_bag layer's name or a non-empty list of them", &c->tables),
          NonEmptyString("separator", &c->separator),
          Int("max_ids", &c->max_ids, 1, kMaxIdsPerColumn)};
}

Status ReadColumn(const Value& v, ColumnConfig* c) {
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, ColumnFields(c), &lines));
  const std::vector<std::string> allowed = ColumnKeys(c->type);
  for (const auto& [key, line] : lines) {
    if (key == "name" || key == "type") continue;
    bool ok = false;
    for (const std::string& k : allowed) ok = ok || k == key;
    if (!ok) {
      return v.Key(key, line).Error(
          fmt::format("not a key of a {} column", ColumnTypeName(c->type)));
    }
  }
  if (c->type == ColumnType::kMultiHot && lines.count("max_ids") == 0) {
    return v.Key("max_ids", v.line)
        .Error("required key of a multi_hot column is missing (the most values a row holds)");
  }
  if (c->separator.size() > kMaxSeparatorBytes)
    return v.Key("separator", lines["separator"])
        .Error(fmt::format("expected at most {} bytes", kMaxSeparatorBytes));
  const bool standardize = c->transform == DenseTransform::kStandardize;
  for (const char* key : {"mean", "std"}) {
    if (standardize && lines.count(key) == 0)
      return v.Key(key, v.line)
          .Error("required with transform: standardize (the training data's mean and std)");
    if (!standardize && lines.count(key) > 0)
      return v.Key(key, lines[key]).Error("only used with transform: standardize");
  }
  return Status::OK();
}

Status ReadColumns(const Value& v, std::vector<ColumnConfig>* columns) {
  return ReadNonEmptyList(v, "a non-empty list of columns", [&](const Value& item) {
    if (columns->size() >= static_cast<size_t>(kMaxColumns))
      return item.Error(fmt::format("a line has at most {} columns", kMaxColumns));
    ColumnConfig& c = columns->emplace_back();
    c.line = item.line;
    return ReadColumn(item, &c);
  });
}

std::vector<Field> DataFields(const std::string& base_dir, DataConfig* data) {
  return {
      Required(Enum("format", &data->format,
                    {DataFormat::kIdx, DataFormat::kCriteo, DataFormat::kCsv, DataFormat::kLibsvm},
                    &DataFormatName)),
      Required(Paths("train", base_dir, &data->train)),
      Paths("test", base_dir, &data->test),
      Paths("validation", base_dir, &data->validation),
      Float("validation_fraction", &data->validation_fraction, Bound::kUnitInterval),
      Int("vocab", &data->vocab, 1, kMaxEmbeddingVocab),
      Int("limit", &data->limit, 0),
      Bool("shuffle", &data->shuffle),
      Section("columns", &data->columns, &ReadColumns, &KeysOf<ColumnConfig, &ColumnFields>,
              /*list=*/true),
      NonEmptyString("delimiter", &data->delimiter),
      Bool("header", &data->header),
      Enum("on_bad_row", &data->on_bad_row,
           {{"fail", OnBadRow::kFail}, {"skip", OnBadRow::kSkip}})};
}

std::vector<Field> DataFieldsNoBase(DataConfig* data) { return DataFields("", data); }

// The columns of a csv or libsvm schema fit together.
Status CheckColumns(const Value& v, const std::map<std::string, int>& lines,
                    const DataConfig& data) {
  const Value at = v.Key("columns", lines.at("columns"));
  std::set<std::string> names;
  int labels = 0;
  int64_t slots = 0;
  for (size_t i = 0; i < data.columns.size(); ++i) {
    const ColumnConfig& c = data.columns[i];
    const Value item{v.source, v.node, fmt::format("{}[{}]", at.path, i), c.line};
    slots += IdSlots(c);
    if (slots > kMaxIdSlots)
      return item.Error(
          fmt::format("the id columns up to here give a sample {} id slots; at most {} in all",
                      slots, kMaxIdSlots));
    if (!names.insert(c.name).second)
      return item.Key("name", c.line).Error(fmt::format("'{}' names another column too", c.name));
    labels += c.type == ColumnType::kLabel;
    if (c.type == ColumnType::kMultiHot && data.format == DataFormat::kCsv &&
        c.separator.find(data.delimiter) != std::string::npos)
      return item.Key("separator", c.line)
          .Error(fmt::format("'{}' holds data.delimiter '{}', which ends the column", c.separator,
                             data.delimiter));
  }
  if (labels != 1)
    return at.Error(fmt::format("expected exactly one column of type label, got {}", labels));
  if (data.format != DataFormat::kLibsvm) return Status::OK();
  // libsvm: `label id:value id:value ...`, so a label, then the features.
  const bool fits = data.columns.size() == 2 && data.columns[0].type == ColumnType::kLabel &&
                    data.columns[1].type == ColumnType::kMultiHot;
  if (!fits)
    return at.Error(
        "a libsvm line is a label and then its id:value pairs: expected [{type: label}, {type: "
        "multi_hot, max_ids: N}]");
  if (data.columns[1].separator != "|")
    return at.Error("a libsvm line's pairs are separated by blanks: leave out separator");
  return Status::OK();
}

}  // namespace

std::vector<Field> DataFieldKeys() { return KeysOf<DataConfig, &DataFieldsNoBase>(); }

Status ReadData(const Value& v, const std::string& base_dir, DataConfig* data) {
  *data = DataConfig{};
  data->line = v.line;
  std::map<std::string, int> lines;
  PSTRAIN_RETURN_IF_ERROR(ReadMap(v, DataFields(base_dir, data), &lines));
  const bool text = data->format != DataFormat::kIdx;
  const bool schema = data->format == DataFormat::kCsv || data->format == DataFormat::kLibsvm;
  const char* format = DataFormatName(data->format);
  auto only = [&](const char* key, bool allowed, const char* formats) -> Status {
    if (allowed || lines.count(key) == 0) return Status::OK();
    return v.Key(key, lines[key])
        .Error(fmt::format("only used with format: {} (this is {})", formats, format));
  };
  PSTRAIN_RETURN_IF_ERROR(only("vocab", text, "criteo, csv or libsvm"));
  PSTRAIN_RETURN_IF_ERROR(only("on_bad_row", text, "criteo, csv or libsvm"));
  PSTRAIN_RETURN_IF_ERROR(only("columns", schema, "csv or libsvm (criteo's are fixed)"));
  PSTRAIN_RETURN_IF_ERROR(only("delimiter", data->format == DataFormat::kCsv, "csv"));
  PSTRAIN_RETURN_IF_ERROR(only("header", data->format == DataFormat::kCsv, "csv"));
  if (schema && lines.count("columns") == 0)
    return v.Key("columns", v.line)
        .Error(fmt::format("required key is missing: what each column of a {} line is", format));
  if (data->delimiter.size() != 1)
    return v.Key("delimiter", lines["delimiter"])
        .Error(fmt::format("expected one character (\"\\t\" for tabs), got '{}'", data->delimiter));
  if (schema) PSTRAIN_RETURN_IF_ERROR(CheckColumns(v, lines, *data));
  if (lines.count("validation") > 0 && lines.count("validation_fraction") > 0)
    return v.Key("validation_fraction", lines["validation_fraction"])
        .Error(fmt::format("cannot be combined with data.validation (line {}): the validation set "
                           "is either files or a share of train",
                           lines["validation"]));
  if (data->format != DataFormat::kIdx) return Status::OK();
  for (const auto& [key, paths] :
       {std::make_pair("train", &data->train), std::make_pair("test", &data->test),
        std::make_pair("validation", &data->validation)}) {
    if (lines.count(key) > 0 && paths->size() != 2) {
      return v.Key(key, lines[key])
          .Error(fmt::format("an idx data set is [images, labels], got {} path{}", paths->size(),
                             paths->size() == 1 ? "" : "s"));
    }
  }
  return Status::OK();
}

}  // namespace config_internal
}  // namespace pstrain
