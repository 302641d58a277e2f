#include "roles/server/pull_deltas.h"

#include <cassert>
#include <random>
#include <set>

#include "optim/threshold_codec.h"

namespace pstrain {

PullDeltas::PullDeltas(int workers, int64_t n, double density)
    : n_(n), density_(density), held_(static_cast<size_t>(workers)) {
  std::random_device random;
  // Never 0 (0 names no view); the top bit clear leaves 2^63 views before a wrap.
  next_seq_ = ((uint64_t{random()} << 32 | random()) >> 1) + 1;
}

int64_t PullDeltas::views() const {
  std::set<const View*> distinct;
  for (const auto& v : held_)
    if (v) distinct.insert(v.get());
  return static_cast<int64_t>(distinct.size());
}

const std::vector<float>* PullDeltas::view(int worker) const {
  const auto& v = held_[static_cast<size_t>(worker)];
  return v ? &v->values : nullptr;
}

PullDeltas::Answered PullDeltas::Dense(const std::shared_ptr<const FloatBuffer>& values) {
  auto to = std::make_shared<View>();
  to->seq = next_seq_++;
  to->values.assign(values->begin(), values->end());
  return {nullptr, values, std::move(to), nullptr};
}

PullDeltas::Answered PullDeltas::Delta(const std::shared_ptr<const View>& from,
                                       const std::shared_ptr<const FloatBuffer>& values) {
  change_.resize(static_cast<size_t>(n_));
  const float* now = values->data();
  const float* before = from->values.data();
  for (int64_t i = 0; i < n_; ++i) change_[i] = now[i] - before[i];
  // Fewer than the share changed at all: send every change (the least
  // positive tau sends each non-zero, normal one).
  const float tau = MagnitudeQuantile(change_.data(), nullptr, n_, density_, &sample_);
  if (zeros_.size() != change_.size()) zeros_.assign(change_.size(), 0.0f);
  auto message = std::make_shared<std::vector<uint8_t>>();
  EncodeThresholdValues(change_.data(), zeros_.data(), n_, tau, message.get());
  auto to = std::make_shared<View>();
  to->seq = next_seq_++;
  to->values = from->values;
  // The worker's own decoder on the same bytes: the same float additions
  // (our own message always decodes).
  const Status applied =
      DecodeThresholdAdd(message->data(), message->size(), n_, 1.0f, to->values.data());
  assert(applied.ok());
  (void)applied;
  return {from, values, std::move(to), std::move(message)};
}

std::pair<PullReply, Payload> PullDeltas::Answer(const PullRequest& request, int64_t clock,
                                                 const std::shared_ptr<const FloatBuffer>& values) {
  assert(values->size() == static_cast<size_t>(n_));
  std::shared_ptr<const View>& held = held_[static_cast<size_t>(request.worker)];
  std::shared_ptr<const View> from;
  if (held && request.have_seq != 0 && request.have_seq == held->seq) from = held;
  // Another worker already got the answer for this view and these values:
  // share it (and its view) rather than make another.
  if (!(last_.to && last_.from == from && last_.values == values))
    last_ = from ? Delta(from, values) : Dense(values);
  held = last_.to;
  PullReply reply{clock, PushEncoding::kDense, last_.to->seq};
  if (!last_.message) {
    ++dense_answers_;
    return {reply, Payload{reinterpret_cast<const uint8_t*>(values->data()),
                           values->size() * sizeof(float), values}};
  }
  ++delta_answers_;
  delta_bytes_ += static_cast<int64_t>(last_.message->size());
  reply.encoding = PushEncoding::kThreshold;
  const std::vector<uint8_t>& m = *last_.message;
  return {reply, Payload{m.data(), m.size(), last_.message}};
}

}  // namespace pstrain
