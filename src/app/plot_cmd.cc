// Placeholder until `pstrain plot` is built (issue 14).
#include <cstdio>

#include "src/app/commands.h"

namespace pstrain {

int RunPlot(const PlotOptions&) {
  std::fputs("pstrain plot: not built yet\n", stderr);
  return 1;
}

}  // namespace pstrain
