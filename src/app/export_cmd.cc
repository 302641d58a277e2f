// Placeholder until `pstrain export` is built (issue 14).
#include <cstdio>

#include "src/app/commands.h"

namespace pstrain {

int RunExport(const ExportOptions&) {
  std::fputs("pstrain export: not built yet\n", stderr);
  return 1;
}

}  // namespace pstrain
