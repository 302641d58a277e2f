// ShmChannel: a single-producer single-consumer queue of segments in POSIX
// shared memory, between two processes (or threads) of one host. The
// receiver creates it under a random, unguessable name ("/pstrain-<hex>")
// with a random 64-bit nonce; the sender opens it by name and must present
// the nonce, so a stale or foreign segment is refused. The creator unlinks
// the name once the sender says it has opened it (Unlink), and always when
// it goes.
//
// Layout: a header (magic, version, geometry, nonce, the head and tail
// counters, two futex words) and `slots` slots, each a SegmentHeader and up
// to `slot_bytes` of data. The producer fills the slot at head % slots and
// publishes it by advancing head; the consumer reads the slot at
// tail % slots straight from the mapping and frees it by advancing tail.
//
// Wake-ups: a side that found nothing to do sleeps on a futex word in the
// mapping (non-private FUTEX_WAIT, so it works across processes): the
// consumer on `data_bell`, the producer on `space_bell`. It first raises its
// `*_waiting` flag and looks again; the other side rings (bumps the word and
// FUTEX_WAKEs) only when that flag is up, so a side that spins or is busy
// costs its peer no system call.
//
// Trust: the peer may be another process and is not trusted: every counter
// and size read from the mapping is checked against the geometry this side
// keeps privately; a bad one fails the call, never the process.
//
// Threads: one producer thread and one consumer thread at a time (one of
// them is this process); SetLost and the destructor may come from any
// thread.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "src/common/mutex.h"
#include "src/common/status.h"

namespace pstrain {

// What the producer says about the segment in a slot; the consumer checks
// every field against what it expects.
struct SegmentHeader {
  uint64_t op = 0;      // operation count of the sender
  uint32_t kind = 0;    // which operation
  int32_t step = 0;     // ring step
  int64_t n = 0;        // the tensor's elements
  int64_t segment = 0;  // segment within the step's chunk
  uint64_t bytes = 0;   // data bytes in the slot
};

class ShmChannel {
 public:
  // The default, 8 x 128 KiB, was the best of 4-16 slots of 64-512 KiB for
  // world 2 and 4 on 2 cores: the slots of a rank's two channels stay
  // within its core's L2, and a segment is still long enough to amortize
  // the handshake.
  struct Geometry {
    uint32_t slots = 8;
    uint64_t slot_bytes = 128 * 1024;  // a multiple of 64
  };
  struct Shared;  // the mapping's header (shm_channel.cc)

  // The receiver's end: a fresh segment with a random name and nonce.
  static StatusOr<std::unique_ptr<ShmChannel>> Create(const Geometry& geometry);
  // The sender's end of the segment `name`, whose header must carry `nonce`.
  static StatusOr<std::unique_ptr<ShmChannel>> Open(const std::string& name, uint64_t nonce);
  // Tells the other end this one is gone, unmaps; the creator unlinks.
  ~ShmChannel();

  const std::string& name() const { return name_; }
  uint64_t nonce() const { return nonce_; }
  const Geometry& geometry() const { return geometry_; }
  // Creator: true once the opener has mapped the segment.
  bool PeerOpened() const;
  // Creator: removes the name (the mapping lives on). Idempotent.
  void Unlink();

  // Producer. The data area of the next free slot, or null when every slot
  // is full; an error if the peer broke the counters or is gone.
  StatusOr<uint8_t*> FreeSlot();
  // Publishes the slot FreeSlot() returned, holding `header.bytes` bytes.
  void Publish(const SegmentHeader& header);
  // Consumer. The next published slot (its header copied out, its data in
  // place), or false when none is.
  StatusOr<bool> Peek(SegmentHeader* header, const uint8_t** data);
  // Frees the slot Peek() returned.
  void Release();

  // Sleep until the peer publishes (consumer) or frees a slot (producer),
  // or SetLost; return at once if that already happened. Spurious returns
  // are allowed: the caller looks again.
  Status WaitForData();
  Status WaitForSpace();

  // Fails every present and later wait with `why`; wakes the sleepers.
  void SetLost(const Status& why);
  // The error of a lost channel, or OK.
  Status lost() const;

 private:
  ShmChannel(std::string name, bool creator, void* base, size_t bytes, Geometry geometry,
             uint64_t nonce);
  uint8_t* Slot(uint64_t index) const;
  StatusOr<uint64_t> Pending(uint64_t head, uint64_t tail) const;
  bool Ready(bool producer) const;
  Status Wait(bool producer);
  Status PeerGone() const;

  const std::string name_;
  const bool creator_;  // the receiver: consumer side, owns the name
  void* base_;
  const size_t bytes_;
  const Geometry geometry_;  // this side's copy: never re-read from the mapping
  const uint64_t nonce_;
  Shared* shared_;
  uint64_t position_ = 0;  // head (producer) or tail (consumer) as this side keeps it
  std::atomic<bool> unlinked_{false};
  std::atomic<bool> lost_flag_{false};
  mutable Mutex mutex_;
  Status lost_ GUARDED_BY(mutex_);
};

}  // namespace pstrain
