// TLS 1.3 for pstrain connections, on memory buffers (OpenSSL).
//
// TlsContext: the node's certificate, key and CA, loaded once from the files
// PSTRAIN_TLS_CERT, PSTRAIN_TLS_KEY and PSTRAIN_TLS_CA name. TLS 1.3 only,
// mutual: each end presents the same certificate (as client and as server)
// and accepts only a peer whose certificate the CA signed. Immutable once
// loaded; shared by every session of a loop.
//
// TlsSession: one connection's TLS state. It never touches a socket: the
// caller puts the ciphertext it read into InputSpace()/Received(), takes
// plaintext out with Read() into memory of its choice (a frame reader's
// span, so a pull reply is decrypted straight into its tensor), encrypts with
// Write() and sends what TakeOutput() returns. This keeps TLS on the node's
// one event loop, with no thread of its own. One thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "src/common/config/options.h"
#include "src/common/status.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;
typedef struct bio_st BIO;
typedef struct bio_method_st BIO_METHOD;

namespace pstrain {

class TlsContext {
 public:
  // Loads and checks the three files: each readable and valid PEM, the key
  // matching the certificate, the certificate within its validity dates. An
  // error names the file and its variable.
  static StatusOr<std::shared_ptr<TlsContext>> Load(const TlsFiles& files);
  // Load(), or null (plaintext) when no files are set.
  static StatusOr<std::shared_ptr<TlsContext>> LoadIfSet(const TlsFiles& files);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* ssl_ctx() const { return ctx_; }
  // How a session's SSL reaches the session's buffers.
  BIO_METHOD* bio_method() const { return bio_method_; }

 private:
  TlsContext() = default;
  SSL_CTX* ctx_ = nullptr;
  BIO_METHOD* bio_method_ = nullptr;
};

class TlsSession {
 public:
  enum class Side { kClient, kServer };
  // `peer` ("ip:port") goes into every error message.
  static StatusOr<std::unique_ptr<TlsSession>> Create(std::shared_ptr<TlsContext> context,
                                                      Side side, std::string peer);
  ~TlsSession();
  TlsSession(const TlsSession&) = delete;
  TlsSession& operator=(const TlsSession&) = delete;

  // Advances the handshake with the ciphertext received so far (the client's
  // first call writes its hello). OK while it is still under way; an error
  // when it failed (OpenSSL's reason: a certificate from another CA, a peer
  // that offers no TLS 1.3, plaintext bytes).
  Status Handshake();
  bool established() const { return established_; }

  struct Span {
    uint8_t* data;
    size_t size;
  };
  // Where the next ciphertext from the socket goes (at least 16 KiB), and
  // how many bytes were written there.
  Span InputSpace();
  void Received(size_t n);
  // Copies `n` bytes of ciphertext in (tests, in-memory use).
  void Feed(const uint8_t* data, size_t n);

  // Decrypts up to `n` bytes of plaintext into `out`: how many, 0 when more
  // ciphertext is needed. Peer closed or a bad record: an error.
  StatusOr<size_t> Read(uint8_t* out, size_t n);
  // Encrypts `n` bytes (after the handshake); the ciphertext waits in the
  // output until taken.
  Status Write(const uint8_t* data, size_t n);
  // The ciphertext produced so far (handshake, records, alerts), emptied.
  std::vector<uint8_t> TakeOutput();
  // Gives back a buffer TakeOutput() returned, once sent, for reuse.
  void Recycle(std::vector<uint8_t>&& sent);
  size_t output_size() const { return output_.size(); }

  const std::string& peer() const { return peer_; }
  // True once the peer ended the session cleanly (close_notify): an
  // ordinary close, not a failure worth a warning.
  bool closed_by_peer() const { return closed_by_peer_; }

 private:
  TlsSession(std::shared_ptr<TlsContext> context, SSL* ssl, std::string peer);
  // The error of `ssl_` after a call returned `rc`, with OpenSSL's reason.
  Status Failure(const char* what, int rc);
  friend class TlsContext;  // hands BioWrite/BioRead to OpenSSL
  static int BioWrite(BIO* bio, const char* data, int n);
  static int BioRead(BIO* bio, char* out, int n);

  std::shared_ptr<TlsContext> context_;
  SSL* ssl_;
  std::string peer_;
  bool established_ = false;
  bool closed_by_peer_ = false;
  // Received ciphertext not yet handed to OpenSSL: input_[in_begin_, in_end_).
  std::vector<uint8_t> input_;
  size_t in_begin_ = 0, in_end_ = 0;
  std::vector<uint8_t> output_;  // ciphertext to send
  std::vector<std::vector<uint8_t>> spare_;
};

}  // namespace pstrain
