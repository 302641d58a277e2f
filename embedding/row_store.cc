#include "embedding/row_store.h"

#include <fmt/format.h>
#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/memtablerep.h>
#include <rocksdb/slice_transform.h>
#include <rocksdb/table.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <system_error>

namespace pstrain {
namespace {

namespace fs = std::filesystem;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "records are little-endian and written with memcpy");

constexpr size_t kKeyBytes = 8;
// Column families: "rows:<table>" (id -> record), "recency:<table>".
constexpr char kRowsFamily[] = "rows:";
constexpr char kRecencyFamily[] = "recency:";
// Rows dropped by EraseOldest per write batch: bounded memory however many.
constexpr int64_t kEraseChunk = 65536;

void PutBigEndian(uint64_t v, char* out) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<char>(v & 0xff);
}
uint64_t GetBigEndian(const char* in) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

// Ids are >= 0, so their big-endian bytes sort as the ids do.
std::string DataKey(int64_t id) {
  std::string key(kKeyBytes, '\0');
  PutBigEndian(static_cast<uint64_t>(id), key.data());
  return key;
}
// (last_touched, id); the sign bit of the step is flipped so that negative
// steps sort before positive ones.
std::string RecencyKey(int64_t last_touched, int64_t id) {
  std::string key(2 * kKeyBytes, '\0');
  PutBigEndian(static_cast<uint64_t>(last_touched) ^ (uint64_t{1} << 63), key.data());
  PutBigEndian(static_cast<uint64_t>(id), key.data() + kKeyBytes);
  return key;
}
int64_t RecencyStep(const char* key) {
  return static_cast<int64_t>(GetBigEndian(key) ^ (uint64_t{1} << 63));
}

// The options every table's column family gets, and why:
// - no compression: values and optimizer state are random-looking floats,
//   which do not compress; it would cost CPU on every spill and read;
// - whole-key bloom filters (10 bits/key, ~1% false positives) in files and
//   memtables: a batch asks for ids that were never spilled (new rows) as
//   often as for spilled ones, and a miss should cost no block read;
// - filters and indexes partitioned and kept in the block cache, at high
//   priority, only their small top levels pinned: otherwise every file
//   holds its whole filter and index in memory, about 2 bytes per row on
//   disk that no budget bounds. A partition evicted costs one block read;
// - a small shared LRU block cache: a row read back lives in the table's
//   memory until spilled again, so caching its block again is mostly waste;
// - rows' families only: a hashed memtable (the prefix is the whole 8-byte
//   key), as rows are only ever written and read by id while in memory; a
//   skip list spent most of a spill finding each key's place, and of a read
//   finding the rows spilled lately (side by side in `pstrain bench
//   embedding --cases tiered`: 1.1-1.5x the rows per second). Iterating in
//   id order (export) sorts the memtable first: total_order_seek.
rocksdb::ColumnFamilyOptions TableOptions(const RowStoreOptions& options,
                                          const std::shared_ptr<rocksdb::Cache>& cache,
                                          const std::string& family) {
  rocksdb::ColumnFamilyOptions cf;
  if (family.rfind(kRowsFamily, 0) == 0) {
    cf.prefix_extractor.reset(rocksdb::NewFixedPrefixTransform(kKeyBytes));
    cf.memtable_factory.reset(rocksdb::NewHashSkipListRepFactory(
        std::max<size_t>(1024, options.write_buffer_bytes / 128)));
  }
  cf.compression = rocksdb::kNoCompression;
  cf.bottommost_compression = rocksdb::kNoCompression;
  cf.write_buffer_size = options.write_buffer_bytes;
  cf.max_write_buffer_number = 2;
  cf.disable_auto_compactions = !options.compact;
  cf.memtable_whole_key_filtering = true;
  cf.memtable_prefix_bloom_size_ratio = 0.02;
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.whole_key_filtering = true;
  table.index_type = rocksdb::BlockBasedTableOptions::kTwoLevelIndexSearch;
  table.partition_filters = true;
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_top_level_index_and_filter = true;
  cf.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return cf;
}

// A missing parent is the user's mistake to name, not RocksDB's to report
// as some file it could not lock.
Status PrepareDir(const std::string& dir) {
  const auto fail = [&](const std::string& what) {
    return FailedPrecondition(fmt::format("embedding store {}: {}", dir, what));
  };
  if (dir.empty()) return InvalidArgument("embedding store: empty directory name");
  std::error_code ec;
  const fs::path path(dir);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  if (!fs::is_directory(parent, ec))
    return fail(fmt::format("parent directory {} does not exist", parent.string()));
  if (fs::exists(path, ec) && !fs::is_directory(path, ec)) return fail("not a directory");
  if (!fs::create_directory(path, ec) && ec) return fail("cannot create: " + ec.message());
  return Status::OK();
}

}  // namespace

struct RowStore::Impl {
  struct Table {
    std::string name;
    size_t floats;
    rocksdb::ColumnFamilyHandle* data = nullptr;
    rocksdb::ColumnFamilyHandle* recency = nullptr;  // when by_recency
  };

  RowStoreOptions options;
  std::shared_ptr<rocksdb::Cache> cache;
  std::unique_ptr<rocksdb::DB> db;
  std::vector<rocksdb::ColumnFamilyHandle*> handles;  // owned; closed in ~Impl
  std::vector<Table> tables;
  rocksdb::WriteOptions write;

  ~Impl() {
    if (!db) return;
    for (rocksdb::ColumnFamilyHandle* h : handles)
      db->DestroyColumnFamilyHandle(h).PermitUncheckedError();
    db->Close().PermitUncheckedError();  // nothing to keep: see the header
  }
  rocksdb::ColumnFamilyHandle* Family(const std::string& name) const {
    for (rocksdb::ColumnFamilyHandle* h : handles)
      if (h->GetName() == name) return h;
    return nullptr;
  }
  size_t RecordBytes(const Table& t) const { return t.floats * sizeof(float) + 16; }
};

RowStore::RowStore(std::string dir, std::unique_ptr<Impl> impl)
    : dir_(std::move(dir)), impl_(std::move(impl)) {}
RowStore::~RowStore() = default;

namespace {

StatusOr<std::unique_ptr<rocksdb::DB>> OpenDb(const std::string& dir,
                                              const RowStoreOptions& options,
                                              const std::shared_ptr<rocksdb::Cache>& cache,
                                              std::vector<rocksdb::ColumnFamilyHandle*>* handles) {
  rocksdb::DBOptions db;
  db.create_if_missing = true;
  // Two background threads: the server's own threads do the math.
  db.max_background_jobs = 2;
  // The hashed memtables (TableOptions) take one writer at a time.
  db.allow_concurrent_memtable_write = false;
  // The files left at exit are never reopened (a fresh Open deletes them),
  // so flushing memtables at shutdown would be wasted writes.
  db.avoid_flush_during_shutdown = true;
  db.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db.keep_log_file_num = 2;
  std::vector<std::string> names;
  if (!rocksdb::DB::ListColumnFamilies(db, dir, &names).ok()) names = {"default"};
  std::vector<rocksdb::ColumnFamilyDescriptor> families;
  for (const std::string& name : names)
    families.emplace_back(name, TableOptions(options, cache, name));
  rocksdb::DB* raw = nullptr;
  rocksdb::Status st = rocksdb::DB::Open(db, dir, families, handles, &raw);
  if (!st.ok())
    return FailedPrecondition(
        fmt::format("embedding store {}: cannot open: {}", dir, st.ToString()));
  return std::unique_ptr<rocksdb::DB>(raw);
}

}  // namespace

StatusOr<std::unique_ptr<RowStore>> RowStore::OpenAsIs(const std::string& dir,
                                                       const RowStoreOptions& options) {
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  // Half of the cache kept for filter and index partitions (high priority).
  impl->cache = rocksdb::NewLRUCache(options.block_cache_bytes, -1, false, 0.5);
  // See the header: the store is rebuilt from checkpoints, never from a log.
  impl->write.disableWAL = true;
  auto db = OpenDb(dir, options, impl->cache, &impl->handles);
  if (!db.ok()) return db.status();
  impl->db = std::move(*db);
  return std::unique_ptr<RowStore>(new RowStore(dir, std::move(impl)));
}

StatusOr<std::unique_ptr<RowStore>> RowStore::Open(const std::string& dir,
                                                   const RowStoreOptions& options) {
  PSTRAIN_RETURN_IF_ERROR(PrepareDir(dir));
  rocksdb::Options destroy;
  rocksdb::Status st = rocksdb::DestroyDB(dir, destroy);
  if (!st.ok())
    return FailedPrecondition(
        fmt::format("embedding store {}: cannot delete the old store: {}", dir, st.ToString()));
  PSTRAIN_RETURN_IF_ERROR(PrepareDir(dir));  // DestroyDB removes an empty directory
  return OpenAsIs(dir, options);
}

StatusOr<std::unique_ptr<RowStore>> RowStore::Restore(const std::string& checkpoint_dir,
                                                      const std::string& dir,
                                                      const RowStoreOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(checkpoint_dir, ec))
    return NotFound(fmt::format("embedding store checkpoint {}: not a directory", checkpoint_dir));
  PSTRAIN_RETURN_IF_ERROR(PrepareDir(dir));
  rocksdb::Status st = rocksdb::DestroyDB(dir, rocksdb::Options());
  if (!st.ok())
    return FailedPrecondition(
        fmt::format("embedding store {}: cannot delete the old store: {}", dir, st.ToString()));
  PSTRAIN_RETURN_IF_ERROR(PrepareDir(dir));
  // Table files are immutable: a link shares them with the checkpoint.
  // Everything else (MANIFEST, CURRENT, OPTIONS) RocksDB may rewrite, so it
  // gets a copy of its own.
  for (const fs::directory_entry& entry : fs::directory_iterator(checkpoint_dir, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const fs::path to = fs::path(dir) / entry.path().filename();
    std::error_code link_ec;
    if (entry.path().extension() == ".sst") fs::create_hard_link(entry.path(), to, link_ec);
    if (entry.path().extension() != ".sst" || link_ec)
      fs::copy_file(entry.path(), to, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return FailedPrecondition(fmt::format("embedding store {}: cannot restore {}: {}", dir,
                                            entry.path().string(), ec.message()));
  }
  if (ec)
    return FailedPrecondition(fmt::format("embedding store checkpoint {}: cannot list: {}",
                                          checkpoint_dir, ec.message()));
  return OpenAsIs(dir, options);
}

StatusOr<RowStore::TableId> RowStore::OpenTable(const std::string& name, size_t floats,
                                                bool by_recency, bool must_be_new) {
  for (const Impl::Table& t : impl_->tables)
    if (t.name == name)
      return FailedPrecondition(
          fmt::format("embedding store {}: table '{}' opened twice", dir_, name));
  const auto family = [&](const std::string& cf_name) -> StatusOr<rocksdb::ColumnFamilyHandle*> {
    if (rocksdb::ColumnFamilyHandle* h = impl_->Family(cf_name)) {
      if (must_be_new)
        return FailedPrecondition(
            fmt::format("embedding store {}: table '{}' exists already", dir_, name));
      return h;
    }
    rocksdb::ColumnFamilyHandle* h = nullptr;
    rocksdb::Status st = impl_->db->CreateColumnFamily(
        TableOptions(impl_->options, impl_->cache, cf_name), cf_name, &h);
    if (!st.ok())
      return FailedPrecondition(fmt::format("embedding store {}: cannot create table '{}': {}",
                                            dir_, name, st.ToString()));
    impl_->handles.push_back(h);
    return h;
  };
  Impl::Table table{name, floats};
  auto data = family(kRowsFamily + name);
  if (!data.ok()) return data.status();
  table.data = *data;
  if (by_recency) {
    auto recency = family(kRecencyFamily + name);
    if (!recency.ok()) return recency.status();
    table.recency = *recency;
  }
  impl_->tables.push_back(table);
  return static_cast<TableId>(impl_->tables.size() - 1);
}

Status RowStore::DropTable(const std::string& name) {
  Status first_error;
  for (Impl::Table& t : impl_->tables) {
    if (t.name != name) continue;
    // Its id stays taken (ids are indices); its name and handles go at
    // once, so that a failure leaves nothing to drop twice.
    t.name.clear();
    for (rocksdb::ColumnFamilyHandle** h : {&t.data, &t.recency}) {
      if (*h == nullptr) continue;
      rocksdb::Status st = impl_->db->DropColumnFamily(*h);
      if (!st.ok() && first_error.ok())
        first_error = FailedPrecondition(fmt::format(
            "embedding store {}: cannot drop table '{}': {}", dir_, name, st.ToString()));
      auto listed = std::find(impl_->handles.begin(), impl_->handles.end(), *h);
      if (listed != impl_->handles.end()) impl_->handles.erase(listed);
      impl_->db->DestroyColumnFamilyHandle(*h).PermitUncheckedError();
      *h = nullptr;
    }
  }
  return first_error;
}

const std::string& RowStore::table_name(TableId table) const { return impl_->tables[table].name; }

namespace {

// Checks one record read from disk and copies it out. The message names the
// table and the id; the caller adds the store.
Status DecodeRecord(const std::string& table, int64_t id, const rocksdb::Slice& value,
                    size_t floats, float* data, int64_t* last_touched, int64_t* updates) {
  const size_t expected = floats * sizeof(float) + 2 * sizeof(int64_t);
  if (value.size() != expected)
    return InvalidArgument(fmt::format("table '{}' row {}: record of {} bytes, expected {}", table,
                                       id, value.size(), expected));
  std::memcpy(data, value.data(), floats * sizeof(float));
  std::memcpy(last_touched, value.data() + floats * sizeof(float), sizeof(int64_t));
  std::memcpy(updates, value.data() + floats * sizeof(float) + sizeof(int64_t), sizeof(int64_t));
  for (size_t k = 0; k < floats; ++k) {
    if (!std::isfinite(data[k]))
      return InvalidArgument(
          fmt::format("table '{}' row {}: float {} is not finite ({})", table, id, k, data[k]));
  }
  if (*updates < 0)
    return InvalidArgument(
        fmt::format("table '{}' row {}: negative update count {}", table, id, *updates));
  return Status::OK();
}

}  // namespace

Status RowStore::MultiGet(TableId table, const int64_t* ids, size_t n, RowBatch* found) const {
  const Impl::Table& t = impl_->tables[table];
  if (n == 0) return Status::OK();
  // Sorted keys let MultiGet walk each file once.
  std::vector<int64_t> sorted(ids, ids + n);
  std::sort(sorted.begin(), sorted.end());
  // Keys are ids big-endian, which sort as the ids only when none is
  // negative; RocksDB asserts on keys out of order, so one is refused here.
  if (sorted.front() < 0)
    return InvalidArgument(fmt::format("embedding store {}: row {} of table '{}': ids are >= 0",
                                       dir_, sorted.front(), t.name));
  std::vector<std::string> key_bytes(n);
  std::vector<rocksdb::Slice> keys(n);
  for (size_t i = 0; i < n; ++i) {
    key_bytes[i] = DataKey(sorted[i]);
    keys[i] = key_bytes[i];
  }
  std::vector<rocksdb::PinnableSlice> values(n);
  std::vector<rocksdb::Status> statuses(n);
  rocksdb::ReadOptions read;
  impl_->db->MultiGet(read, t.data, n, keys.data(), values.data(), statuses.data(), true);
  const size_t before = found->size();
  const auto undo = [&](Status st) {
    found->Truncate(before);
    return st;
  };
  for (size_t i = 0; i < n; ++i) {
    if (statuses[i].IsNotFound()) continue;
    if (!statuses[i].ok())
      return undo(FailedPrecondition(
          fmt::format("embedding store {}: {} while reading row {} of table '{}'", dir_,
                      statuses[i].ToString(), sorted[i], t.name)));
    found->ids.push_back(sorted[i]);
    found->data.resize(found->ids.size() * found->floats);
    found->last_touched.push_back(0);
    found->updates.push_back(0);
    Status st = DecodeRecord(t.name, sorted[i], values[i], t.floats, found->row(found->size() - 1),
                             &found->last_touched.back(), &found->updates.back());
    if (!st.ok()) return undo(st.WithContext(fmt::format("embedding store {}", dir_)));
  }
  return Status::OK();
}

Status RowStore::Write(TableId table, const RowBatch& put, const std::vector<Erasure>& erase) {
  const Impl::Table& t = impl_->tables[table];
  if (put.empty() && erase.empty()) return Status::OK();
  // In key order: the memtable's skip list starts each insert from where
  // the last one ended, so sorted inserts cost a short walk instead of a
  // descent from the top (a third of the time of a spill at 10% resident).
  std::vector<size_t> order(erase.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return erase[a].id < erase[b].id; });
  rocksdb::WriteBatch batch;
  for (size_t i : order) {
    const Erasure& e = erase[i];
    batch.Delete(t.data, DataKey(e.id)).PermitUncheckedError();
    if (t.recency) batch.Delete(t.recency, RecencyKey(e.last_touched, e.id)).PermitUncheckedError();
  }
  order.resize(put.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return put.ids[a] < put.ids[b]; });
  std::string record(impl_->RecordBytes(t), '\0');
  for (size_t i : order) {
    std::memcpy(record.data(), put.row(i), t.floats * sizeof(float));
    std::memcpy(record.data() + t.floats * sizeof(float), &put.last_touched[i], sizeof(int64_t));
    std::memcpy(record.data() + t.floats * sizeof(float) + sizeof(int64_t), &put.updates[i],
                sizeof(int64_t));
    batch.Put(t.data, DataKey(put.ids[i]), record).PermitUncheckedError();
    if (t.recency)
      batch.Put(t.recency, RecencyKey(put.last_touched[i], put.ids[i]), "").PermitUncheckedError();
  }
  rocksdb::Status st = impl_->db->Write(impl_->write, &batch);
  if (!st.ok())
    return Unavailable(fmt::format(
        "embedding store {}: {} while writing {} evicted rows of table '{}' ({} erased)", dir_,
        st.ToString(), put.size(), t.name, erase.size()));
  return Status::OK();
}

StatusOr<int64_t> RowStore::EraseOldest(TableId table, int64_t touched_before, int64_t max_count) {
  const Impl::Table& t = impl_->tables[table];
  if (t.recency == nullptr)
    return FailedPrecondition(
        fmt::format("embedding store {}: table '{}' keeps no recency order", dir_, t.name));
  int64_t erased = 0;
  while (erased < max_count) {
    rocksdb::WriteBatch batch;
    int64_t chunk = 0;
    {
      std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator({}, t.recency));
      for (it->SeekToFirst(); it->Valid() && erased + chunk < max_count && chunk < kEraseChunk;
           it->Next(), ++chunk) {
        const rocksdb::Slice key = it->key();
        if (key.size() != 2 * kKeyBytes)
          return FailedPrecondition(fmt::format(
              "embedding store {}: table '{}': recency key of {} bytes", dir_, t.name, key.size()));
        if (RecencyStep(key.data()) >= touched_before) break;
        const auto id = static_cast<int64_t>(GetBigEndian(key.data() + kKeyBytes));
        batch.Delete(t.data, DataKey(id)).PermitUncheckedError();
        batch.Delete(t.recency, key).PermitUncheckedError();
      }
      if (!it->status().ok())
        return FailedPrecondition(fmt::format("embedding store {}: {} while reading table '{}'",
                                              dir_, it->status().ToString(), t.name));
    }
    if (chunk == 0) break;
    rocksdb::Status st = impl_->db->Write(impl_->write, &batch);
    if (!st.ok())
      return Unavailable(fmt::format("embedding store {}: {} while dropping {} rows of table '{}'",
                                     dir_, st.ToString(), chunk, t.name));
    erased += chunk;
    if (chunk < kEraseChunk) break;
  }
  return erased;
}

StatusOr<int64_t> RowStore::OldestTouched(TableId table) const {
  const Impl::Table& t = impl_->tables[table];
  if (t.recency == nullptr)
    return FailedPrecondition(
        fmt::format("embedding store {}: table '{}' keeps no recency order", dir_, t.name));
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator({}, t.recency));
  it->SeekToFirst();
  if (!it->status().ok())
    return FailedPrecondition(fmt::format("embedding store {}: {} while reading table '{}'", dir_,
                                          it->status().ToString(), t.name));
  if (!it->Valid()) return std::numeric_limits<int64_t>::max();
  if (it->key().size() != 2 * kKeyBytes)
    return FailedPrecondition(fmt::format("embedding store {}: table '{}': recency key of {} bytes",
                                          dir_, t.name, it->key().size()));
  return RecencyStep(it->key().data());
}

namespace {

class StoreIterator : public RowStore::Iterator {
 public:
  StoreIterator(const std::string& dir, const std::string& table, size_t floats,
                rocksdb::Iterator* it)
      : dir_(dir), table_(table), floats_(floats), row_(floats), it_(it) {
    it_->SeekToFirst();
    Decode();
  }
  bool Valid() const override { return status_.ok() && it_->Valid(); }
  void Next() override {
    it_->Next();
    Decode();
  }
  Status status() const override { return status_; }
  int64_t id() const override { return id_; }
  const float* data() const override { return row_.data(); }
  int64_t last_touched() const override { return last_touched_; }
  int64_t updates() const override { return updates_; }

 private:
  void Decode() {
    if (!it_->Valid()) {
      if (!it_->status().ok())
        status_ = FailedPrecondition(fmt::format("embedding store {}: {} while reading table '{}'",
                                                 dir_, it_->status().ToString(), table_));
      return;
    }
    if (it_->key().size() != kKeyBytes) {
      status_ = FailedPrecondition(fmt::format("embedding store {}: table '{}': key of {} bytes",
                                               dir_, table_, it_->key().size()));
      return;
    }
    id_ = static_cast<int64_t>(GetBigEndian(it_->key().data()));
    Status st =
        DecodeRecord(table_, id_, it_->value(), floats_, row_.data(), &last_touched_, &updates_);
    if (!st.ok()) status_ = st.WithContext(fmt::format("embedding store {}", dir_));
  }

  std::string dir_, table_;
  size_t floats_;
  std::vector<float> row_;
  std::unique_ptr<rocksdb::Iterator> it_;
  Status status_;
  int64_t id_ = 0, last_touched_ = 0, updates_ = 0;
};

}  // namespace

std::unique_ptr<RowStore::Iterator> RowStore::NewIterator(TableId table) const {
  const Impl::Table& t = impl_->tables[table];
  rocksdb::ReadOptions read;
  read.total_order_seek = true;  // every row, not one prefix's (see TableOptions)
  read.fill_cache = false;       // one pass over everything: keep the hot blocks
  read.readahead_size = size_t{2} << 20;
  return std::make_unique<StoreIterator>(dir_, t.name, t.floats,
                                         impl_->db->NewIterator(read, t.data));
}

Status RowStore::Checkpoint(const std::string& checkpoint_dir) {
  rocksdb::Checkpoint* raw = nullptr;
  rocksdb::Status st = rocksdb::Checkpoint::Create(impl_->db.get(), &raw);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(raw);
  // log_size_for_flush 0: memtables are always flushed first (there is no
  // log to carry them).
  if (st.ok()) st = checkpoint->CreateCheckpoint(checkpoint_dir, 0);
  if (!st.ok())
    return Unavailable(fmt::format("embedding store {}: checkpoint to {}: {}", dir_, checkpoint_dir,
                                   st.ToString()));
  return Status::OK();
}

Status RowStore::Flush() {
  rocksdb::Status st = impl_->db->Flush(rocksdb::FlushOptions(), impl_->handles);
  if (!st.ok())
    return Unavailable(fmt::format("embedding store {}: flush: {}", dir_, st.ToString()));
  return Status::OK();
}

}  // namespace pstrain
