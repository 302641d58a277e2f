#include "src/data/criteo_reader.h"

#include "src/data/schema_reader.h"

namespace pstrain {

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
