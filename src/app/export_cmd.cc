// pstrain export: a checkpoint's weights as an .npz numpy reads alone
// (roles/offline/export.h).
#include <cstdio>

#include "roles/offline/export.h"
#include "src/app/commands.h"

namespace pstrain {

int RunExport(const ExportOptions& options) {
  if (options.checkpoint_dir.empty() || options.out_path.empty()) {
    std::fputs("pstrain export: needs --checkpoint DIR and --out FILE.npz\n", stderr);
    return 2;
  }
  const std::string& out = options.out_path;
  if (out.size() < 4 || out.compare(out.size() - 4, 4, ".npz") != 0) {
    std::fprintf(stderr, "pstrain export: --out %s: only .npz is written\n", out.c_str());
    return 2;
  }
  auto done = ExportCheckpoint(options.checkpoint_dir, out);
  if (!done.ok()) {
    std::fprintf(stderr, "pstrain export: %s\n", done.status().message().c_str());
    return 1;
  }
  std::printf("exported step %lld of %s to %s: %zu dense weights, %zu tables (%lld rows)\n",
              static_cast<long long>(done->step), options.checkpoint_dir.c_str(), out.c_str(),
              done->dense, done->tables, static_cast<long long>(done->table_rows));
  return 0;
}

}  // namespace pstrain
