// Reading click and tabular data by schema: csv lines (any one-byte
// delimiter, a header line or not) and libsvm lines (`label id:value ...`),
// each column a label, a dense feature, a categorical value or a multi-hot
// list of them (data.columns, docs/formats.md "Data by schema"). Criteo's
// TSV is one such schema (criteo_reader.h).
//
// A sample's dense features are its dense columns in order; its ids are one
// slot per categorical column and max_ids slots per multi_hot column, in
// column order. A categorical value v of the k-th id column (0-based,
// counting categorical and multi_hot columns) becomes CriteoHash(k, v) %
// vocab, or v itself with `ids: raw`; vocab is the column's tables' when it
// names them (`table:`), else data.vocab. A multi_hot column's unused slots hold
// the column's empty-value id with weight 0, so they add nothing to a sum;
// a libsvm pair's value is its id's weight, a csv value's weight is 1.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "src/common/config/model_config.h"
#include "src/common/status.h"
#include "src/data/criteo_reader.h"
#include "src/data/dataset.h"

namespace pstrain {

class RowParser {
 public:
  // `columns` as ReadData checked them (or a preset); `format` kCsv or
  // kLibsvm; `delimiter` one byte (csv).
  RowParser(DataFormat format, const std::vector<ColumnConfig>& columns, char delimiter,
            int64_t vocab);
  // The parser of `config`'s lines (criteo: its preset).
  static RowParser For(const DataConfig& config);
  friend std::string SchemaJson(const DataConfig& config);

  int dense() const { return dense_; }
  int fields() const { return fields_; }
  // Whether ids carry weights (a multi_hot column): Dataset::weights.
  bool weighted() const { return weighted_; }

  // Parses one line into label, dense[dense()], ids[fields()] and, when
  // weighted(), weights[fields()]. The message of an error says what is
  // wrong with the line (no location).
  Status Parse(std::string_view line, float* label, float* dense, int64_t* ids,
               float* weights) const;

 private:
  struct Column {
    ColumnConfig config;
    int field = -1;     // hash field index (id columns)
    int slot = 0;       // first id slot, or index of the dense feature
    int64_t vocab = 0;  // id columns: ids are below it (its tables', or data.vocab)
    int64_t empty_id = 0;
  };
  Status ParseLibsvm(std::string_view line, float* label, int64_t* ids, float* weights) const;
  bool FastCell(const Column& c, std::string_view cell, float* label, float* dense, int64_t* ids,
                float* weights) const;
  Status CellError(const Column& c, std::string_view cell) const;
  Status ParseMultiHot(const Column& c, std::string_view cell, int64_t* ids, float* weights) const;
  Status Id(const Column& c, std::string_view value, int64_t* id) const;
  Status RawId(const Column& c, std::string_view value, int64_t* id) const;
  static int64_t HashedId(const Column& c, std::string_view value) {
    return static_cast<int64_t>(CriteoHash(c.field, value) % static_cast<uint64_t>(c.vocab));
  }

  DataFormat format_;
  bool binary_labels_ = false;  // criteo: a label is "0" or "1"
  char delimiter_;
  std::vector<Column> columns_;
  int dense_ = 0;
  int fields_ = 0;
  bool weighted_ = false;
};

// How a line of `config`'s text data becomes a sample, as JSON that a
// model served outside pstrain needs: the format, vocab, delimiter and
// header, and per column its name, type and options, an id column's field
// (its CriteoHash field index) and id slots [first, first + count); with
// "hash" naming the hash (docs/formats.md). "" for idx data.
std::string SchemaJson(const DataConfig& config);

// Appends the samples of `path` to `out`, stopping once `out` holds
// `max_samples` (0: no limit). Bad lines fail the read, or with
// on_bad_row skip are counted in out->skipped_rows. Every error names the
// file, the line (1-based) and the byte offset of the line's start.
Status AppendRows(const std::string& path, const DataConfig& config, int64_t max_samples,
                  Dataset* out);

}  // namespace pstrain
