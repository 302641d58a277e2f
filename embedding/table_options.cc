#include "embedding/table_options.h"

#include <fmt/format.h>

#include <cmath>

#include "optim/dense_optimizer.h"

namespace pstrain {
namespace {

template <typename T>
Status Check(const EmbeddingTableOptions& o, const char* field, T value, bool ok,
             const char* expected) {
  if (ok) return Status::OK();
  return InvalidArgument(
      fmt::format("embedding table '{}': {} must be {}, got {}", o.name, field, expected, value));
}

}  // namespace

Status EmbeddingTableOptions::Validate() const {
  if (name.empty()) return InvalidArgument("embedding table: name must not be empty");
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "dim", dim, dim > 0, "> 0"));
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "vocab", vocab, vocab >= 0, ">= 0 (0: hashed ids)"));
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "init", static_cast<int>(init),
                                init == EmbeddingInit::kNormal || init == EmbeddingInit::kUniform ||
                                    init == EmbeddingInit::kZeros,
                                "normal, uniform or zeros"));
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "init_scale", init_scale,
                                std::isfinite(init_scale) && init_scale >= 0.0f,
                                "finite and >= 0"));
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "admit_after", admit_after,
                                admit_after >= 0 && admit_after < (int64_t{1} << 31),
                                "in [0, 2^31)"));
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "max_pending_ids", max_pending_ids,
                                admit_after <= 1 || max_pending_ids > 0, "> 0"));
  PSTRAIN_RETURN_IF_ERROR(
      Check(*this, "evict_after_steps", evict_after_steps, evict_after_steps >= 0, ">= 0"));
  PSTRAIN_RETURN_IF_ERROR(Check(*this, "max_rows", max_rows, max_rows >= 0 && max_rows < (1 << 30),
                                ">= 0 and < 2^30 (0: unlimited)"));
  const Status optimizer_status = ValidateOptimizerConfig(optimizer);
  if (!optimizer_status.ok()) {
    return optimizer_status.WithContext(fmt::format("embedding table '{}'", name));
  }
  return Status::OK();
}

StatusOr<EmbeddingInit> ParseEmbeddingInit(const std::string& text) {
  if (text == "normal") return EmbeddingInit::kNormal;
  if (text == "uniform") return EmbeddingInit::kUniform;
  if (text == "zeros") return EmbeddingInit::kZeros;
  return InvalidArgument(
      fmt::format("embedding init must be normal, uniform or zeros, got '{}'", text));
}

const char* EmbeddingInitName(EmbeddingInit init) {
  switch (init) {
    case EmbeddingInit::kNormal:
      return "normal";
    case EmbeddingInit::kUniform:
      return "uniform";
    case EmbeddingInit::kZeros:
      return "zeros";
  }
  return "unknown";
}

}  // namespace pstrain
