// PlacedModel: the model a config describes, built, and where each of its
// parameters lives while a job trains. Worked out here once, for the trainer
// (roles/worker/trainer.h), the checkpoint's model layout
// (roles/checkpoint/model_layout.h) and offline evaluation
// (roles/offline/eval.h), so that the three agree:
//   kServers      a dense weight the parameter servers hold and update: no
//                 parameters: rule matches it, or the first that does says
//                 ps: true;
//   kAllReduced   a dense weight every worker holds, its gradients averaged
//                 among the workers: the first matching rule says ps: false;
//   kServerTable  an embedding table the servers hold row by row
//                 (init_in_server: true; roles/placement/server_tables.h).
// A server-held table's rows live on the servers, so in the built model its
// Param has room for one batch's rows only: `max_batch` samples times the
// id slots it reads (each batch's ids renumbered 0..U-1 by whoever gathers
// the rows: roles/placement/id_groups.h).
//
// Pure: reads the config, builds the model (seeded, the same weights every
// time), touches nothing else. Worker-side row caches are not placement;
// the worker makes them from this and its update mode.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "roles/placement/server_tables.h"
#include "src/common/config/config.h"
#include "src/common/status.h"
#include "src/nn/model.h"

namespace pstrain {

enum class ParamPlace { kServers, kAllReduced, kServerTable };

struct PlacedParam {
  Param* param = nullptr;  // owned by PlacedModel::model
  ParamPlace place = ParamPlace::kServers;
  int table = -1;  // kServerTable: its index in PlacedModel::tables
};

struct PlacedModel {
  // config.model as the model was built: each server-held table's vocab is
  // the batch's rows (above).
  ModelConfig model_config;
  std::unique_ptr<Model> model;
  std::vector<ServerTable> tables;  // the server-held tables, as ServerTables lists them
  std::vector<PlacedParam> params;  // every parameter, in model->params() order

  // The parameters at `place`, in the model's order.
  std::vector<Param*> ParamsAt(ParamPlace place) const;
  // The Param of tables[t].
  Param* TableParam(size_t t) const;
};

// Errors: those of ServerTables (naming the config line), then the model's
// own (Model::Build, with config.source as context).
StatusOr<PlacedModel> PlaceModel(const Config& config, int max_batch);

}  // namespace pstrain
