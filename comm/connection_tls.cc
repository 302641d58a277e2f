// The byte path of a TLS connection: the socket carries ciphertext, the frame
// reader and the outbox see plaintext. Handshake records flow before any
// frame; frames queued while it runs go out once it is done.
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "comm/connection.h"

namespace pstrain {
namespace {

// Plaintext handed to OpenSSL per call: large, so big payloads become full
// 16 KiB records with one call per megabyte, yet small enough that the first
// ciphertext is on the wire while the rest is still being encrypted.
constexpr size_t kEncryptChunk = size_t{1} << 20;
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
      log_->warn("closing connection from {}: {}", peer_, st.message());
      return Close(st);
    }
    if (!tls_->established()) return;
    Flush();  // frames queued while the handshake ran
  }
  while (!closing_) {
    FrameReader::Span span = reader_.NextBuffer();
    StatusOr<size_t> n = tls_->Read(span.data, span.size);
    if (!n.ok()) {
      SendCiphertext();
      // A peer that ends the session cleanly is an ordinary close.
      if (!tls_->closed_by_peer())
        log_->warn("closing connection from {}: {}", peer_, n.status().message());
      return Close(n.status());
    }
    if (*n == 0) break;
    st = reader_.Consume(*n, [this](Frame&& f) { OnFrame(std::move(f)); });
    if (!st.ok()) {
      log_->warn("closing connection from {}: bad frame: {}", peer_, st.message());
      return Close(st);
    }
  }
  SendCiphertext();  // anything OpenSSL answered while reading (a key update)
}

void Connection::FlushTls() {
  if (!tls_->established()) return;  // sent when the handshake is done (ReadTls)
  std::vector<OutFrame> frames;
  frames.swap(outbox_);
  std::vector<uint8_t> gathered;
  gathered.reserve(kGatherBytes);
  Status st;
  auto encrypt = [&](const uint8_t* data, size_t size) {
    for (size_t done = 0; done < size && st.ok(); done += kEncryptChunk) {
      st = tls_->Write(data + done, std::min(kEncryptChunk, size - done));
      if (tls_->output_size() >= kEncryptChunk) SendCiphertext();
    }
  };
  auto gather = [&](const uint8_t* data, size_t size) {
    if (gathered.size() + size > kGatherBytes) {
      encrypt(gathered.data(), gathered.size());
      gathered.clear();
    }
    if (size >= kGatherBytes) return encrypt(data, size);
    gathered.insert(gathered.end(), data, data + size);
  };
  for (const OutFrame& f : frames) {
    gather(f.prefix.data(), f.prefix.size());
    gather(f.payload.data, f.payload.size);
  }
  encrypt(gathered.data(), gathered.size());
  SendCiphertext();
  if (!st.ok()) {
    log_->warn("closing connection to {}: {}", peer_, st.message());
    Close(st);
  }
}

// Writes what the session produced; the bytes live in the request until the
// write completes.
void Connection::SendCiphertext() {
  if (tls_->output_size() == 0 || closed()) return;
  auto* w = new CiphertextWrite{{}, tls_->TakeOutput()};
  w->req.data = w;
  uv_buf_t buf =
      uv_buf_init(reinterpret_cast<char*>(w->bytes.data()), static_cast<unsigned>(w->bytes.size()));
  int rc = uv_write(
      &w->req, reinterpret_cast<uv_stream_t*>(tcp_.get()), &buf, 1, [](uv_write_t* r, int status) {
        std::unique_ptr<CiphertextWrite> w(static_cast<CiphertextWrite*>(r->data));
        if (status < 0 && status != UV_ECANCELED) {
          auto* self = static_cast<Connection*>(static_cast<HandleOwner*>(r->handle->data));
          self->Close(Unavailable(fmt::format("write to {}: {}", self->peer_, UvError(status))));
        }
      });
  if (rc != 0) {
    delete w;
    Close(Unavailable(fmt::format("write to {}: {}", peer_, UvError(rc))));
  }
}

}  // namespace pstrain
