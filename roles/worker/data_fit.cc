#include "roles/worker/data_fit.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <string_view>

#include "src/nn/layers.h"
#include "src/nn/loss.h"

namespace pstrain {
namespace {

// Embedding_bag `layer`'s vocab, set by `key`, bounds the ids of the slots
// it reads where no smaller table does.
void NoteVocab(const LayerConfig& layer, const std::string& key, ModelReads* reads) {
  auto note = [&](size_t slot) {
    if (slot >= reads->slot_vocab.size()) return;  // Model::Build refuses the layer
    int64_t& vocab = reads->slot_vocab[slot];
    if (vocab != 0 && vocab <= layer.vocab) return;
    vocab = layer.vocab;
    reads->slot_vocab_key[slot] = key;
  };
  reads->tables_by_column = reads->tables_by_column || !layer.slots.empty();
  if (layer.slots.empty())
    for (size_t slot = 0; slot < reads->slot_vocab.size(); ++slot) note(slot);
  for (int slot : layer.slots) note(static_cast<size_t>(slot));
}

}  // namespace

ModelReads ModelReadsOf(const ModelConfig& config, const Shape& output) {
  ModelReads reads;
  reads.loss = config.loss;
  reads.input = config.input;
  reads.sparse_fields = config.sparse_fields;
  reads.slot_vocab.assign(static_cast<size_t>(std::max(0, config.sparse_fields)), 0);
  reads.slot_vocab_key.resize(reads.slot_vocab.size());
  reads.classes = output.empty() ? 1 : NumElements(output);
  reads.head_key = "model.loss";
  const std::pair<const char*, const std::vector<LayerConfig>*> lists[] = {
      {"layers", &config.layers}, {"wide", &config.wide}, {"deep", &config.deep}};
  for (const auto& [list, layers] : lists) {
    for (size_t i = 0; i < layers->size(); ++i) {
      const LayerConfig& layer = (*layers)[i];
      const std::string key = fmt::format("model.{}[{}]", list, i);
      if (layer.type == LayerType::kEmbeddingBag) NoteVocab(layer, key + ".vocab", &reads);
      // The classes of a sequential softmax model: its last linear layer's.
      if (config.loss == LossType::kSoftmaxCrossEntropy && layer.type == LayerType::kLinear)
        reads.head_key = key + ".out";
    }
  }
  return reads;
}

Status CheckFit(const ModelReads& reads, const Dataset& data, const std::string& features,
                const std::string& labels) {
  if (!reads.input.empty() && data.sample_shape != reads.input)
    return InvalidArgument(fmt::format("model.input is {}, but {} holds samples of {}",
                                       ShapeString(reads.input), features,
                                       ShapeString(data.sample_shape)));
  if (reads.sparse_fields > 0 && data.fields != reads.sparse_fields)
    return InvalidArgument(
        fmt::format("model.sparse_fields is {}, but {} has {} categorical fields a sample",
                    reads.sparse_fields, features, data.fields));
  if (reads.sparse_fields > 0) {
    for (size_t i = 0; i < data.sparse.size(); ++i) {
      const int64_t id = data.sparse[i];
      const size_t slot = i % static_cast<size_t>(data.fields);
      const int64_t vocab = reads.slot_vocab[slot];
      if (vocab == 0 || (id >= 0 && id < vocab)) continue;
      // With table:, a column's ids hash into its tables' vocab, so only
      // data the parser did not check (a bug) gets here.
      const std::string why =
          reads.tables_by_column
              ? std::string("the columns that name a table hash into its vocab")
              : fmt::format("ids go up to data.vocab - 1, so data.vocab must be at most {}", vocab);
      return InvalidArgument(
          fmt::format("{} is {} rows, but {} has id {} (sample {}, field {}): {}",
                      reads.slot_vocab_key[slot], vocab, features, id, i / data.fields, slot, why));
    }
  }
  Status fits = CheckLabels(reads.loss, reads.classes, data.labels);
  if (!fits.ok()) return fits.WithContext(fmt::format("{}: {}", reads.head_key, labels));
  return Status::OK();
}

Status CheckFirstBatches(const DataConfig& config, const ModelReads& reads, int64_t batch) {
  auto files = ReadFirstSamples(config, batch);
  if (!files.ok()) return files.status();
  for (const FileSamples& f : *files)
    PSTRAIN_RETURN_IF_ERROR(CheckFit(reads, f.samples, f.features, f.labels));
  return Status::OK();
}

DataFiles DataFilesOf(DataFormat format, const std::vector<std::string>& paths, const char* key) {
  if (format == DataFormat::kIdx && paths.size() == 2) return {paths[0], paths[1]};
  if (paths.size() == 1) return {paths[0], paths[0]};
  const std::string all = fmt::format("the files of data.{}", key);
  return {all, all};
}

std::string SkippedLines(const Dataset& data, const std::string& key) {
  if (data.skipped_rows == 0) return "";
  return fmt::format(
      "data.{}: skipped {} bad line{} (data.on_bad_row: skip), {} samples kept; the first: {}", key,
      data.skipped_rows, data.skipped_rows == 1 ? "" : "s", data.size(),
      fmt::join(data.skipped_examples, "; "));
}

Status CheckLoaded(const ModelReads& reads, const DataConfig& config, const Dataset& data,
                   const char* which, const Logger& log) {
  const std::string_view set(which);
  const bool held_out = set == "validation" && config.validation_fraction > 0;
  const std::string key = held_out ? "validation_fraction" : std::string(which);
  const std::string skipped = SkippedLines(data, key);
  if (!skipped.empty()) log->warn("{}", skipped);
  if (held_out && data.size() == 0)
    return InvalidArgument(fmt::format(
        "data.validation_fraction {} held out no sample of data.train: nothing to measure",
        config.validation_fraction));
  const std::vector<std::string>& paths = set == "test"         ? config.test
                                          : set == "validation" ? ValidationFiles(config)
                                                                : config.train;
  const DataFiles files = DataFilesOf(config.format, paths, held_out ? "train" : which);
  return CheckFit(reads, data, files.features, files.labels);
}

}  // namespace pstrain
