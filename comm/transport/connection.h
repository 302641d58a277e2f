// Connection: one TCP connection carrying frames, with request tracking.
//
// Owned by the loop: a Connection keeps itself alive until its handle is
// closed, so callers hold it by shared_ptr (to use) or weak_ptr (to observe).
// Every method is loop-thread only (checked where asserts are on:
// PSTRAIN_DCHECK_ON_LOOP, comm/transport/event_loop.h). Requests sent with
// Call() get a fresh id; the peer's reply (same id, is_reply) completes the
// callback. When the connection closes, every pending callback fails with
// the reason, so nothing waits forever on a dead peer. A frame that fails
// any check closes the connection with a logged reason; the process goes on.
//
// Every connection opens with the handshake of comm/transport/handshake.h, run here on
// its first frames (tiny frame limits until it is done; nothing else is read
// or sent before). Connect() hands the connection over only once the
// handshake succeeded, and a listener only once Authenticate() did, so no
// caller ever sees an unauthenticated connection. The limits of the loop's
// SecuritySettings apply to every connection: a handshake deadline, a
// deadline for a frame begun, a cap on bytes queued to the peer.
#pragma once

#include <uv.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

#include "comm/transport/buffer.h"
#include "comm/transport/event_loop.h"
#include "comm/transport/frame.h"
#include "comm/transport/handshake.h"
#include "comm/transport/messages.h"
#include "comm/transport/tls.h"
#include "src/common/logging.h"
#include "src/common/status.h"

namespace pstrain {

// A received message with its payload (if any).
struct Incoming {
  Message message;
  Buffer payload;
  uint64_t wire_bytes = 0;  // the frame as it came: fixed header, header, payload
};

class Connection : public HandleOwner, public std::enable_shared_from_this<Connection> {
 public:
  using Ptr = std::shared_ptr<Connection>;
  using RequestHandler = std::function<void(const Ptr&, Incoming&&)>;
  using ReplyCallback = std::function<void(StatusOr<Incoming>)>;
  using CloseHandler = std::function<void(const Ptr&, const Status& reason)>;
  using ConnectCallback = std::function<void(StatusOr<Ptr>)>;
  using OpenCallback = std::function<void(const Ptr&)>;
  // Where the payload of a request (not a reply) of `size` bytes goes,
  // asked once its header is in: exactly `size` bytes of memory that must
  // stay valid until the request is handed to on_request (or the connection
  // closes), or an empty Buffer for memory of the connection's own.
  using RequestPlacer = std::function<Buffer(const Ptr&, const Message&, uint64_t size)>;

  // Resolves `host`, connects and runs the handshake. `done` runs on the loop
  // thread, with the connection once the peer proved itself, or with why
  // not: PermissionDenied when a check of the handshake failed (another
  // token, a token on one side only, a certificate refused by either end),
  // Unavailable or DeadlineExceeded when the peer could not be reached or
  // did not answer (the TCP connect has SecuritySettings::connect_timeout_ms).
  // `local_ip` (an IP literal; empty: the kernel's choice) is the address to
  // connect from: a client of many connections to one peer multiplies its
  // ephemeral ports with several (127.0.0.x on loopback).
  static void Connect(EventLoop* loop, Logger log, const std::string& host, uint16_t port,
                      ConnectCallback done, const std::string& local_ip = {});
  // Wraps a socket accepted by a listener (already uv_accept()ed into `tcp`).
  static Ptr Adopt(EventLoop* loop, Logger log, std::unique_ptr<uv_tcp_t> tcp);

  ~Connection() override;

  // Runs the acceptor's side of the handshake on a connection from Adopt():
  // `on_open` gets it once the peer proved itself; never if the handshake
  // fails (the connection closes and the reason is logged).
  void Authenticate(OpenCallback on_open);

  // Starts reading (after the handshake). `on_request` gets every message
  // that is not a reply, including any that came before Start(); `on_close`
  // runs once, when the connection is gone.
  void Start(RequestHandler on_request, CloseHandler on_close);

  // Sets where requests' payloads are read to (e.g. straight into a tensor);
  // unset, into memory of the connection's own.
  void SetRequestPlacer(RequestPlacer placer) { request_placer_ = std::move(placer); }

  // Sends a request and calls `done` with the reply (or the reason none came).
  // An ErrorReply from the peer arrives as a non-OK status with its message.
  // A reply payload of exactly reply_into.size bytes is read straight into
  // reply_into (which must stay valid until `done` runs); one of another size
  // fails the call.
  void Call(MessageBody body, ReplyCallback done, Payload payload = {}, Buffer reply_into = {});
  // Sends a one-way message (request_id 0), with an optional payload.
  void Notify(MessageBody body, Payload payload = {});
  // Answers request `request_id`.
  void Reply(uint64_t request_id, MessageBody body, Payload payload = {});

  // Closes the connection; `reason` goes to the close handler and to every
  // pending call. Idempotent.
  void Close(const Status& reason);

  bool closed() const {
    return closing_ || uv_is_closing(reinterpret_cast<const uv_handle_t*>(tcp_.get()));
  }
  // Closes the connection if its TCP connect, its handshake or a frame
  // begun is overdue (SecuritySettings). Driven by the loop's sweep.
  void CheckDeadlines(uint64_t now_ms);
  // Closes the connection with a DeadlineExceeded reason if a call sent
  // more than `timeout_ms` before `now_ms` is still unanswered. Calls that
  // wait on other nodes by design (MayWaitOnOthers) are exempt.
  void ExpireOverdueCalls(uint64_t now_ms, uint64_t timeout_ms);
  const std::string& peer() const { return peer_; }  // "ip:port"
  std::string LocalIp() const;                       // address of this end

  void OnHandleClosed(uv_handle_t* handle) override;

  // A frame waiting to be written: its headers, and its payload's memory.
  struct OutFrame {
    std::vector<uint8_t> prefix;  // fixed header + FlatBuffers header
    Payload payload;
  };

 private:
  Connection(EventLoop* loop, Logger log, std::unique_ptr<uv_tcp_t> tcp);
  void BeginHandshake(HandshakeRole role);
  void OnHandshakeFrame(const Message& message);
  void OnHandshakeDone();
  void FailHandshake(const Status& why);
  void FinishConnect(StatusOr<Ptr> result);
  void StartReading();
  // Feeds `n` bytes just read to the frame reader (the seam between the byte
  // path and frames), noting when a frame has begun.
  Status ConsumeFrames(size_t n);
  void Send(const Message& message, Payload payload);
  bool InjectTestFault(const Message& message);
  void Flush();
  StatusOr<Buffer> PlacePayload(const std::vector<uint8_t>& header, uint64_t size);
  void OnFrame(Frame&& frame);
  // Logs why this connection is closed; before it is authenticated, within
  // the loop's rate of refusal lines (EventLoop::AllowRefusalLine).
  void WarnClosing(const std::string& line);
  static void OnAlloc(uv_handle_t* h, size_t suggested, uv_buf_t* buf);
  static void OnRead(uv_stream_t* s, ssize_t nread, const uv_buf_t* buf);
  // TLS on the byte path (connection_tls.cc), when the loop has a context:
  // the session, handshake, decryption into the frame reader, encryption.
  Status BeginTls(TlsSession::Side side);
  void ReadTls(size_t nread);
  void FlushTls();
  void PumpTls();
  void SendCiphertext();

  EventLoop* loop_;
  Logger log_;
  std::unique_ptr<uv_tcp_t> tcp_;
  std::string peer_;
  FrameReader reader_;
  RequestHandler on_request_;
  RequestPlacer request_placer_;
  CloseHandler on_close_;
  struct Pending {
    ReplyCallback done;
    Buffer reply_into;
    uint64_t sent_ms = 0;  // loop clock; 0: exempt from deadlines
    const char* what = "";
  };
  std::unordered_map<uint64_t, Pending> pending_;
  std::optional<Message> decoded_;  // header of the frame being read
  uint64_t next_request_id_ = 1;
  std::vector<OutFrame> outbox_;  // sent at the end of this loop iteration
  uint64_t outbox_bytes_ = 0;     // in outbox_ (and, with TLS, tls_queue_ not yet encrypted)
  // The handshake, until it is done; null after (open_).
  std::unique_ptr<Handshake> handshake_;
  bool open_ = false;
  bool counted_handshaking_ = false;  // in the loop's handshaking() count
  uint64_t handshake_began_ms_ = 0;
  uint64_t connect_began_ms_ = 0;  // a TCP connect under way (Connect), else 0
  bool dialed_ = false;            // made by Connect(): peer_ is the address dialed
  ConnectCallback on_connected_;   // Connect()'s caller, until the handshake ends
  OpenCallback on_open_;           // Authenticate()'s caller
  bool reading_ = false;
  bool started_ = false;
  std::vector<Incoming> early_;   // requests that came before Start()
  uint64_t frame_bytes_in_ = 0;   // bytes given to reader_
  uint64_t frame_bytes_out_ = 0;  // bytes of the frames it completed
  uint64_t last_byte_ms_ = 0;
  bool closing_ = false;
  Status close_reason_;
  std::unique_ptr<TlsSession> tls_;  // null: plaintext
  // Frames being encrypted, a bounded amount ahead of the socket: bytes of
  // the first already encrypted, and ciphertext written but not yet sent.
  std::deque<OutFrame> tls_queue_;
  size_t tls_offset_ = 0;
  size_t tls_in_flight_ = 0;
  Ptr self_;  // keeps this alive while the handle is open
};

// Every connection of `loop`: CheckDeadlines on each (the loop's sweep).
// Loop thread only.
void CheckConnectionDeadlines(EventLoop* loop);
// Every connection of `loop` (not listeners): ExpireOverdueCalls on each,
// for a node's periodic deadline check. Loop thread only.
void ExpireOverdueCalls(EventLoop* loop, uint64_t timeout_ms);
// Closes every connection of `loop` with `why`: each pending call fails, so
// threads waiting on peers return. How a node drops out of a paused job.
// Loop thread only.
void CloseAllConnections(EventLoop* loop, const Status& why);

// Turns a libuv error code into a message ("connection refused").
std::string UvError(int code);

}  // namespace pstrain
