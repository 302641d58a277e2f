// The text of `pstrain --help`.
#pragma once

namespace pstrain {
const char* UsageText();
}
