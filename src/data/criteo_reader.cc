#include "src/data/criteo_reader.h"

#include "src/common/random.h"
#include "src/data/schema_reader.h"

namespace pstrain {

uint64_t CriteoHash(int field, std::string_view value) {
  uint64_t h = 14695981039346656037ULL;  // FNV-1a offset basis
  auto add = [&h](uint8_t byte) {
    h ^= byte;
    h *= 1099511628211ULL;  // FNV-1a prime
  };
  const auto f = static_cast<uint32_t>(field);
  for (int i = 0; i < 4; ++i) add(static_cast<uint8_t>(f >> (8 * i)));
  for (char c : value) add(static_cast<uint8_t>(c));
  return Mix64(h);
}

std::vector<ColumnConfig> CriteoColumns() {
  std::vector<ColumnConfig> columns(kCriteoColumns);
  columns[0].name = "label";
  columns[0].type = ColumnType::kLabel;
  for (int j = 0; j < kCriteoDense; ++j) {
    ColumnConfig& c = columns[1 + j];
    c.name = "I" + std::to_string(j + 1);
    c.type = ColumnType::kDense;
    c.transform = DenseTransform::kLog1p;
  }
  for (int f = 0; f < kCriteoCategorical; ++f) {
    ColumnConfig& c = columns[1 + kCriteoDense + f];
    c.name = "C" + std::to_string(f + 1);
    c.type = ColumnType::kCategorical;
  }
  return columns;
}

Status AppendCriteo(const std::string& path, int64_t vocab, int64_t max_samples, Dataset* out) {
  DataConfig config;
  config.format = DataFormat::kCriteo;
  config.vocab = vocab;
  return AppendRows(path, config, max_samples, out);
}

}  // namespace pstrain
