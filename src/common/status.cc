#include "src/common/status.h"

namespace pstrain {

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  return Status(code_, std::string(context) + ": " + message_);
}

std::string Status::ToString() const { return ok() ? std::string("OK") : message_; }

}  // namespace pstrain
