// What a backup takes from its primary for a server-held table
// (roles/server/table_replica_codec.h) fed arbitrary bytes (seeds: a
// lookup, an update and a state, corpus/table_replica_fuzz/). Byte 0 picks
// which: even, a change whose rows have 1 + (byte / 2) % 16 floats; odd, a
// state. The rest is the payload.
// Beyond the sanitizers:
//   - an error is one line naming the table;
//   - what is taken is canonical: encoding it again gives the same bytes;
//     a change holds at most 64 ids, and an update a gradient row per id.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "roles/server/table_replica_codec.h"
#include "tests/fuzz/fuzz_util.h"

namespace {

void CheckError(const pstrain::Status& status) {
  const std::string m = status.message();
  if (m.find('\n') != std::string::npos) pstrain::fuzz::Fail("an error of more than one line", m);
  if (m.find("table 'emb'") == std::string::npos)
    pstrain::fuzz::Fail("an error naming no table", m);
}

void Same(const std::vector<uint8_t>& again, const uint8_t* data, size_t size) {
  if (again.size() != size || std::memcmp(again.data(), data, size) != 0)
    pstrain::fuzz::Fail("what was taken is not its own encoding");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  if (size < 1) return 0;
  const uint8_t pick = data[0];
  ++data;
  --size;
  if (pick % 2 == 1) {
    auto state = DecodeTableState(data, size, "emb");
    if (!state.ok()) {
      CheckError(state.status());
      return 0;
    }
    if (state->core.members.size() != state->core.pushes.size())
      fuzz::Fail("members and pushes differ in size");
    Same(EncodeTableState(state->core, state->rows), data, size);
    return 0;
  }
  const int dim = 1 + (pick / 2) % 16;
  auto change = DecodeTableChange(data, size, "emb", dim, 64);
  if (!change.ok()) {
    CheckError(change.status());
    return 0;
  }
  const size_t n = change->ids.size();
  if (n > 64) fuzz::Fail("a change of more ids than allowed");
  const bool update = change->op == TableOp::kApply;
  if (change->grads.size() != (update ? n * dim : 0)) fuzz::Fail("gradients not one row per id");
  Same(EncodeTableChange(change->op, change->step, change->ids.data(), n,
                         update ? change->grads.data() : nullptr, dim),
       data, size);
  return 0;
}
