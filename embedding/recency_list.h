// RecencyList: a doubly linked list, most recent first, threaded through a
// vector of records that each carry `uint32_t prev, next`. The table and the
// row cache both keep their rows in such a list (least recent at the back,
// the next to go). It holds only the two ends; the records hold the links.
//
// O(1) per operation, no allocation. Not thread-safe: it belongs to its
// owner's records.
#pragma once

#include <cstdint>

namespace pstrain {

class RecencyList {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  uint32_t front() const { return front_; }
  uint32_t back() const { return back_; }
  void Clear() { front_ = back_ = kNone; }

  template <typename Records>
  void Unlink(Records& records, uint32_t i) {
    auto& r = records[i];
    (r.prev == kNone ? front_ : records[r.prev].next) = r.next;
    (r.next == kNone ? back_ : records[r.next].prev) = r.prev;
    r.prev = r.next = kNone;
  }

  template <typename Records>
  void PushFront(Records& records, uint32_t i) {
    auto& r = records[i];
    r.prev = kNone;
    r.next = front_;
    (front_ == kNone ? back_ : records[front_].prev) = i;
    front_ = i;
  }

  // Moves i to the front, unless it is there already.
  template <typename Records>
  void MoveToFront(Records& records, uint32_t i) {
    if (front_ == i) return;
    Unlink(records, i);
    PushFront(records, i);
  }

  // Record i was copied from another place, links included: its neighbours
  // (or the ends) now point at i.
  template <typename Records>
  void Relink(Records& records, uint32_t i) {
    auto& r = records[i];
    (r.prev == kNone ? front_ : records[r.prev].next) = i;
    (r.next == kNone ? back_ : records[r.next].prev) = i;
  }

 private:
  uint32_t front_ = kNone, back_ = kNone;
};

}  // namespace pstrain
