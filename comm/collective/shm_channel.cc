#include "comm/collective/shm_channel.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/futex.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>

namespace pstrain {

namespace {
constexpr uint64_t kMagic = 0x70737472'61696e53;  // "pstrainS"
constexpr uint32_t kVersion = 1;
constexpr size_t kHeaderBytes = 4096;  // the Shared header's page
constexpr size_t kSlotHeaderBytes = 64;
constexpr uint32_t kMaxSlots = 1024;
constexpr uint64_t kMaxSlotBytes = uint64_t{64} << 20;
constexpr uint32_t kProducerClosed = 1, kConsumerClosed = 2;

static_assert(std::atomic<uint64_t>::is_always_lock_free, "counters must be address-free");
static_assert(std::atomic<uint32_t>::is_always_lock_free, "futex words must be address-free");
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "a futex word is 32 bits");
static_assert(sizeof(SegmentHeader) <= kSlotHeaderBytes, "a segment header fits its slot");

Status Errno(const std::string& what) {
  return Internal(fmt::format("{}: {}", what, std::strerror(errno)));
}

// Cross-process futex calls: no FUTEX_PRIVATE_FLAG, the word is shared.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, nullptr, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

void Ring(std::atomic<uint32_t>* bell) {
  bell->fetch_add(1, std::memory_order_seq_cst);
  FutexWakeAll(bell);
}

Status Random(void* out, size_t bytes) {
  if (getrandom(out, bytes, 0) != static_cast<ssize_t>(bytes)) return Errno("getrandom");
  return Status::OK();
}

bool ValidName(const std::string& name) {
  const std::string prefix = "/pstrain-";
  if (name.size() != prefix.size() + 32 || name.compare(0, prefix.size(), prefix) != 0)
    return false;
  for (size_t i = prefix.size(); i < name.size(); ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

size_t MappingBytes(const ShmChannel::Geometry& g) {
  return kHeaderBytes + static_cast<size_t>(g.slots) * (kSlotHeaderBytes + g.slot_bytes);
}

bool ValidGeometry(const ShmChannel::Geometry& g) {
  return g.slots >= 1 && g.slots <= kMaxSlots && g.slot_bytes >= 64 &&
         g.slot_bytes <= kMaxSlotBytes && g.slot_bytes % 64 == 0;
}
}  // namespace

// Each line is written by one side: the producer's, then the consumer's.
struct Identity {
  uint64_t magic;
  uint32_t version;
  uint32_t slots;
  uint64_t slot_bytes;
  uint64_t nonce;
};

struct ShmChannel::Shared {
  Identity id;
  std::atomic<uint32_t> opened;            // the opener has mapped it
  std::atomic<uint32_t> closed;            // kProducerClosed | kConsumerClosed
  alignas(64) std::atomic<uint64_t> head;  // slots published
  std::atomic<uint32_t> data_bell;         // rung after publishing
  std::atomic<uint32_t> producer_waiting;  // asleep on space_bell
  alignas(64) std::atomic<uint64_t> tail;  // slots freed
  std::atomic<uint32_t> space_bell;        // rung after freeing
  std::atomic<uint32_t> consumer_waiting;  // asleep on data_bell
};
static_assert(sizeof(ShmChannel::Shared) <= kHeaderBytes, "the header fits its page");

ShmChannel::ShmChannel(std::string name, bool creator, void* base, size_t bytes, Geometry geometry,
                       uint64_t nonce)
    : name_(std::move(name)),
      creator_(creator),
      base_(base),
      bytes_(bytes),
      geometry_(geometry),
      nonce_(nonce),
      shared_(static_cast<Shared*>(base)) {}

StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Create(const Geometry& geometry) {
  if (!ValidGeometry(geometry))
    return InvalidArgument(
        fmt::format("shm channel of {} slots of {} bytes", geometry.slots, geometry.slot_bytes));
  uint8_t id[16];
  uint64_t nonce = 0;
  PSTRAIN_RETURN_IF_ERROR(Random(id, sizeof(id)));
  PSTRAIN_RETURN_IF_ERROR(Random(&nonce, sizeof(nonce)));
  std::string name = "/pstrain-";
  for (uint8_t b : id) name += fmt::format("{:02x}", b);
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return Errno("shm_open " + name);
  const size_t bytes = MappingBytes(geometry);
  void* base = MAP_FAILED;
  if (ftruncate(fd, static_cast<off_t>(bytes)) == 0)
    base = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    Status st = Errno("map shared memory " + name);
    close(fd);
    shm_unlink(name.c_str());
    return st;
  }
  close(fd);
  // The pages are fresh zeros; the atomics start at zero.
  Shared* s = new (base) Shared();
  s->id = Identity{kMagic, kVersion, geometry.slots, geometry.slot_bytes, nonce};
  return std::unique_ptr<ShmChannel>(
      new ShmChannel(std::move(name), true, base, bytes, geometry, nonce));
}

StatusOr<std::unique_ptr<ShmChannel>> ShmChannel::Open(const std::string& name, uint64_t nonce) {
  if (!ValidName(name)) return InvalidArgument(fmt::format("'{}' is no shm channel name", name));
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) return Errno("shm_open " + name);
  struct stat st;
  Geometry g;
  Status bad;
  void* base = MAP_FAILED;
  if (fstat(fd, &st) != 0) {
    bad = Errno("stat " + name);
  } else if (static_cast<size_t>(st.st_size) < kHeaderBytes) {
    bad = InvalidArgument(fmt::format("{} is too small for a channel", name));
  } else {
    void* head = mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, fd, 0);
    if (head == MAP_FAILED) {
      bad = Errno("map " + name);
    } else {
      // Read once: the creator could change the header under us.
      Identity copy;
      std::memcpy(&copy, head, sizeof(copy));
      munmap(head, kHeaderBytes);
      g = Geometry{copy.slots, copy.slot_bytes};
      if (copy.magic != kMagic || copy.version != kVersion)
        bad = InvalidArgument(fmt::format("{} is not a version {} channel", name, kVersion));
      else if (copy.nonce != nonce)
        bad = InvalidArgument(fmt::format("{} carries another nonce: stale or foreign", name));
      else if (!ValidGeometry(g) || MappingBytes(g) != static_cast<size_t>(st.st_size))
        bad = InvalidArgument(fmt::format("{} has a bad geometry", name));
      else
        base = mmap(nullptr, MappingBytes(g), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
      if (bad.ok() && base == MAP_FAILED) bad = Errno("map " + name);
    }
  }
  close(fd);
  if (!bad.ok()) return bad;
  auto channel =
      std::unique_ptr<ShmChannel>(new ShmChannel(name, false, base, MappingBytes(g), g, nonce));
  channel->position_ = channel->shared_->head.load(std::memory_order_acquire);
  if (channel->position_ != 0) return InvalidArgument(fmt::format("{} is already in use", name));
  channel->shared_->opened.store(1, std::memory_order_release);
  return channel;
}

ShmChannel::~ShmChannel() {
  shared_->closed.fetch_or(creator_ ? kConsumerClosed : kProducerClosed);
  Ring(&shared_->data_bell);
  Ring(&shared_->space_bell);
  if (creator_) Unlink();
  munmap(base_, bytes_);
}

bool ShmChannel::PeerOpened() const { return shared_->opened.load(std::memory_order_acquire); }

void ShmChannel::Unlink() {
  if (creator_ && !unlinked_.exchange(true)) shm_unlink(name_.c_str());
}

uint8_t* ShmChannel::Slot(uint64_t index) const {
  return static_cast<uint8_t*>(base_) + kHeaderBytes +
         (index % geometry_.slots) * (kSlotHeaderBytes + geometry_.slot_bytes);
}

// Slots published and not yet freed; more than the geometry allows means
// the peer wrote nonsense into the counters.
StatusOr<uint64_t> ShmChannel::Pending(uint64_t head, uint64_t tail) const {
  const uint64_t pending = head - tail;
  if (pending > geometry_.slots)
    return InvalidArgument(
        fmt::format("shm channel {}: the peer broke the counters ({} - {})", name_, head, tail));
  return pending;
}

Status ShmChannel::PeerGone() const {
  return Unavailable(
      fmt::format("shm channel {}: the {} closed it", name_, creator_ ? "sender" : "receiver"));
}

StatusOr<uint8_t*> ShmChannel::FreeSlot() {
  if (lost_flag_.load()) return lost();
  if (shared_->closed.load(std::memory_order_acquire) & kConsumerClosed) return PeerGone();
  auto pending = Pending(position_, shared_->tail.load(std::memory_order_acquire));
  if (!pending.ok()) return pending.status();
  if (*pending == geometry_.slots) return static_cast<uint8_t*>(nullptr);
  return Slot(position_) + kSlotHeaderBytes;
}

void ShmChannel::Publish(const SegmentHeader& header) {
  assert(header.bytes <= geometry_.slot_bytes);
  std::memcpy(Slot(position_), &header, sizeof(header));
  shared_->head.store(++position_, std::memory_order_seq_cst);
  if (shared_->consumer_waiting.load(std::memory_order_seq_cst)) Ring(&shared_->data_bell);
}

StatusOr<bool> ShmChannel::Peek(SegmentHeader* header, const uint8_t** data) {
  if (lost_flag_.load()) return lost();
  auto pending = Pending(shared_->head.load(std::memory_order_acquire), position_);
  if (!pending.ok()) return pending.status();
  if (*pending == 0) {
    if (shared_->closed.load(std::memory_order_acquire) & kProducerClosed) return PeerGone();
    return false;
  }
  std::memcpy(header, Slot(position_), sizeof(*header));
  if (header->bytes > geometry_.slot_bytes)
    return InvalidArgument(fmt::format("shm channel {}: a slot claims {} bytes, more than {}",
                                       name_, header->bytes, geometry_.slot_bytes));
  *data = Slot(position_) + kSlotHeaderBytes;
  return true;
}

void ShmChannel::Release() {
  shared_->tail.store(++position_, std::memory_order_seq_cst);
  if (shared_->producer_waiting.load(std::memory_order_seq_cst)) Ring(&shared_->space_bell);
}

bool ShmChannel::Ready(bool producer) const {
  if (producer) {
    return position_ - shared_->tail.load(std::memory_order_seq_cst) != geometry_.slots ||
           (shared_->closed.load() & kConsumerClosed);
  }
  return shared_->head.load(std::memory_order_seq_cst) != position_ ||
         (shared_->closed.load() & kProducerClosed);
}

Status ShmChannel::WaitForData() { return Wait(false); }
Status ShmChannel::WaitForSpace() { return Wait(true); }

// Raise the flag, look again, then sleep unless the bell moved: the peer
// either sees the flag and rings, or we see its update (both are seq_cst).
Status ShmChannel::Wait(bool producer) {
  std::atomic<uint32_t>* bell = producer ? &shared_->space_bell : &shared_->data_bell;
  std::atomic<uint32_t>* waiting =
      producer ? &shared_->producer_waiting : &shared_->consumer_waiting;
  const uint32_t seen = bell->load(std::memory_order_seq_cst);
  waiting->store(1, std::memory_order_seq_cst);
  if (!Ready(producer) && !lost_flag_.load(std::memory_order_seq_cst)) FutexWait(bell, seen);
  waiting->store(0, std::memory_order_relaxed);
  return lost();
}

void ShmChannel::SetLost(const Status& why) {
  {
    MutexLock lock(&mutex_);
    if (!lost_.ok()) return;
    lost_ = why.ok() ? Unavailable("shm channel: lost") : why;
  }
  lost_flag_.store(true, std::memory_order_seq_cst);
  Ring(&shared_->data_bell);
  Ring(&shared_->space_bell);
}

Status ShmChannel::lost() const {
  if (!lost_flag_.load()) return Status::OK();
  MutexLock lock(&mutex_);
  return lost_;
}

}  // namespace pstrain
