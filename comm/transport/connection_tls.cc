// The byte path of a TLS connection: the socket carries ciphertext, the frame
// reader and the outbox see plaintext. Handshake records flow before any
// frame; frames queued while it runs go out once it is done.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "comm/transport/connection.h"

namespace pstrain {
namespace {

// Plaintext handed to OpenSSL per call, and ciphertext per write: large, so
// big payloads become full 16 KiB records with few calls, yet small enough
// that the first ciphertext is on the wire while the rest is encrypted, and
// still in cache when the kernel copies it (256 KiB took 8% less CPU per
// 64 MiB push+pull than 1 MiB).
constexpr size_t kEncryptChunk = size_t{256} << 10;
// Ciphertext written but not yet taken by the socket, at most (about). Each
// completed write has to come back through the loop before more is
// encrypted: with 4 or 8 MiB, 64 MiB pushes measured slower than with 16.
constexpr size_t kMaxInFlight = size_t{16} << 20;
// Small pieces (frame headers, small payloads) are gathered up to a record's
// worth first: one record, one AES-GCM pass, instead of one per piece.
constexpr size_t kGatherBytes = 16384;

struct CiphertextWrite {
  uv_write_t req;
  std::vector<uint8_t> bytes;
};

}  // namespace

Status Connection::BeginTls(TlsSession::Side side) {
  if (!loop_->tls()) return Status::OK();
  auto session = TlsSession::Create(loop_->tls(), side, peer_);
  if (!session.ok()) return session.status();
  tls_ = std::move(*session);
  if (side == TlsSession::Side::kServer) return Status::OK();  // the client speaks first
  Status hello = tls_->Handshake();
  SendCiphertext();
  return hello;
}

void Connection::ReadTls(size_t nread) {
  tls_->Received(nread);
  Status st;
  if (!tls_->established()) {
    st = tls_->Handshake();
    SendCiphertext();  // the handshake's next message, or the alert that ends it
    if (!st.ok()) {
      WarnClosing("closing the connection: " + st.message());  // names the peer
      return Close(st);
    }
    if (!tls_->established()) return;
    FlushTls();  // frames queued while the handshake ran
  }
  while (!closing_) {
    FrameReader::Span span = reader_.NextBuffer();
    StatusOr<size_t> n = tls_->Read(span.data, span.size);
    if (!n.ok()) {
      SendCiphertext();
      // A peer that ends the session cleanly is an ordinary close.
      if (!tls_->closed_by_peer()) WarnClosing("closing the connection: " + n.status().message());
      return Close(n.status());
    }
    if (*n == 0) break;
    st = ConsumeFrames(*n);
    if (!st.ok()) {
      WarnClosing(fmt::format("closing connection from {}: bad frame: {}", peer_, st.message()));
      return Close(st);
    }
  }
  SendCiphertext();  // anything OpenSSL answered while reading (a key update)
}

void Connection::FlushTls() {
  for (OutFrame& f : outbox_) tls_queue_.push_back(std::move(f));
  outbox_.clear();
  PumpTls();
}

// Encrypts queued frames while less than kMaxInFlight of ciphertext waits
// for the socket; each completed write comes back here for more. Encrypting
// only what the socket can soon take keeps the loop responsive, the memory
// bounded and the ciphertext buffers (recycled) warm: a 64 MiB payload in
// one go would fault in 64 MiB of fresh pages.
void Connection::PumpTls() {
  if (!tls_->established() || closing_) return;  // the handshake's end calls again
  std::vector<uint8_t> gathered;
  Status st;
  auto encrypt = [&](const uint8_t* data, size_t size) {
    if (size == 0 || !st.ok()) return;
    st = tls_->Write(data, size);
    if (tls_->output_size() >= kEncryptChunk) SendCiphertext();
  };
  while (!tls_queue_.empty() && tls_in_flight_ < kMaxInFlight && st.ok() && !closing_) {
    const OutFrame& f = tls_queue_.front();
    const size_t total = f.prefix.size() + f.payload.size;
    const bool in_prefix = tls_offset_ < f.prefix.size();
    const uint8_t* data = in_prefix ? f.prefix.data() + tls_offset_
                                    : f.payload.data + (tls_offset_ - f.prefix.size());
    const size_t left = in_prefix ? f.prefix.size() - tls_offset_ : total - tls_offset_;
    size_t take = left;
    if (left < kGatherBytes) {
      if (gathered.size() + left > kGatherBytes) {
        encrypt(gathered.data(), gathered.size());
        gathered.clear();
      }
      gathered.insert(gathered.end(), data, data + left);
    } else {
      encrypt(gathered.data(), gathered.size());
      gathered.clear();
      take = std::min(left, kEncryptChunk);
      encrypt(data, take);
    }
    tls_offset_ += take;
    outbox_bytes_ -= std::min<uint64_t>(outbox_bytes_, take);  // queued until encrypted
    if (tls_offset_ == total) {
      tls_queue_.pop_front();  // its payload's memory may go now
      tls_offset_ = 0;
    }
  }
  encrypt(gathered.data(), gathered.size());
  SendCiphertext();
  if (!st.ok()) {
    log_->warn("closing the connection: {}", st.message());
    Close(st);
  }
}

// Writes what the session produced; the bytes live in the request until the
// write completes, then go back to the session for reuse.
void Connection::SendCiphertext() {
  if (tls_->output_size() == 0 || closed()) return;
  auto* w = new CiphertextWrite{{}, tls_->TakeOutput()};
  w->req.data = w;
  tls_in_flight_ += w->bytes.size();
  uv_buf_t buf =
      uv_buf_init(reinterpret_cast<char*>(w->bytes.data()), static_cast<unsigned>(w->bytes.size()));
  int rc = uv_write(
      &w->req, reinterpret_cast<uv_stream_t*>(tcp_.get()), &buf, 1, [](uv_write_t* r, int status) {
        std::unique_ptr<CiphertextWrite> w(static_cast<CiphertextWrite*>(r->data));
        auto* self = static_cast<Connection*>(static_cast<HandleOwner*>(r->handle->data));
        self->tls_in_flight_ -= w->bytes.size();
        if (status == 0) {
          self->tls_->Recycle(std::move(w->bytes));
          if (!self->tls_queue_.empty()) self->PumpTls();
        } else if (status != UV_ECANCELED) {
          self->Close(Unavailable(fmt::format("write to {}: {}", self->peer_, UvError(status))));
        }
      });
  if (rc != 0) {
    tls_in_flight_ -= w->bytes.size();
    delete w;
    Close(Unavailable(fmt::format("write to {}: {}", peer_, UvError(rc))));
  }
}

}  // namespace pstrain
