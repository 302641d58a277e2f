// The config parser fed arbitrary bytes (seeds: configs/*.yaml and small
// variants, corpus/config_fuzz/): ParseConfig is LoadConfig without the file,
// the same checks of the bytes, yaml-cpp, and every key and range. Beyond the
// sanitizers: an error is one line naming the source, and a parsed config's
// parameter rules can be matched against names (GlobMatch stays linear).
#include <cstddef>
#include <cstdint>
#include <string>

#include "src/common/config/config.h"
#include "tests/fuzz/fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace pstrain;
  auto config = ParseConfig(std::string(reinterpret_cast<const char*>(data), size), "fuzz.yaml");
  if (!config.ok()) {
    const std::string message = config.status().message();
    if (message.rfind("fuzz.yaml", 0) != 0) fuzz::Fail("an error not naming the file:", message);
    if (message.find('\n') != std::string::npos) fuzz::Fail("an error of several lines:", message);
    return 0;
  }
  const std::string long_name(300, 'a');
  for (const std::string& name : {std::string("conv1.weight"), std::string("emb_user"), long_name})
    (void)OptimizerFor(*config, name);
  return 0;
}
