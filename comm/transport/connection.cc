#include "comm/transport/connection.h"

#include <fmt/format.h>
#include <netinet/in.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "comm/transport/address.h"

namespace pstrain {
namespace {

// One uv_write in flight: the bytes it points at live here until it completes.
struct WriteRequest {
  uv_write_t req;
  std::vector<Connection::OutFrame> frames;
};

// Before the handshake is done, only its frames fit: AuthHello and AuthProof
// headers are about 100 bytes, and carry no payload.
constexpr FrameLimits kHandshakeLimits{256, 0};
constexpr size_t kMaxEarlyRequests = 1024;
constexpr size_t kMaxRefusalBytes = 160;  // an Error within kHandshakeLimits
// How often the loop checks connections' deadlines: often enough for the
// shortest of them to be kept to within a quarter of itself.
uint64_t SweepIntervalMs(const SecuritySettings& s) {
  uint64_t shortest = std::min(s.handshake_timeout_ms, s.frame_stall_timeout_ms);
  if (s.connect_timeout_ms > 0) shortest = std::min(shortest, s.connect_timeout_ms);
  return std::clamp<uint64_t>(shortest / 4, 10, 500);
}

std::string PeerName(uv_tcp_t* tcp) {
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "?";
  return FormatAddress(reinterpret_cast<const sockaddr*>(&addr));
}

}  // namespace

std::string UvError(int code) { return uv_strerror(code); }

Connection::Connection(EventLoop* loop, Logger log, std::unique_ptr<uv_tcp_t> tcp)
    : loop_(loop),
      log_(std::move(log)),
      tcp_(std::move(tcp)),
      reader_(kHandshakeLimits, [this](const std::vector<uint8_t>& header, uint64_t size) {
        return PlacePayload(header, size);
      }) {
  tcp_->data = static_cast<HandleOwner*>(this);
}

Connection::~Connection() = default;

Connection::Ptr Connection::Adopt(EventLoop* loop, Logger log, std::unique_ptr<uv_tcp_t> tcp) {
  PSTRAIN_DCHECK_ON_LOOP(loop);
  Ptr conn(new Connection(loop, std::move(log), std::move(tcp)));
  conn->self_ = conn;
  conn->peer_ = PeerName(conn->tcp_.get());
  uv_tcp_nodelay(conn->tcp_.get(), 1);
  if (Status tls = conn->BeginTls(TlsSession::Side::kServer); !tls.ok()) {
    conn->WarnClosing("closing the connection: " + tls.message());  // names the peer
    conn->Close(tls);
  }
  return conn;
}

namespace {

// Binds `tcp` (initialised for `local`'s family) to `local`, the port left
// to connect(), which picks one unused towards the peer
// (IP_BIND_ADDRESS_NO_PORT) rather than one unused on that address at all.
int BindLocal(uv_tcp_t* tcp, const sockaddr_storage& local) {
  uv_os_fd_t fd;
  const int one = 1;
  if (uv_fileno(reinterpret_cast<uv_handle_t*>(tcp), &fd) == 0)
    setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
  return uv_tcp_bind(tcp, reinterpret_cast<const sockaddr*>(&local), 0);
}

}  // namespace

void Connection::Connect(EventLoop* loop, Logger log, const std::string& host, uint16_t port,
                         ConnectCallback done, const std::string& local_ip) {
  PSTRAIN_DCHECK_ON_LOOP(loop);
  ResolveAddress(
      loop, host, port, [loop, log, host, port, done, local_ip](StatusOr<sockaddr_storage> addr) {
        if (!addr.ok()) return done(addr.status());
        if (loop->IsStopping()) return done(Aborted("event loop is stopping"));
        std::optional<sockaddr_storage> local;
        if (!local_ip.empty()) {
          auto resolved = ResolveAddressNow(local_ip, 0);
          if (!resolved.ok()) return done(resolved.status().WithContext("local address"));
          local = *resolved;
        }
        auto tcp = std::make_unique<uv_tcp_t>();
        const int init = local ? uv_tcp_init_ex(loop->uv(), tcp.get(), local->ss_family)
                               : uv_tcp_init(loop->uv(), tcp.get());
        if (init != 0)
          return done(Unavailable(fmt::format("connect to {}:{}: {}", host, port, UvError(init))));
        Ptr conn(new Connection(loop, log, std::move(tcp)));
        conn->self_ = conn;
        conn->peer_ = fmt::format("{}:{}", host, port);
        conn->dialed_ = true;
        if (local) {
          if (int rc = BindLocal(conn->tcp_.get(), *local); rc != 0) {
            Status error = Unavailable(fmt::format("bind to {}: {}", local_ip, UvError(rc)));
            conn->Close(error);
            return done(error);
          }
        }
        struct ConnectRequest {
          uv_connect_t req;
          Ptr conn;
          ConnectCallback done;
        };
        auto* req = new ConnectRequest{{}, conn, done};
        int rc = uv_tcp_connect(
            &req->req, conn->tcp_.get(), reinterpret_cast<const sockaddr*>(&*addr),
            [](uv_connect_t* r, int status) {
              std::unique_ptr<ConnectRequest> req(static_cast<ConnectRequest*>(r->data));
              req->conn->connect_began_ms_ = 0;
              if (status < 0) {
                // Cancelled by a close: its reason (the connect deadline) says why.
                Status error = status == UV_ECANCELED && req->conn->closing_
                                   ? req->conn->close_reason_
                                   : Unavailable(fmt::format("connect to {}: {}", req->conn->peer_,
                                                             UvError(status)));
                req->conn->Close(error);
                return req->done(error);
              }
              uv_tcp_nodelay(req->conn->tcp_.get(), 1);
              // TLS (when set) first; the token handshake's frames travel inside it.
              if (Status tls = req->conn->BeginTls(TlsSession::Side::kClient); !tls.ok()) {
                req->conn->Close(tls);
                return req->done(tls);
              }
              req->conn->on_connected_ = std::move(req->done);
              req->conn->BeginHandshake(HandshakeRole::kConnector);
            });
        req->req.data = req;
        if (rc != 0) {
          Status error = Unavailable(fmt::format("connect to {}: {}", conn->peer_, UvError(rc)));
          delete req;
          conn->Close(error);
          return done(error);
        }
        // The loop's sweep holds the connect to its deadline (CheckDeadlines).
        conn->connect_began_ms_ = std::max<uint64_t>(loop->NowMs(), 1);
        loop->EnsureSweep(SweepIntervalMs(loop->security()),
                          [loop] { CheckConnectionDeadlines(loop); });
      });
}

void Connection::Authenticate(OpenCallback on_open) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  on_open_ = std::move(on_open);
  counted_handshaking_ = true;
  ++loop_->handshaking();
  BeginHandshake(HandshakeRole::kAcceptor);
}

// Both sides send AuthHello at once; see comm/transport/handshake.h for the rest.
void Connection::BeginHandshake(HandshakeRole role) {
  if (closing_) return FinishConnect(Unavailable(fmt::format("connection to {} closed", peer_)));
  const SecuritySettings& security = loop_->security();
  loop_->EnsureSweep(SweepIntervalMs(security), [loop = loop_] { CheckConnectionDeadlines(loop); });
  handshake_began_ms_ = loop_->NowMs();
  auto nonce = Handshake::FreshNonce();
  if (!nonce.ok()) return FailHandshake(nonce.status());
  handshake_ = std::make_unique<Handshake>(role, security.token, *nonce);
  StartReading();
  Send(Message{0, false, handshake_->Hello()}, {});
}

void Connection::OnHandshakeFrame(const Message& message) {
  auto answer = handshake_->Receive(message);
  if (!answer.ok()) return FailHandshake(answer.status());
  for (MessageBody& body : *answer) Send(Message{0, false, std::move(body)}, {});
  if (handshake_->done()) OnHandshakeDone();
}

void Connection::OnHandshakeDone() {
  handshake_.reset();
  open_ = true;
  reader_.set_limits(FrameLimits{});
  if (counted_handshaking_) {
    counted_handshaking_ = false;
    --loop_->handshaking();
  }
  Ptr self = shared_from_this();
  FinishConnect(self);
  if (on_open_) {
    OpenCallback on_open = std::move(on_open_);
    on_open_ = nullptr;
    on_open(self);
  }
}

// A failed check is PermissionDenied (the caller must not retry: the token
// will not change); a deadline keeps its code.
void Connection::FailHandshake(const Status& why) {
  if (closing_) return;
  const StatusCode code =
      why.code() == StatusCode::kInvalidArgument ? StatusCode::kPermissionDenied : why.code();
  Status failed(code, fmt::format("authentication failed {} {}: {}",
                                  on_connected_ ? "with" : "from", peer_, why.message()));
  WarnClosing(failed.message());
  // The peer hears which check failed (nothing secret), so that it can
  // tell a refusal from a lost connection and stop retrying.
  if (code == StatusCode::kPermissionDenied) {
    Send(Message{0, false, ErrorReply{why.message().substr(0, kMaxRefusalBytes)}}, {});
    Flush();
  }
  Close(failed);
  FinishConnect(failed);
}

void Connection::FinishConnect(StatusOr<Ptr> result) {
  if (!on_connected_) return;
  ConnectCallback done = std::move(on_connected_);
  on_connected_ = nullptr;
  done(std::move(result));
}

void Connection::StartReading() {
  if (reading_ || closing_) return;
  reading_ = true;
  int rc = uv_read_start(reinterpret_cast<uv_stream_t*>(tcp_.get()), &Connection::OnAlloc,
                         &Connection::OnRead);
  if (rc != 0) Close(Unavailable(fmt::format("read from {}: {}", peer_, UvError(rc))));
}

void Connection::Start(RequestHandler on_request, CloseHandler on_close) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  on_request_ = std::move(on_request);
  on_close_ = std::move(on_close);
  started_ = true;
  if (closing_) return;
  StartReading();
  auto early = std::move(early_);
  early_.clear();
  for (Incoming& in : early) {
    if (closing_ || !on_request_) break;
    on_request_(shared_from_this(), std::move(in));
  }
}

Status Connection::ConsumeFrames(size_t n) {
  frame_bytes_in_ += n;
  loop_->CountReceived(n);
  last_byte_ms_ = loop_->NowMs();
  Status st = reader_.Consume(n, [this](Frame&& f) {
    frame_bytes_out_ += kFixedHeaderBytes + f.header.size() + f.payload.size;
    OnFrame(std::move(f));
  });
  if (!st.ok() && !open_) return st.WithContext("before the handshake");
  return st;
}

void Connection::OnAlloc(uv_handle_t* h, size_t, uv_buf_t* buf) {
  auto* self = static_cast<Connection*>(static_cast<HandleOwner*>(h->data));
  // With TLS the socket's bytes are ciphertext: they go to the session, and
  // the plaintext to the frame reader's span (ReadTls).
  uint8_t* data;
  size_t size;
  if (self->tls_) {
    TlsSession::Span span = self->tls_->InputSpace();
    data = span.data, size = span.size;
  } else {
    FrameReader::Span span = self->reader_.NextBuffer();
    data = span.data, size = span.size;
  }
  *buf = uv_buf_init(reinterpret_cast<char*>(data),
                     static_cast<unsigned>(std::min<size_t>(size, 1u << 30)));
}

void Connection::OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t*) {
  auto* self = static_cast<Connection*>(static_cast<HandleOwner*>(s->data));
  if (nread == 0) return;  // EAGAIN
  if (nread < 0) {
    self->Close(Unavailable(nread == UV_EOF ? "peer closed the connection"
                                            : UvError(static_cast<int>(nread))));
    return;
  }
  Ptr keep = self->shared_from_this();  // a handler may close us mid-parse
  if (self->tls_) return self->ReadTls(static_cast<size_t>(nread));
  Status st = self->ConsumeFrames(static_cast<size_t>(nread));
  if (!st.ok()) {
    self->WarnClosing(
        fmt::format("closing connection from {}: bad frame: {}", self->peer_, st.message()));
    self->Close(st);
  }
}

// The header is verified here, before any payload byte is read, so that a
// reply's payload can go straight to the memory its request named.
StatusOr<Buffer> Connection::PlacePayload(const std::vector<uint8_t>& header, uint64_t size) {
  auto message = DecodeHeader(header.data(), header.size());
  if (!message.ok()) return message.status();
  decoded_ = std::move(*message);
  // A payload where none belongs is refused before a byte of it is allocated.
  if (size > 0 && !MayCarryPayload(decoded_->body))
    return InvalidArgument(
        fmt::format("{} with a payload of {} bytes", MessageName(decoded_->body), size));
  if (!decoded_->is_reply) {
    if (!request_placer_ || size == 0 || !open_) return Buffer{};
    return request_placer_(shared_from_this(), *decoded_, size);
  }
  if (!IsPulledValues(decoded_->body)) return Buffer{};
  auto it = pending_.find(decoded_->request_id);
  if (it == pending_.end() || it->second.reply_into.size != size) return Buffer{};
  return it->second.reply_into;
}

void Connection::OnFrame(Frame&& frame) {
  if (closing_ || !decoded_) return;
  const uint64_t wire_bytes = kFixedHeaderBytes + frame.header.size() + frame.payload.size;
  Incoming in{std::move(*decoded_), std::move(frame.payload), wire_bytes};
  decoded_.reset();
  if (!open_) return OnHandshakeFrame(in.message);
  if (IsHandshake(in.message.body)) {
    Status bad = InvalidArgument(
        fmt::format("{} after the handshake was complete", MessageName(in.message.body)));
    log_->warn("closing connection from {}: {}", peer_, bad.message());
    return Close(bad);
  }
  if (!in.message.is_reply) {
    if (on_request_) {
      on_request_(shared_from_this(), std::move(in));
    } else if (!started_) {
      if (early_.size() >= kMaxEarlyRequests) {
        Status full = Unavailable(fmt::format(
            "{} requests from {} before the connection was started", early_.size(), peer_));
        log_->warn("closing connection from {}: {}", peer_, full.message());
        return Close(full);
      }
      early_.push_back(std::move(in));
    }
    return;
  }
  auto it = pending_.find(in.message.request_id);
  if (it == pending_.end()) {
    Status bad = InvalidArgument(fmt::format("reply to unknown request {}", in.message.request_id));
    log_->warn("closing connection from {}: {}", peer_, bad.message());
    Close(bad);
    return;
  }
  Pending pending = std::move(it->second);
  pending_.erase(it);
  if (auto* error = std::get_if<ErrorReply>(&in.message.body)) {
    pending.done(FailedPrecondition(error->message));
  } else if (pending.reply_into.size > 0 && in.payload.data != pending.reply_into.data &&
             !std::holds_alternative<Moved>(in.message.body)) {  // Moved: sent elsewhere
    pending.done(InvalidArgument(fmt::format("{} replied with {} payload bytes, expected {}", peer_,
                                             in.payload.size, pending.reply_into.size)));
  } else {
    pending.done(std::move(in));
  }
}

void Connection::Call(MessageBody body, ReplyCallback done, Payload payload, Buffer reply_into) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  // The loop may have begun closing the handle (EventLoop::Stop) before this
  // connection heard of it.
  if (!closing_ && uv_is_closing(reinterpret_cast<uv_handle_t*>(tcp_.get()))) {
    closing_ = true;
    close_reason_ = Aborted("event loop stopped");
  }
  if (closing_) {
    done(
        Unavailable(fmt::format("connection to {} is closed: {}", peer_, close_reason_.message())));
    return;
  }
  if (!open_) {  // a bug: callers get connections only once they are open
    done(FailedPrecondition(fmt::format("connection to {} is not authenticated yet", peer_)));
    return;
  }
  Message m{next_request_id_++, false, std::move(body)};
  const uint64_t sent_ms = MayWaitOnOthers(m.body) ? 0 : std::max<uint64_t>(loop_->NowMs(), 1);
  pending_.emplace(m.request_id,
                   Pending{std::move(done), std::move(reply_into), sent_ms, MessageName(m.body)});
  Send(m, std::move(payload));
}

void Connection::Notify(MessageBody body, Payload payload) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (!open_) return;  // a bug: callers get connections only once they are open
  Send(Message{0, false, std::move(body)}, std::move(payload));
}

void Connection::Reply(uint64_t request_id, MessageBody body, Payload payload) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (request_id == 0 || !open_) return;  // one-way messages get no reply
  Send(Message{request_id, true, std::move(body)}, std::move(payload));
}

// Frames queue in the outbox and go out in one write at the end of the loop
// iteration: a push and a pull issued together share one segment, and the
// peer reads them in one go.
void Connection::Send(const Message& message, Payload payload) {
  if (closing_) return;
  if (loop_->test_fault().kind != TestFault::Kind::kNone && InjectTestFault(message)) return;
  OutFrame frame;
  std::vector<uint8_t> header = EncodeHeader(message);
  frame.prefix.resize(kFixedHeaderBytes + header.size());
  EncodeFixedHeader(static_cast<uint32_t>(header.size()), payload.size, frame.prefix.data());
  std::memcpy(frame.prefix.data() + kFixedHeaderBytes, header.data(), header.size());
  frame.payload = std::move(payload);
  // A peer that does not read must not make this node hold its replies
  // without bound.
  const uint64_t bytes = frame.prefix.size() + frame.payload.size;
  const uint64_t queued =
      outbox_bytes_ + uv_stream_get_write_queue_size(reinterpret_cast<uv_stream_t*>(tcp_.get()));
  if (queued + bytes > loop_->security().max_queued_bytes) {
    Status full = Unavailable(
        fmt::format("{} bytes queued to {} and not sent, {} more would pass the cap of {} "
                    "(PSTRAIN_MAX_QUEUED_BYTES): the peer does not read",
                    queued, peer_, bytes, loop_->security().max_queued_bytes));
    log_->warn("closing the connection to {}: {}", peer_, full.message());
    return Close(full);
  }
  outbox_bytes_ += bytes;
  loop_->CountSent(bytes);
  if (outbox_.empty()) loop_->AtEndOfIteration([self = shared_from_this()] { self->Flush(); });
  outbox_.push_back(std::move(frame));
}

// PSTRAIN_TEST_FAULT: true when the frame must not go out as usual. A
// worker's pushes count, and a server's changes to its backups (no node
// sends both).
bool Connection::InjectTestFault(const Message& message) {
  if (!std::holds_alternative<PushRequest>(message.body) &&
      !std::holds_alternative<SparsePushRequest>(message.body) &&
      !std::holds_alternative<Replicate>(message.body))
    return false;
  const TestFault& fault = loop_->test_fault();
  if (loop_->CountPushFrame() != fault.after) return false;
  switch (fault.kind) {
    case TestFault::Kind::kClose:
      log_->warn("test fault: closing the connection to {} at push frame {}", peer_, fault.after);
      Close(Unavailable(fmt::format("test fault: closed at push frame {}", fault.after)));
      return true;
    case TestFault::Kind::kDrop:
      log_->warn("test fault: dropping push frame {} to {}", fault.after, peer_);
      return true;
    case TestFault::Kind::kDelay:
      // The whole node stalls, as a node whose network hangs would.
      log_->warn("test fault: holding push frame {} to {} for {} ms", fault.after, peer_,
                 fault.delay_ms);
      std::this_thread::sleep_for(std::chrono::milliseconds(fault.delay_ms));
      return false;
    case TestFault::Kind::kNone:
      break;
  }
  return false;
}

void Connection::Flush() {
  if (closing_ || outbox_.empty()) return;
  if (tls_) return FlushTls();
  auto* w = new WriteRequest;
  w->frames.swap(outbox_);
  outbox_bytes_ = 0;
  std::vector<uv_buf_t> bufs;
  bufs.reserve(2 * w->frames.size());
  for (OutFrame& f : w->frames) {
    bufs.push_back(uv_buf_init(reinterpret_cast<char*>(f.prefix.data()),
                               static_cast<unsigned>(f.prefix.size())));
    if (f.payload.size > 0)
      bufs.push_back(uv_buf_init(const_cast<char*>(reinterpret_cast<const char*>(f.payload.data)),
                                 static_cast<unsigned>(f.payload.size)));
  }
  w->req.data = w;
  int rc = uv_write(
      &w->req, reinterpret_cast<uv_stream_t*>(tcp_.get()), bufs.data(),
      static_cast<unsigned>(bufs.size()), [](uv_write_t* r, int status) {
        std::unique_ptr<WriteRequest> w(static_cast<WriteRequest*>(r->data));
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

void Connection::Close(const Status& reason) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (closing_) return;
  closing_ = true;
  close_reason_ = reason;
  CloseHandle(reinterpret_cast<uv_handle_t*>(tcp_.get()));
}

void Connection::OnHandleClosed(uv_handle_t*) {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  if (!closing_) {  // closed by the loop shutting down
    closing_ = true;
    close_reason_ = Aborted("event loop stopped");
  }
  Ptr keep = std::move(self_);
  // This node stopping closes with Aborted; anything else is the link's fault.
  if (dialed_ && close_reason_.code() != StatusCode::kAborted) loop_->NotePeerFailure(peer_);
  if (counted_handshaking_) {
    counted_handshaking_ = false;
    --loop_->handshaking();
  }
  handshake_.reset();
  on_open_ = nullptr;
  // A refusal (a certificate the peer or this node rejects) keeps its code:
  // the caller must not retry it.
  const StatusCode code = close_reason_.code();
  FinishConnect(Status(code == StatusCode::kAborted || code == StatusCode::kPermissionDenied
                           ? code
                           : StatusCode::kUnavailable,
                       fmt::format("connect to {}: closed during the handshake: {}", peer_,
                                   close_reason_.message())));
  early_.clear();
  auto pending = std::move(pending_);
  pending_.clear();
  for (auto& [id, p] : pending)
    p.done(Unavailable(fmt::format("connection to {} closed: {}", peer_, close_reason_.message())));
  if (on_close_) {
    CloseHandler on_close = std::move(on_close_);
    on_close(keep, close_reason_);
  }
  on_request_ = nullptr;
  request_placer_ = nullptr;
}

std::string Connection::LocalIp() const {
  PSTRAIN_DCHECK_ON_LOOP(loop_);
  sockaddr_storage addr{};
  int len = sizeof(addr);
  if (uv_tcp_getsockname(tcp_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "";
  return FormatIp(reinterpret_cast<const sockaddr*>(&addr));
}

void Connection::WarnClosing(const std::string& line) {
  if (open_) return log_->warn("{}", line);
  uint64_t dropped = 0;
  if (!loop_->AllowRefusalLine(&dropped)) return;
  if (dropped == 0) return log_->warn("{}", line);
  log_->warn("{} ({} lines like it not logged before this one)", line, dropped);
}

}  // namespace pstrain
