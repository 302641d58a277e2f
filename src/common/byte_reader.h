// ByteReader: fixed-width fields from a span of bytes, never read past its
// end. The binary formats a node takes from a file or a peer (a table's
// serialized rows, a partition moved between servers) check their counts
// with it before they take memory for what follows.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace pstrain {

class ByteReader {
 public:
  ByteReader(const void* data, size_t size)
      : data_(static_cast<const uint8_t*>(data)), left_(size) {}

  // False (and nothing read) when fewer than sizeof(T) bytes are left.
  template <typename T>
  bool Get(T* value) {
    return Bytes(value, sizeof(T));
  }
  bool Bytes(void* dst, size_t n) {
    if (n > left_) return false;
    if (n > 0) std::memcpy(dst, data_, n);  // an empty vector's data() may be null
    data_ += n;
    left_ -= n;
    return true;
  }
  // Past n bytes the caller checked are there (n <= left()).
  void Skip(size_t n) {
    assert(n <= left_);
    data_ += n;
    left_ -= n;
  }
  const uint8_t* at() const { return data_; }
  size_t left() const { return left_; }

 private:
  const uint8_t* data_;
  size_t left_;
};

}  // namespace pstrain
