// Checks between a config's sections, once each is read (either may come
// first in the file): the rules against train:, and evaluation against data:.
#include <fmt/format.h>

#include "src/common/config/config.h"
#include "src/common/config/reader.h"

namespace pstrain {
namespace config_internal {

// The line of `key` in the mapping `map` (which ReadMap read, so it holds it).
int KeyLine(const YAML::Node& map, const char* key) {
  for (const auto& entry : map)
    if (entry.first.IsScalar() && entry.first.Scalar() == key) return entry.first.Mark().line + 1;
  return 0;
}

namespace {

// What measures the validation set must have one, and the metric must be
// one the loss gives (src/data/metrics.h).
Status CheckEvaluationAgainstData(const Value& doc, const Config& config) {
  const YAML::Node train = doc.node["train"];
  const Value at{doc.source, train, "train", KeyLine(doc.node, "train")};
  const bool validation = HasValidation(config.data);
  auto keep_best = [&] {
    return at.Key("checkpoint", KeyLine(train, "checkpoint"))
        .Key("keep_best", KeyLine(train["checkpoint"], "keep_best"));
  };
  if (config.train.early_stopping) {
    const Value es = at.Key("early_stopping", config.train.early_stopping->line);
    if (!validation)
      return es.Error(
          "needs data.validation or data.validation_fraction: the samples whose metric it "
          "watches");
    const std::string& metric = config.train.early_stopping->metric;
    const char* own = config.model.loss == LossType::kSoftmaxCrossEntropy ? "accuracy"
                      : config.model.loss == LossType::kBceWithLogits     ? "auc"
                                                                          : "rmse";
    const bool fits = metric.empty() || metric == own ||
                      (metric == "logloss" && config.model.loss == LossType::kBceWithLogits);
    if (!fits)
      return es.Key("metric", KeyLine(train["early_stopping"], "metric"))
          .Error(fmt::format("{} is not measured for loss {} (it gives {}{})", metric,
                             LossTypeName(config.model.loss), own,
                             config.model.loss == LossType::kBceWithLogits ? " and logloss" : ""));
  }
  // Mode average checkpoints only where a round of averaging ends, which
  // an epoch's end need not be.
  if (config.train.mode == UpdateMode::kAverage) {
    if (config.train.early_stopping)
      return at.Key("early_stopping", config.train.early_stopping->line)
          .Error("does not work with mode: average yet (an epoch's end is no averaging round)");
    if (config.train.checkpoint && config.train.checkpoint->keep_best)
      return keep_best().Error(
          "does not work with mode: average yet (an epoch's end is no averaging round)");
  }
  if (config.train.checkpoint && config.train.checkpoint->keep_best && !validation)
    return keep_best().Error(
        "needs data.validation or data.validation_fraction: the best checkpoint is the one "
        "of the best validation metric");
  return Status::OK();
}

// A csv or libsvm schema says what a sample holds: its dense columns are
// the model's input, its id slots (one per categorical column, max_ids per
// multi_hot one) the model's sparse_fields.
Status CheckModelAgainstData(const Value& doc, const Config& config) {
  const DataConfig& data = config.data;
  if (data.columns.empty() || !doc.node["model"]) return Status::OK();
  int64_t dense = 0, fields = 0;
  bool weighted = false;
  for (const ColumnConfig& c : data.columns) {
    dense += c.type == ColumnType::kDense;
    fields += IdSlots(c);
    weighted = weighted || c.type == ColumnType::kMultiHot;
  }
  const ModelConfig& m = config.model;
  const Value model{doc.source, doc.node["model"], "model", KeyLine(doc.node, "model")};
  const std::string columns =
      fmt::format("data.columns (line {})", KeyLine(doc.node["data"], "columns"));
  if (m.sparse_fields > 0 && m.sparse_fields != fields)
    return model.Key("sparse_fields", KeyLine(model.node, "sparse_fields"))
        .Error(fmt::format("is {}, but {} give a sample {} id slots (one per categorical "
                           "column, max_ids per multi_hot column)",
                           m.sparse_fields, columns, fields));
  if (!m.input.empty() && m.input != std::vector<int64_t>{dense})
    return model.Key("input", m.input_line)
        .Error(fmt::format("expected [{}]: {} have {} dense columns", dense, columns, dense));
  if (weighted && m.device == Device::kGpu)
    return model.Key("device", KeyLine(model.node, "device"))
        .Error(fmt::format("gpu does not weigh ids, which the multi_hot columns of {} need; use "
                           "device: cpu",
                           columns));
  return Status::OK();
}

// Rules that contradict train: (either section may come first in the file).
// mode: average sends weights every N steps, not gradients: a rule's
// compression would be ignored, like train.compression.
Status CheckRulesAgainstTrain(const Value& doc, const Config& config) {
  // Which rows max_rows drops among rows touched at the same step depends
  // on where they are (memory or disk), which a backup's copy of a table
  // with rows on disk does not share with its primary.
  if (config.train.replication.replicas > 0) {
    for (size_t i = 0; i < config.parameters.size(); ++i) {
      const ParameterRule& rule = config.parameters[i];
      if (!rule.init_in_server || rule.max_rows == 0 ||
          (rule.server_cache_rows == 0 && rule.server_cache_bytes == 0))
        continue;
      const YAML::Node rules = doc.node["parameters"];
      const Value at{doc.source, rules[i], fmt::format("parameters[{}]", i), rule.line};
      return at.Key("max_rows", KeyLine(rules[i], "max_rows"))
          .Error(
              "a table with rows on disk and max_rows has no backups yet: with "
              "train.replication, drop max_rows (evict_after_steps bounds it too), or keep the "
              "table in memory");
    }
  }
  if (config.train.mode != UpdateMode::kAverage) return Status::OK();
  for (size_t i = 0; i < config.parameters.size(); ++i) {
    const ParameterRule& rule = config.parameters[i];
    if (!rule.compression || !rule.compression->enabled()) continue;
    const YAML::Node rules = doc.node["parameters"];
    const Value at{doc.source, rules[i], fmt::format("parameters[{}]", i), rule.line};
    return at.Key("compression", KeyLine(rules[i], "compression"))
        .Error("is not used with mode: average");
  }
  return Status::OK();
}

// train.clip_norm against the rules and the model: the paths whose
// gradients it cannot see yet.
Status CheckClippingAgainstRules(const Value& doc, const Config& config) {
  if (!(config.train.clip_norm > 0)) return Status::OK();
  const YAML::Node rules = doc.node["parameters"];
  for (size_t i = 0; i < config.parameters.size(); ++i) {
    const ParameterRule& rule = config.parameters[i];
    const Value at{doc.source, rules[i], fmt::format("parameters[{}]", i), rule.line};
    if (rule.compression && rule.compression->enabled())
      return at.Key("compression", KeyLine(rules[i], "compression"))
          .Error(
              "does not work with train.clip_norm: the encoders delay part of each gradient, so "
              "no step holds its whole gradient");
  }
  if (config.model.device == Device::kGpu && doc.node["model"]) {
    const Value model{doc.source, doc.node["model"], "model", KeyLine(doc.node, "model")};
    return model.Key("device", KeyLine(model.node, "device"))
        .Error("gpu does not clip gradients yet (train.clip_norm); use device: cpu");
  }
  return Status::OK();
}

}  // namespace

Status CheckAcrossSections(const Value& doc, Config* config) {
  PSTRAIN_RETURN_IF_ERROR(CheckRulesAgainstTrain(doc, *config));
  PSTRAIN_RETURN_IF_ERROR(CheckClippingAgainstRules(doc, *config));
  PSTRAIN_RETURN_IF_ERROR(CheckEvaluationAgainstData(doc, *config));
  PSTRAIN_RETURN_IF_ERROR(CheckModelAgainstData(doc, *config));
  return BindColumnTables(doc, config);
}

}  // namespace config_internal
}  // namespace pstrain
