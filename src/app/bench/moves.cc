// bench embedding --cases move: a server's table of --tier-ids rows
// (adagrad: values and one slot per element), all in memory, gives up the
// rows a third server takes when the job grows from 2 servers to 3 (a
// third of them: comm/ps/row_placement.h), and an empty table takes them
// in, as in a live server join (roles/server/table_moves.h). Timed apart:
// taking them out (ServerRows::TakeRows), encoding and decoding them
// (roles/placement/row_move_codec.h), and putting them in
// (ServerRows::PutRows); rows/s of each, and the bytes moved. The case
// fails unless every row ends in exactly one of the two tables.
#include "src/app/bench/moves.h"

#include <fmt/format.h>

#include <string>

#include "comm/ps/row_placement.h"
#include "roles/placement/row_move_codec.h"
#include "roles/placement/server_tables.h"
#include "roles/server/table_rows.h"
#include "src/app/bench/clock.h"
#include "src/app/bench/json.h"

namespace pstrain {

Status RunMoveBench(const std::vector<int>& dims, const TieredBenchOptions& options) {
  for (int dim : dims) {
    Config config = OneTableConfig("bench", dim);
    auto specs = ServerTables(config);
    if (!specs.ok()) return specs.status();
    ServerTable spec = specs->at(0);
    spec.options.optimizer.type = OptimizerType::kAdagrad;
    auto from = ServerRows::Create(spec, nullptr);
    if (!from.ok()) return from.status();
    auto to = ServerRows::Create(spec, nullptr);
    if (!to.ok()) return to.status();
    // Every row once: made by a lookup, then one update (their slots set).
    constexpr int64_t kChunk = 65536;
    std::vector<int64_t> ids;
    std::vector<float> rows;
    for (int64_t first = 0; first < options.ids; first += kChunk) {
      ids.clear();
      for (int64_t id = first; id < std::min(options.ids, first + kChunk); ++id) ids.push_back(id);
      rows.resize(ids.size() * static_cast<size_t>(dim));
      PSTRAIN_RETURN_IF_ERROR(from->Lookup(ids.data(), ids.size(), rows.data(), first));
      PSTRAIN_RETURN_IF_ERROR(from->ApplyGradients(ids.data(), rows.data(), ids.size(), first));
    }
    BenchClock::time_point t = BenchClock::now();
    auto taken = from->TakeRows([](int64_t id) { return ServerOfId(id, 3) == 2; });
    if (!taken.ok()) return taken.status();
    const double take_s = SecondsSince(t);
    const auto moved = static_cast<int64_t>(taken->size());
    t = BenchClock::now();
    std::string bytes;
    const uint32_t udim = static_cast<uint32_t>(dim);
    EncodeMovedRows({MovedRows{"bench",
                               udim,
                               static_cast<uint32_t>(taken->floats / udim) - 1,
                               0,
                               std::move(*taken),
                               {}}},
                    &bytes);
    const double encode_s = SecondsSince(t);
    t = BenchClock::now();
    auto decoded = DecodeMovedRows(bytes.data(), bytes.size());
    if (!decoded.ok()) return decoded.status();
    const double decode_s = SecondsSince(t);
    t = BenchClock::now();
    PSTRAIN_RETURN_IF_ERROR(to->PutRows(decoded->at(0).rows));
    const double put_s = SecondsSince(t);
    // Every row is in exactly one of the two tables.
    if (to->counters().rows != moved || from->counters().rows + moved != options.ids)
      return Internal(fmt::format("move bench: {} rows moved, the tables hold {} and {} of {}",
                                  moved, from->counters().rows, to->counters().rows, options.ids));
    auto per_s = [&](double s) {
      return Rounded(static_cast<double>(moved) / std::max(s, 1e-9), 0);
    };
    PrintJsonLine({{"bench", "embedding"},
                   {"case", "move"},
                   {"dim", dim},
                   {"rows", options.ids},
                   {"moved_rows", moved},
                   {"bytes", static_cast<int64_t>(bytes.size())},
                   {"take_ms", Rounded(take_s * 1e3, 1)},
                   {"encode_ms", Rounded(encode_s * 1e3, 1)},
                   {"decode_ms", Rounded(decode_s * 1e3, 1)},
                   {"put_ms", Rounded(put_s * 1e3, 1)},
                   {"take_rows_per_s", per_s(take_s)},
                   {"put_rows_per_s", per_s(put_s)}});
  }
  return Status::OK();
}

}  // namespace pstrain
