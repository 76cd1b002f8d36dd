// A DeepSpeed ds_config.json from arbitrary bytes: parsed and validated at
// world size 2, with "auto" values allowed, as zt train reads one.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zt::ParseOptions options;
  options.world_size = 2;
  options.source_name = "fuzz.json";
  options.allow_run_time_autos = true;
  const zt::ParseResult r = zt::ParseConfig(std::string_view(reinterpret_cast<const char*>(data), size), options);
  (void)r.status();
  return 0;
}
