// Writes the seed corpus of every harness from the code's own writers: frames
// and headers from the encoder, checkpoint and shard files from their
// writers, small IDX and Criteo files (raw and gzip), and the configs of
// configs/. Usage: fuzz_make_corpus REPO_DIR (writes REPO_DIR/tests/fuzz/corpus/<harness>/).
// Findings added by hand (named after what they found) are left alone.
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "comm/transport/frame.h"
#include "comm/transport/handshake.h"
#include "comm/transport/messages.h"
#include "embedding/sparse_table.h"
#include "optim/threshold_codec.h"
#include "roles/checkpoint/shard_file.h"
#include "roles/checkpoint/step_files.h"
#include "roles/checkpoint/store.h"
#include "roles/checkpoint/worker_place.h"
#include "roles/placement/row_move_codec.h"
#include "roles/server/handoff_codec.h"
#include "src/common/checkpoint_file.h"

namespace pstrain {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

fs::path corpus;

void Write(const std::string& harness, const std::string& name, const Bytes& bytes) {
  fs::create_directories(corpus / harness);
  std::ofstream out(corpus / harness / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) {
    std::fprintf(stderr, "cannot write %s/%s\n", harness.c_str(), name.c_str());
    std::exit(1);
  }
}

Bytes Gzip(const Bytes& raw) {
  const std::string tmp = (fs::temp_directory_path() / "pstrain-corpus.gz").string();
  gzFile f = gzopen(tmp.c_str(), "wb9");
  gzwrite(f, raw.data(), static_cast<unsigned>(raw.size()));
  gzclose(f);
  std::ifstream in(tmp, std::ios::binary);
  Bytes out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  fs::remove(tmp);
  return out;
}

Bytes ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

Bytes FloatBytes(size_t n) {
  Bytes b(n * sizeof(float));
  for (size_t i = 0; i < n; ++i) {
    float x = 0.25f * static_cast<float>(i) - 1.0f;
    std::memcpy(b.data() + i * sizeof(float), &x, sizeof(float));
  }
  return b;
}

Bytes Frame(const Message& m, const Bytes& payload = {}) {
  Bytes header = EncodeHeader(m);
  Bytes out(kFixedHeaderBytes);
  EncodeFixedHeader(static_cast<uint32_t>(header.size()), payload.size(), out.data());
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

// One message of every kind, with the payload it may carry.
std::vector<std::pair<std::string, std::pair<Message, Bytes>>> Messages() {
  NodeInfo node{"node-a", Role::kServer, "127.0.0.1", 4242, 0};
  NodeInfo worker{"node-b", Role::kWorker, "127.0.0.2", 4243, 1};
  Bytes ids_rows(2 * sizeof(int64_t));
  ids_rows[0] = 3;
  ids_rows[8] = 7;
  Bytes rows = FloatBytes(8);
  ids_rows.insert(ids_rows.end(), rows.begin(), rows.end());
  return {
      {"register_request", {{1, false, RegisterRequest{node, 2, 2, 30, false, 0}}, {}}},
      {"register_reply", {{1, true, RegisterReply{0, 1}}, {}}},
      {"topology", {{0, false, Topology{{node, worker}, 1}}, {}}},
      {"topology_delta", {{0, false, Topology{{worker}, 2, 1, 2, 1}}, {}}},
      {"register_request_holding",
       {{1, false, RegisterRequest{node, 2, 2, 30, true, 1, "", 1, 0x0123456789abcdefULL}}, {}}},
      {"heartbeat", {{0, false, Heartbeat{}}, {}}},
      {"barrier_request", {{2, false, BarrierRequest{BarrierGroup::kWorkers, 5, "blob"}}, {}}},
      {"barrier_reply", {{2, true, BarrierReply{5, "blob"}}, {}}},
      {"done", {{0, false, Done{}}, {}}},
      {"shutdown", {{0, false, Shutdown{"job done", false, false}}, {}}},
      {"pause", {{0, false, Pause{"lost server 1", 2}}, {}}},
      {"node_failed", {{0, false, NodeFailed{"disk full", true}}, {}}},
      {"stop_request", {{0, false, StopRequest{"SIGTERM"}}, {}}},
      {"stop_request_leave", {{0, false, StopRequest{"SIGTERM", true}}, {}}},
      {"pause_reshape", {{0, false, Pause{"shape", 3, 1, 2, 3}}, {}}},
      {"scale_request", {{9, false, ScaleRequest{3, 2}}, {}}},
      {"scale_reply", {{9, true, ScaleReply{"3 workers"}}, {}}},
      {"moved", {{10, true, Moved{1, 2}}, {}}},
      {"register_reply_live", {{1, true, RegisterReply{2, 1, true}}, {}}},
      {"stop_grow", {{9, false, Stop{"grow", 40, 3}}, {}}},
      {"stop_shrink_slots", {{9, false, Stop{"shrink", 40, 2, {2, 1}}}, {}}},
      {"shape_changed", {{9, false, ShapeChanged{40, 3, 2}}, {}}},
      {"hand_off_request", {{11, false, HandOffRequest{"fc.weight", 2, 1, 2}}, {}}},
      {"hand_off_reply", {{11, true, HandOffReply{2}}, Bytes(48, 1)}},
      {"take_over_expect", {{12, false, TakeOverRequest{"fc.weight", 2, 2, true, 256}}, {}}},
      {"take_over", {{13, false, TakeOverRequest{"fc.weight", 2, 2, false, 256}}, Bytes(48, 1)}},
      {"rows_hand_off_request", {{14, false, RowsHandOffRequest{3, 1}}, {}}},
      {"rows_hand_off_reply", {{14, true, RowsHandOffReply{2, 40}}, Bytes(48, 1)}},
      {"rows_take_over", {{15, false, RowsTakeOverRequest{3, 40, 2}}, Bytes(48, 1)}},
      {"rows_digest_request", {{16, false, RowsDigestRequest{}}, {}}},
      {"stop_lost", {{17, false, Stop{"lost", 41, 0, {}, {2}}}, {}}},
      {"stop_lost_make_up", {{17, false, Stop{"lost", 41, 0, {}, {2}, 2, {0, 1, -1}, 38}}, {}}},
      {"stop_reply_rest_from", {{17, true, StopReply{41, 30}}, {}}},
      {"lose_worker", {{18, false, LoseWorker{2, 40, "lost"}}, {}}},
      {"lose_worker_reply", {{18, true, LoseWorkerReply{39}}, {}}},
      {"stop_change_workers", {{19, false, Stop{"w", 40, 0, {}, {}, 3, {0, -1, 1}}}, {}}},
      {"shape_changed_workers", {{19, false, ShapeChanged{40, 2, 0, 3}}, {}}},
      {"change_workers", {{20, false, ChangeWorkers{40, 3, {0, -1, 1}}}, {}}},
      {"pre_copy_rows", {{21, false, PreCopyRows{3, 2, {2, 1}}}, {}}},
      {"rows_hand_off_copy", {{22, false, RowsHandOffRequest{3, 1, RowsPhase::kCopy}}, {}}},
      {"rows_digest_reply", {{16, true, RowsDigestReply{{"emb", "wide"}, {10, 3}, {7, 9}}}, {}}},
      {"register_request_elastic",
       {{1, false, RegisterRequest{node, 2, 2, 30, false, 0, "", -1, 0, ElasticBounds{1, 4, 1, 3}}},
        {}}},
      {"stop", {{3, false, Stop{"stop", 100}}, {}}},
      {"stop_reply", {{3, true, StopReply{99}}, {}}},
      {"hello", {{4, false, Hello{worker, "/pstrain-ring-1", 77}}, {}}},
      {"ack", {{4, true, Ack{}}, {}}},
      {"error", {{5, true, ErrorReply{"no such tensor"}}, {}}},
      {"push_request",
       {{6, false, PushRequest{"fc1.weight", 1, 0, 12, PushKind::kGradient}}, FloatBytes(16)}},
      {"push_init", {{6, false, PushRequest{"fc1.bias", 0, 0, 0, PushKind::kInit}}, FloatBytes(4)}},
      {"pull_request", {{7, false, PullRequest{"fc1.weight", 1, 0, 12, 16}}, {}}},
      {"pull_reply", {{7, true, PullReply{12}}, FloatBytes(16)}},
      {"push_clip_factor",
       {{6, false, PushRequest{"fc1.weight", 1, 0, 12, PushKind::kClipScale}}, FloatBytes(1)}},
      {"norm_reply", {{7, true, PullReply{12, PushEncoding::kDense, 0, 0.25}}, {}}},
      {"save_request", {{8, false, SaveRequest{100}}, {}}},
      {"save_reply", {{8, true, SaveReply{"server-0.ckpt"}}, {}}},
      {"ring_chunk", {{0, false, RingChunk{9, 1, 0}}, FloatBytes(8)}},
      {"sparse_pull_request", {{10, false, SparsePullRequest{"emb_user", 0, 3, 2}}, Bytes(16, 1)}},
      {"sparse_pull_reply", {{10, true, SparsePullReply{3}}, FloatBytes(8)}},
      {"sparse_push_request", {{11, false, SparsePushRequest{"emb_user", 0, 3, 2, 2}}, ids_rows}},
      {"auth_hello", {{0, false, AuthHello{kHandshakeVersion, {}, true}}, {}}},
      {"auth_proof", {{0, false, AuthProof{}}, {}}},
  };
}

void WireSeeds() {
  Bytes stream;
  for (const auto& [name, mp] : Messages()) {
    Write("messages_fuzz", name, EncodeHeader(mp.first));
    Bytes frame = Frame(mp.first, mp.second);
    Write("frame_fuzz", name, frame);
    if (stream.size() < 2000) stream.insert(stream.end(), frame.begin(), frame.end());
  }
  Write("frame_fuzz", "stream_of_frames", stream);
  // A payload past the reader's direct-read threshold (64 KiB).
  Write("frame_fuzz", "large_pull_reply", Frame({7, true, PullReply{1}}, FloatBytes(17000)));
}

// The handshake as a peer would run it: byte 0 picks the side and whether it
// holds a token, then length-prefixed headers (see handshake_fuzz.cc). The
// peer's proofs are real MACs, over the harness's fixed nonce, for the token.
void HandshakeSeeds() {
  Handshake::Nonce ours{};
  for (size_t i = 0; i < ours.size(); ++i) ours[i] = static_cast<uint8_t>(i * 7 + 1);
  Handshake::Nonce theirs{};
  theirs.fill(0x5a);
  for (int flags = 0; flags < 4; ++flags) {
    const auto peer = (flags & 1) ? HandshakeRole::kConnector : HandshakeRole::kAcceptor;
    const bool token = (flags & 2) != 0;
    Handshake other(peer, token ? "fuzz-token" : "", theirs);
    Bytes seed{static_cast<uint8_t>(flags)};
    auto add = [&](const MessageBody& body) {
      Bytes h = EncodeHeader(Message{0, false, body});
      seed.push_back(static_cast<uint8_t>(h.size() & 0xff));
      seed.push_back(static_cast<uint8_t>(h.size() >> 8));
      seed.insert(seed.end(), h.begin(), h.end());
    };
    add(other.Hello());
    if (token) add(AuthProof{Handshake::Mac("fuzz-token", peer, theirs, ours)});
    Write("handshake_fuzz", "seed-" + std::to_string(flags), seed);
  }
}

// Requests the live view gets (see http_fuzz.cc: byte 0 picks the head
// limit, odd for the default): curl's, Prometheus's scrape, a HEAD, and one
// refused for its body.
void HttpSeeds() {
  const std::pair<const char*, const char*> requests[] = {
      {"curl_status",
       "GET /status HTTP/1.1\r\nHost: 127.0.0.1:18080\r\n"
       "User-Agent: curl/7.88.1\r\nAccept: */*\r\n\r\n"},
      {"prometheus_scrape",
       "GET /metrics HTTP/1.1\r\nHost: sched:18080\r\nUser-Agent: Prometheus/2.42.0\r\n"
       "Accept: application/openmetrics-text;version=1.0.0;q=0.5,text/plain;version=0.0.4;q=0.2\r\n"
       "Accept-Encoding: gzip\r\nX-Prometheus-Scrape-Timeout-Seconds: 10\r\n\r\n"},
      {"head_query", "HEAD /status?pretty=1 HTTP/1.0\r\n\r\n"},
      {"post_with_body", "POST /status HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"},
  };
  for (const auto& [name, request] : requests) {
    Bytes seed{1};
    seed.insert(seed.end(), request, request + std::strlen(request));
    Write("http_fuzz", name, seed);
  }
}

void CheckpointSeeds() {
  const fs::path dir = fs::temp_directory_path() / "pstrain-corpus-ckpt";
  fs::remove_all(dir);
  const std::string file = (dir / "file.ckpt").string();
  Bytes values = FloatBytes(6);
  Status st =
      WriteCheckpointFile(file, {{"meta", "worker 0\n", 9}, {"w", values.data(), values.size()}});
  if (st.ok()) Write("checkpoint_fuzz", "two_sections", ReadFile(file));
  // A worker's place with positions to make up (a lost worker's batches).
  WorkerPlace place;
  place.step = 50;
  place.workers = 2;
  place.batch_size = 8;
  place.steps_per_epoch = 4;
  place.epoch = 12;
  place.position = 2;
  place.epoch_start = 48;
  place.skip_samples = 40;
  place.make_up = {{8, 16}, {24, 32}};
  place.lr_schedule = "none (constant lr) lr 0.1 constant: w";
  auto place_file = WriteWorkerPlace(dir.string(), place);
  if (place_file.ok())
    Write("checkpoint_fuzz", "worker_place_make_up", ReadFile((dir / *place_file).string()));

  EmbeddingTableOptions options;
  options.name = "emb_user";
  options.dim = 2;
  options.optimizer.type = OptimizerType::kAdagrad;
  auto table = SparseTable::Create(options);
  std::string table_bytes;
  if (table.ok()) {
    int64_t ids[3] = {1, 5, 9};
    float out[6], grads[6] = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f, 0.6f};
    (void)table->Lookup(ids, 3, out, 1);
    (void)table->ApplyGradients(ids, grads, 3, 1);
    table->Serialize(&table_bytes);
  }
  PartitionSnapshot p{"fc1.weight", 0, 3, 3, 3, {0.5f, -0.5f, 1.0f, 2.0f}, {{"m", {0, 0, 0, 1}}}};
  PartitionSnapshot q{"fc1/bias", 1, 3, 3, 3, {1.0f}, {}};
  const std::string shard = (dir / ShardFileName(0)).string();
  st = WriteShardFile(shard, ShardMeta{0, 1, 2}, {p, q}, {{"emb_user", 4, false, table_bytes}});
  if (st.ok()) Write("checkpoint_fuzz", "shard_with_table", ReadFile(shard));
  // The same table as a tiered one (embedding/tiered_table_io.cc): its
  // header, 40 rows said to be on disk, then the rows in memory; the store
  // section lists one file.
  std::string tiered("PSTIERED", 8);
  const uint32_t version = 1;
  const int64_t disk_rows = 40;
  tiered.append(reinterpret_cast<const char*>(&version), sizeof(version));
  tiered.append(reinterpret_cast<const char*>(&disk_rows), sizeof(disk_rows));
  const auto header_crc = static_cast<uint32_t>(
      crc32(0L, reinterpret_cast<const Bytef*>(tiered.data()), static_cast<uInt>(tiered.size())));
  tiered.append(reinterpret_cast<const char*>(&header_crc), sizeof(header_crc));
  tiered += table_bytes;
  const std::vector<StoreFile> store_files = {{"000012.sst", 4096, 0x1234abcd}};
  const std::string tiered_shard = (dir / "tiered.ckpt").string();
  if (st.ok())
    st = WriteShardFile(tiered_shard, ShardMeta{0, 1, 2}, {p}, {{"emb_user", 4, true, tiered}},
                        &store_files);
  if (st.ok()) Write("checkpoint_fuzz", "shard_with_tiered_table", ReadFile(tiered_shard));
  // The MANIFEST is a checkpoint file too (one "manifest" section).
  const std::string step_dir = CheckpointStepDir(dir.string(), 7);
  st = WriteShardFile(step_dir + "/" + ShardFileName(0), ShardMeta{0, 1, 1}, {p});
  if (st.ok()) st = WriteManifest(dir.string(), 7, {ShardFileName(0)});
  if (st.ok()) Write("checkpoint_fuzz", "manifest", ReadFile(step_dir + "/MANIFEST"));
  if (!st.ok()) {
    std::fprintf(stderr, "checkpoint seeds: %s\n", st.message().c_str());
    std::exit(1);
  }
  fs::remove_all(dir);
}

void Put32(Bytes* b, uint32_t v) {
  for (int i = 3; i >= 0; --i) b->push_back(static_cast<uint8_t>(v >> (8 * i)));
}

// idx_fuzz input: u16 label-file length, the image file, the label file.
void IdxSeed(const std::string& name, const Bytes& images, const Bytes& labels) {
  Bytes in{static_cast<uint8_t>(labels.size()), static_cast<uint8_t>(labels.size() >> 8)};
  in.insert(in.end(), images.begin(), images.end());
  in.insert(in.end(), labels.begin(), labels.end());
  Write("idx_fuzz", name, in);
}

void IdxSeeds() {
  Bytes images, labels;
  Put32(&images, 0x803);
  for (uint32_t d : {3u, 4u, 4u}) Put32(&images, d);
  for (int i = 0; i < 3 * 16; ++i) images.push_back(static_cast<uint8_t>(i * 5));
  Put32(&labels, 0x801);
  Put32(&labels, 3);
  for (uint8_t y : {0, 9, 4}) labels.push_back(y);
  IdxSeed("three_images", images, labels);
  IdxSeed("three_images_gzip", Gzip(images), Gzip(labels));
}

void CriteoSeeds() {
  const std::string lines =
      "1\t5\t110\t\t16\t\t1\t0\t14\t7\t1\t\t306\t\t62770d79\te21f5d58\tafea442f\t945c7fcf\t"
      "38b02748\t6fcd6dcb\t3580aa21\t28808903\t46dedfa6\t2e027dc1\t0c7c4231\t95981d1f\t00c5ffb7\t"
      "be4ee537\t8a0b74cc\t4cdc3efa\td20856aa\tb8170bba\t9512c20b\tc38e2f28\t14f65a5d\t25b1b089\t"
      "d7c1fc0b\t7caf609c\t30436bfc\ted10571d\n"
      "0\t32\t3\t5\t\t1\t0\t0\t61\t5\t0\t1\t3157\t5\te5f3fd8d\ta0aaffa6\t6faa15d5\tda8a3421\t"
      "3cd69f23\t6fcd6dcb\tab16ed81\t43426c29\t1df5e154\t7de9c0a9\t6652dc64\t99eb4e27\t00c5ffb7\t"
      "be4ee537\tf3bbfe99\t4cdc3efa\td20856aa\ta1eb1511\t9512c20b\tfebfd863\ta3323ca1\tc8e1ee56\t"
      "1752e9e8\t75350c8a\t991321ea\tb757e957\n"
      "0\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\t\r\n";
  Bytes raw(lines.begin(), lines.end());
  Write("criteo_fuzz", "three_lines", raw);
  Write("criteo_fuzz", "three_lines_gzip", Gzip(raw));
}

// schema_fuzz: the first byte picks the schema (0 csv, 1 tab-separated with
// a header, 2 libsvm raw ids, 3 libsvm hashed; +4 skips bad lines).
void SchemaSeeds() {
  auto seed = [](const char* name, uint8_t pick, const std::string& text, bool gzip = false) {
    Bytes bytes(text.begin(), text.end());
    if (gzip) bytes = Gzip(bytes);
    bytes.insert(bytes.begin(), pick);
    Write("schema_fuzz", name, bytes);
  };
  const std::string csv = "1,50,7,paris,a;;b,x\n0,,,,,\r\n-1,1e3,-2,rome,c,note\n";
  seed("csv", 0, csv);
  seed("csv_gzip_skip", 4, csv + "1,bad\n", true);
  seed("tsv_header", 1, "y\tx\tcity\titems\n1\t0.5\t7\t1||2\n0\t\t999\t\n");
  const std::string libsvm = "+1 0:1 3:0.5 17:2\n-1 0:1\n+1 2:1 5:1 9:-1.5 11:1\n";
  seed("libsvm_raw", 2, libsvm);
  seed("libsvm_hashed_skip", 7, libsvm + "1 x\n1 a:1 b:2\n");
}

// The shipped configs, and a csv schema whose columns name their tables.
void ConfigSeeds(const fs::path& repo) {
  for (const auto& entry : fs::directory_iterator(repo / "configs"))
    if (entry.path().extension() == ".yaml")
      Write("config_fuzz", entry.path().filename().string(), ReadFile(entry.path()));
  const std::string tables =
      "model:\n  input: [1]\n  sparse_fields: 3\n  loss: bce_with_logits\n"
      "  wide: [{name: crosses, type: embedding_bag, vocab: 100, dim: 1}]\n"
      "  deep: [{name: ids, type: embedding_bag, vocab: 50, dim: 2, mode: concat}, concat,\n"
      "         {type: linear, out: 1}]\n"
      "data:\n  format: csv\n  train: t.csv\n  columns:\n"
      "    - {name: click, type: label}\n    - {name: age, type: dense}\n"
      "    - {name: user, type: categorical, table: ids}\n"
      "    - {name: items, type: multi_hot, max_ids: 1, table: [ids]}\n"
      "    - {name: cross, type: categorical, ids: raw, table: crosses}\n"
      "parameters:\n  - {match: \"*s.weight\", init_in_server: true}\n";
  Write("config_fuzz", "column_tables.yaml", Bytes(tables.begin(), tables.end()));
}

// Messages from the threshold encoder: empty, sparse at a few densities,
// a shake-up, and bitmaps (one with a partial last byte); then values
// messages (warm-up's), sparse and bitmap.
void ThresholdSeeds() {
  struct Seed {
    const char* name;
    int64_t n;
    int every;  // element i sent when i % every == 0, its sign alternating
    int64_t shake_up_every;
    bool values;  // a values message, element i sending 1 + i / 64
  };
  const Seed seeds[] = {{"sparse_empty", 100, 0, 0, false},    {"sparse_1pct", 1000, 100, 0, false},
                        {"sparse_10pct", 1000, 10, 0, false},  {"sparse_gaps", 5000, 997, 0, false},
                        {"sparse_shake_up", 300, 7, 1, false}, {"bitmap_all", 257, 1, 0, false},
                        {"bitmap_half", 64, 2, 0, false},      {"values_10pct", 1000, 10, 0, true},
                        {"values_bitmap_all", 257, 1, 0, true}};
  for (const Seed& s : seeds) {
    CompressionConfig config;
    config.type = CompressionType::kThreshold;
    config.threshold = 0.5f;
    config.adaptive = false;
    config.warmup_epochs = 0;  // tau 0.5 exactly, as the seed's name says
    config.shake_up_every = s.shake_up_every;
    ThresholdEncoder encoder(s.n, config);
    std::vector<float> gradient(static_cast<size_t>(s.n), 0.0f);
    for (int64_t i = 0; s.every > 0 && i < s.n; i += s.every) {
      const float size = s.values ? 1.0f + static_cast<float>(i / 64) : 1.0f;
      gradient[i] = (i / s.every) % 2 ? -size : size;
    }
    Bytes message;
    if (s.values)
      (void)encoder.EncodeValues(gradient.data(), 0.5f, &message);
    else
      (void)encoder.Encode(gradient.data(), &message);
    Write("threshold_fuzz", s.name, message);
  }
}

// Compressed pull replies (pull_reply_fuzz.cc's layout: a flags byte, the
// partition's elements, then the payload): a values message answering a
// pull that held a view, and a dense reply.
void PullReplySeeds() {
  const int64_t n = 300;
  std::vector<float> change(n, 0.0f), zeros(n, 0.0f);
  for (int64_t i = 0; i < n; i += 7) change[i] = (i % 2 ? -1.0f : 1.0f) * (1 + i / 50);
  Bytes message;
  EncodeThresholdValues(change.data(), zeros.data(), n, 0.5f, &message);
  const uint8_t elements[2] = {static_cast<uint8_t>((n - 1) & 0xff),
                               static_cast<uint8_t>((n - 1) >> 8)};
  Bytes delta = {3, elements[0], elements[1]};
  delta.insert(delta.end(), message.begin(), message.end());
  Write("pull_reply_fuzz", "values_delta", delta);
  Bytes dense = {0, elements[0], elements[1]};
  dense.resize(3 + n * sizeof(float), 0);
  Write("pull_reply_fuzz", "dense", dense);
}

// A partition's state in a live move (handoff_fuzz.cc's layout: a byte
// picking the most values, then the state): with and without slots.
void HandOffSeeds() {
  UpdateCore::State core{5, {5, 5}, {true, true}, 0, 0, {}};
  MovedPartition sgd{{"w", 0, 5, 5, 5, std::vector<float>(40, 0.5f), {}}, core};
  Bytes plain = {39};
  Bytes state = EncodePartitionState(sgd);
  plain.insert(plain.end(), state.begin(), state.end());
  Write("handoff_fuzz", "sgd", plain);
  MovedPartition adam = sgd;
  adam.partition.slots = {{"m", std::vector<float>(40, 0.1f)}, {"v", std::vector<float>(40, 0.2f)}};
  adam.core.changes = {{8, {true, false}}};
  Bytes slots = {39};
  state = EncodePartitionState(adam);
  slots.insert(slots.end(), state.begin(), state.end());
  Write("handoff_fuzz", "adam", slots);
}

// Table rows in a live move (row_move_fuzz.cc): two tables, one with Adam's
// two slots and ids gone since a copy ahead, one without, and a message of
// no table.
void RowMoveSeeds() {
  MovedRows adam{"emb", 4, 2, 7, RowBatch(12), {5, 11}};
  MovedRows sgd{"user.weight", 3, 0, 0, RowBatch(3), {}};
  const std::vector<float> row(12, 0.25f);
  for (int64_t id : {7, 2, 40}) {
    adam.rows.Add(id, row.data(), id + 1, 2);
    sgd.rows.Add(id * 3, row.data(), id, 0);
  }
  std::string bytes;
  EncodeMovedRows({adam, sgd}, &bytes);
  Write("row_move_fuzz", "two_tables", Bytes(bytes.begin(), bytes.end()));
  bytes.clear();
  EncodeMovedRows({}, &bytes);
  Write("row_move_fuzz", "no_table", Bytes(bytes.begin(), bytes.end()));
}

}  // namespace
}  // namespace pstrain

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s REPO_DIR\n", argv[0]);
    return 2;
  }
  pstrain::corpus = std::filesystem::path(argv[1]) / "tests" / "fuzz" / "corpus";
  pstrain::WireSeeds();
  pstrain::HandshakeSeeds();
  pstrain::HttpSeeds();
  pstrain::CheckpointSeeds();
  pstrain::IdxSeeds();
  pstrain::CriteoSeeds();
  pstrain::SchemaSeeds();
  pstrain::ThresholdSeeds();
  pstrain::PullReplySeeds();
  pstrain::HandOffSeeds();
  pstrain::RowMoveSeeds();
  pstrain::ConfigSeeds(argv[1]);
  return 0;
}
