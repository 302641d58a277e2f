// The IDX reader fed an arbitrary image file and label file, raw or gzip
// (seeds: small files in the Fashion-MNIST layout, corpus/idx_fuzz/). Input
// layout: u16 little-endian length L of the label file, then the image file,
// then the last L bytes are the label file (what is left when L is too long).
// Beyond the sanitizers: a dataset that loads is consistent (pixels in [0, 1],
// labels 0..9, one label per image).
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/data/idx_reader.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  static fuzz::ScratchFiles scratch;
  static const std::string images = fuzz::ScratchPath("images"),
                           labels = fuzz::ScratchPath("labels");
  static const bool registered = (scratch.Add(images), scratch.Add(labels), true);
  (void)registered;
  if (size < 2) return 0;
  size_t label_bytes = data[0] | size_t{data[1]} << 8;
  data += 2;
  size -= 2;
  if (label_bytes > size) label_bytes = size;
  fuzz::WriteScratch(images, data, size - label_bytes);
  fuzz::WriteScratch(labels, data + size - label_bytes, label_bytes);
  auto set = LoadIdx(images, labels);
  if (!set.ok()) return 0;
  if (set->dense.size() != static_cast<size_t>(set->size() * set->dense_per_sample()))
    fuzz::Fail("pixels do not match the number of images");
  for (float x : set->dense)
    if (!(x >= 0 && x <= 1)) fuzz::Fail("a pixel outside [0, 1]");
  for (float y : set->labels)
    if (!(y >= 0 && y <= 9)) fuzz::Fail("a label outside 0..9");
  return 0;
}
