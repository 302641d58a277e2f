// Placeholder until `pstrain eval` is built (issue 14).
#include <cstdio>

#include "src/app/commands.h"

namespace pstrain {

int RunEval(const EvalOptions&) {
  std::fputs("pstrain eval: not built yet\n", stderr);
  return 1;
}

}  // namespace pstrain
