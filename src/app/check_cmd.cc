// Placeholder until `pstrain check` is built (issue 14).
#include <cstdio>

#include "src/app/commands.h"

namespace pstrain {

int RunCheck(const CheckOptions&) {
  std::fputs("pstrain check: not built yet\n", stderr);
  return 1;
}

}  // namespace pstrain
