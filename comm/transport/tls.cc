#include "comm/transport/tls.h"

#include <fmt/format.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace pstrain {
namespace {

// Received ciphertext is staged here before OpenSSL reads it: big enough for
// one socket read to bring many records (fewer callbacks per megabyte).
constexpr size_t kInputBytes = size_t{256} << 10;
constexpr size_t kMinInputSpace = size_t{16} << 10;
// A TLS 1.3 record adds a 5-byte header, a content-type byte and a 16-byte
// tag to at most 16 KiB of plaintext.
constexpr size_t kRecordPlaintext = 16384;
constexpr size_t kRecordOverhead = 22;
// Sent ciphertext buffers kept for reuse: a large payload goes out in a
// few megabytes at a time, and fresh buffers would fault in fresh pages.
constexpr size_t kSpareBuffers = 32;  // of 256 KiB (comm/transport/connection_tls.cc)
// Certificates, keys and CA bundles are a few KiB; a bundle of every public
// CA is about 200 KiB.
constexpr off_t kMaxPemBytes = off_t{1} << 20;

// Whether OpenSSL error `e` is a refusal of a certificate: the peer's by
// this end, or this end's by the peer (the alert it sent). Trying again
// would meet the same certificates.
bool IsCertificateRefusal(unsigned long e) {
  if (ERR_GET_LIB(e) != ERR_LIB_SSL) return false;
  switch (ERR_GET_REASON(e)) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED:
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
      return true;
    default:
      return false;
  }
}

// OpenSSL's reasons for the last failure on this thread, oldest first
// ("certificate verify failed; ..."), and the queue emptied. `refused`, if
// given, is set when one of them refuses a certificate.
std::string OpenSslErrors(bool* refused = nullptr) {
  std::string text;
  while (unsigned long e = ERR_get_error()) {
    if (refused != nullptr && IsCertificateRefusal(e)) *refused = true;
    const char* reason = ERR_reason_error_string(e);
    std::string one = reason != nullptr ? reason : fmt::format("error {:#x}", e);
    if (text.find(one) == std::string::npos) text += (text.empty() ? "" : "; ") + one;
  }
  return text.empty() ? "no reason given" : text;
}

// A file OpenSSL is about to read: a readable regular file of sane size, or
// an error naming it and its variable (OpenSSL's own message for a missing
// file is "system lib", and it would read /dev/zero or a pipe forever).
Status CheckReadable(const std::string& path, const char* variable) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr)
    return InvalidArgument(
        fmt::format("{} file '{}' cannot be read: {}", variable, path, std::strerror(errno)));
  struct stat info {};
  const bool regular = fstat(fileno(f), &info) == 0 && S_ISREG(info.st_mode);
  std::fclose(f);
  if (!regular)
    return InvalidArgument(fmt::format("{} file '{}' is not a regular file", variable, path));
  if (info.st_size > kMaxPemBytes)
    return InvalidArgument(fmt::format("{} file '{}' has {} bytes; a PEM file here is at most {}",
                                       variable, path, info.st_size, kMaxPemBytes));
  return Status::OK();
}

// Encrypted keys are refused rather than prompted for: a node never waits
// on a terminal.
int NoPassphrase(char*, int, int, void*) { return 0; }

long BioCtrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int BioCreate(BIO* bio) {
  BIO_set_init(bio, 1);
  return 1;
}

// "2026-11-25 19:05:26 UTC", or "?" when OpenSSL cannot read the time.
std::string FormatTime(const ASN1_TIME* time) {
  std::tm tm{};
  if (time == nullptr || ASN1_TIME_to_tm(time, &tm) != 1) return "?";
  return fmt::format("{:04}-{:02}-{:02} {:02}:{:02}:{:02} UTC", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

// This node's own certificate, loaded in `ctx`, within its validity dates
// now: found at start, an expired one is one line naming the file instead
// of a refusal by every peer later. (Whether the CA signed it is left to
// the peers: a node may trust another CA than the one that signed it.)
Status CheckOwnCertificate(SSL_CTX* ctx, const TlsFiles& files) {
  X509* cert = SSL_CTX_get0_certificate(ctx);
  if (cert == nullptr)
    return InvalidArgument(
        fmt::format("PSTRAIN_TLS_CERT file '{}' holds no certificate", files.cert));
  const ASN1_TIME* not_before = X509_get0_notBefore(cert);
  const ASN1_TIME* not_after = X509_get0_notAfter(cert);
  const std::string valid =
      fmt::format("valid from {} to {}", FormatTime(not_before), FormatTime(not_after));
  if (X509_cmp_current_time(not_after) <= 0)
    return InvalidArgument(fmt::format(
        "PSTRAIN_TLS_CERT file '{}': the certificate has expired ({}): every peer would refuse it",
        files.cert, valid));
  if (X509_cmp_current_time(not_before) >= 0)
    return InvalidArgument(fmt::format(
        "PSTRAIN_TLS_CERT file '{}': the certificate is not valid yet ({}): every peer would "
        "refuse it",
        files.cert, valid));
  return Status::OK();
}

}  // namespace

TlsContext::~TlsContext() {
  SSL_CTX_free(ctx_);
  BIO_meth_free(bio_method_);
}

StatusOr<std::shared_ptr<TlsContext>> TlsContext::Load(const TlsFiles& files) {
  PSTRAIN_RETURN_IF_ERROR(CheckReadable(files.cert, "PSTRAIN_TLS_CERT"));
  PSTRAIN_RETURN_IF_ERROR(CheckReadable(files.key, "PSTRAIN_TLS_KEY"));
  PSTRAIN_RETURN_IF_ERROR(CheckReadable(files.ca, "PSTRAIN_TLS_CA"));
  ERR_clear_error();
  std::shared_ptr<TlsContext> context(new TlsContext());
  context->ctx_ = SSL_CTX_new(TLS_method());
  // The BIO a session's SSL reads ciphertext from and writes it to: the
  // session's own buffers, so no socket and no extra copy is involved. (No
  // type index of its own: those are a small process-wide pool, and nothing
  // looks this BIO up by type.)
  BIO_METHOD* method = BIO_meth_new(BIO_TYPE_SOURCE_SINK, "pstrain");
  context->bio_method_ = method;
  if (context->ctx_ == nullptr || method == nullptr)
    return Internal("TLS: cannot make a context: " + OpenSslErrors());
  BIO_meth_set_write(method, &TlsSession::BioWrite);
  BIO_meth_set_read(method, &TlsSession::BioRead);
  BIO_meth_set_ctrl(method, &BioCtrl);
  BIO_meth_set_create(method, &BioCreate);
  SSL_CTX* ctx = context->ctx_;
  SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
  SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
  // AES-128-GCM first (the server's order decides): with AES-NI it is the
  // fastest of the three.
  SSL_CTX_set_ciphersuites(ctx,
                           "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:"
                           "TLS_CHACHA20_POLY1305_SHA256");
  SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE);
  // Connections live as long as the job: no session resumption, so no
  // tickets to send or keys to keep.
  SSL_CTX_set_num_tickets(ctx, 0);
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_default_passwd_cb(ctx, &NoPassphrase);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1)
    return InvalidArgument(fmt::format("PSTRAIN_TLS_CERT file '{}' is not a PEM certificate: {}",
                                       files.cert, OpenSslErrors()));
  const std::string mismatch = fmt::format(
      "PSTRAIN_TLS_KEY file '{}' does not match the certificate in PSTRAIN_TLS_CERT file '{}'",
      files.key, files.cert);
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    // OpenSSL compares the key with the certificate as it loads it.
    const std::string why = OpenSslErrors();
    if (why.find("key values mismatch") != std::string::npos) return InvalidArgument(mismatch);
    return InvalidArgument(fmt::format(
        "PSTRAIN_TLS_KEY file '{}' is not an unencrypted PEM private key: {}", files.key, why));
  }
  if (SSL_CTX_check_private_key(ctx) != 1) return InvalidArgument(mismatch);
  if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1)
    return InvalidArgument(fmt::format("PSTRAIN_TLS_CA file '{}' holds no PEM CA certificate: {}",
                                       files.ca, OpenSslErrors()));
  ERR_clear_error();
  PSTRAIN_RETURN_IF_ERROR(CheckOwnCertificate(ctx, files));
  return context;
}

StatusOr<std::shared_ptr<TlsContext>> TlsContext::LoadIfSet(const TlsFiles& files) {
  if (!files.enabled()) return std::shared_ptr<TlsContext>();
  return Load(files);
}

TlsSession::TlsSession(std::shared_ptr<TlsContext> context, SSL* ssl, std::string peer)
    : context_(std::move(context)), ssl_(ssl), peer_(std::move(peer)), input_(kInputBytes) {}

TlsSession::~TlsSession() { SSL_free(ssl_); }

StatusOr<std::unique_ptr<TlsSession>> TlsSession::Create(std::shared_ptr<TlsContext> context,
                                                         Side side, std::string peer) {
  ERR_clear_error();
  SSL* ssl = SSL_new(context->ssl_ctx());
  if (ssl == nullptr) return Internal(fmt::format("TLS with {}: {}", peer, OpenSslErrors()));
  std::unique_ptr<TlsSession> session(new TlsSession(std::move(context), ssl, std::move(peer)));
  BIO* bio = BIO_new(session->context_->bio_method());
  if (bio == nullptr)
    return Internal(fmt::format("TLS with {}: {}", session->peer_, OpenSslErrors()));
  BIO_set_data(bio, session.get());
  SSL_set_bio(ssl, bio, bio);  // one reference, owned by the SSL from here
  if (side == Side::kClient)
    SSL_set_connect_state(ssl);
  else
    SSL_set_accept_state(ssl);
  return session;
}

int TlsSession::BioWrite(BIO* bio, const char* data, int n) {
  auto* self = static_cast<TlsSession*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  // As bytes: an insert from char* would convert them one by one.
  const auto* bytes = reinterpret_cast<const uint8_t*>(data);
  self->output_.insert(self->output_.end(), bytes, bytes + n);
  return n;
}

int TlsSession::BioRead(BIO* bio, char* out, int n) {
  auto* self = static_cast<TlsSession*>(BIO_get_data(bio));
  BIO_clear_retry_flags(bio);
  size_t have = self->in_end_ - self->in_begin_;
  if (have == 0) {
    BIO_set_retry_read(bio);  // not an end of stream: more may come
    return -1;
  }
  size_t take = std::min(have, static_cast<size_t>(std::max(n, 0)));
  std::memcpy(out, self->input_.data() + self->in_begin_, take);
  self->in_begin_ += take;
  return static_cast<int>(take);
}

Status TlsSession::Failure(const char* what, int rc) {
  const int error = SSL_get_error(ssl_, rc);
  if (error == SSL_ERROR_ZERO_RETURN) {
    ERR_clear_error();
    closed_by_peer_ = true;
    return Unavailable("peer closed the connection");
  }
  bool refused = false;
  std::string reason = OpenSslErrors(&refused);
  const long verify = SSL_get_verify_result(ssl_);
  if (verify != X509_V_OK) {
    reason += fmt::format(" ({})", X509_verify_cert_error_string(verify));
    refused = true;
  }
  if (error == SSL_ERROR_SYSCALL && reason == "no reason given") reason = "unexpected end of data";
  // A refused certificate is final, as a wrong token is: the caller must not
  // retry (the certificates will not change), so it ends the node at once.
  return Status(refused ? StatusCode::kPermissionDenied : StatusCode::kUnavailable,
                fmt::format("TLS {} with {} failed: {}", what, peer_, reason));
}

Status TlsSession::Handshake() {
  if (established_) return Status::OK();
  ERR_clear_error();
  const int rc = SSL_do_handshake(ssl_);
  if (rc == 1) {
    established_ = true;
    return Status::OK();
  }
  if (SSL_get_error(ssl_, rc) == SSL_ERROR_WANT_READ) return Status::OK();
  return Failure("handshake", rc);
}

TlsSession::Span TlsSession::InputSpace() {
  if (in_begin_ == in_end_) in_begin_ = in_end_ = 0;
  if (input_.size() - in_end_ < kMinInputSpace) {
    std::memmove(input_.data(), input_.data() + in_begin_, in_end_ - in_begin_);
    in_end_ -= in_begin_;
    in_begin_ = 0;
    // Still full: OpenSSL has not taken what came (a handshake message
    // larger than the buffer); grow rather than stall.
    if (input_.size() - in_end_ < kMinInputSpace) input_.resize(2 * input_.size());
  }
  return {input_.data() + in_end_, input_.size() - in_end_};
}

void TlsSession::Received(size_t n) { in_end_ = std::min(in_end_ + n, input_.size()); }

void TlsSession::Feed(const uint8_t* data, size_t n) {
  while (n > 0) {
    Span space = InputSpace();
    size_t take = std::min(n, space.size);
    std::memcpy(space.data, data, take);
    Received(take);
    data += take;
    n -= take;
  }
}

StatusOr<size_t> TlsSession::Read(uint8_t* out, size_t n) {
  if (!established_) {
    PSTRAIN_RETURN_IF_ERROR(Handshake());
    if (!established_) return size_t{0};
  }
  ERR_clear_error();
  size_t got = 0;
  const int rc = SSL_read_ex(ssl_, out, n, &got);
  if (rc == 1) return got;
  if (SSL_get_error(ssl_, rc) == SSL_ERROR_WANT_READ) return size_t{0};
  return Failure("read", rc);
}

Status TlsSession::Write(const uint8_t* data, size_t n) {
  if (!established_)
    return FailedPrecondition(fmt::format("TLS write to {} before the handshake", peer_));
  if (n == 0) return Status::OK();
  // The whole ciphertext fits without the vector regrowing record by record.
  output_.reserve(output_.size() + n + (n / kRecordPlaintext + 1) * kRecordOverhead);
  ERR_clear_error();
  size_t written = 0;
  const int rc = SSL_write_ex(ssl_, data, n, &written);
  if (rc == 1 && written == n) return Status::OK();
  return Failure("write", rc);
}

std::vector<uint8_t> TlsSession::TakeOutput() {
  std::vector<uint8_t> out;
  out.swap(output_);
  if (!spare_.empty()) {
    output_.swap(spare_.back());
    spare_.pop_back();
  }
  return out;
}

void TlsSession::Recycle(std::vector<uint8_t>&& sent) {
  if (spare_.size() >= kSpareBuffers) return;
  sent.clear();
  spare_.push_back(std::move(sent));
}

}  // namespace pstrain
