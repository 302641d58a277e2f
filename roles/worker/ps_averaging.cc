#include "roles/worker/ps_averaging.h"

#include <fmt/format.h>

#include <cstring>

#include "optim/threshold_codec.h"

namespace pstrain {

StatusOr<std::unique_ptr<PsAveraging>> PsAveraging::Create(const Config& config,
                                                           std::vector<Param*> params) {
  std::unique_ptr<PsAveraging> a(new PsAveraging(config.train.average_every, std::move(params)));
  for (Param* p : a->params_) {
    auto optimizer = MakeDenseOptimizer(OptimizerFor(config, p->name), p->value.size());
    if (!optimizer.ok())
      return optimizer.status().WithContext(fmt::format("local optimizer of '{}'", p->name));
    a->optimizers_.push_back(std::move(*optimizer));
    a->anchors_.emplace_back(p->value.size());
    a->deltas_.emplace_back(p->value.size());
  }
  return a;
}

void PsAveraging::Anchor(int64_t steps) {
  for (size_t t = 0; t < params_.size(); ++t) {
    const float* w = params_[t]->value.ptr();
    anchors_[t].assign(w, w + anchors_[t].size());
    // Only the schedule's place: set once from the steps done, the same
    // value counting would reach.
    optimizers_[t]->set_steps(static_cast<uint64_t>(steps));
  }
}

void PsAveraging::LocalStep() {
  for (size_t t = 0; t < params_.size(); ++t)
    optimizers_[t]->Update(params_[t]->value.ptr(), params_[t]->grad.ptr());
}

namespace {

std::string SlotSection(const Param& p, const DenseOptimizer& o, int k) {
  return fmt::format("optimizer/{}/{}", p.name, o.slot_name(k));
}

}  // namespace

std::vector<Section> PsAveraging::State() const {
  std::vector<Section> state;
  for (size_t t = 0; t < params_.size(); ++t) {
    DenseOptimizer& o = *optimizers_[t];
    for (int k = 0; k < o.num_slots(); ++k) {
      const auto* slot = reinterpret_cast<const uint8_t*>(o.slot(k));
      state.push_back({SlotSection(*params_[t], o, k), {slot, slot + o.size() * sizeof(float)}});
    }
  }
  return state;
}

Status PsAveraging::Restore(const SectionsByName& sections) {
  // Pass 0 checks every section, pass 1 restores: all or nothing.
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t t = 0; t < params_.size(); ++t) {
      DenseOptimizer& o = *optimizers_[t];
      for (int k = 0; k < o.num_slots(); ++k) {
        const std::string name = SlotSection(*params_[t], o, k);
        auto bytes = FindSection(sections, name, o.size() * sizeof(float));
        if (!bytes.ok()) return bytes.status();
        if (pass == 0)
          PSTRAIN_RETURN_IF_ERROR(CheckFiniteFloats((*bytes)->data(), o.size()).WithContext(name));
        else
          std::memcpy(o.slot(k), (*bytes)->data(), (*bytes)->size());
      }
    }
  }
  return Status::OK();
}

float* PsAveraging::Delta(size_t t) {
  const float* w = params_[t]->value.ptr();
  std::vector<float>& d = deltas_[t];
  for (size_t i = 0; i < d.size(); ++i) d[i] = w[i] - anchors_[t][i];
  return d.data();
}

}  // namespace pstrain
