// The unpickler on arbitrary bytes (a checkpoint's data.pkl): any input is a
// value or an error, within the limits of util/limits.h.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "ckpt/format/pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto load = [](const zt::ckpt::PickledStorage& s) -> absl::StatusOr<zt::ckpt::TensorRef> {
    zt::ckpt::TensorRef t;
    t.dtype = s.dtype;
    t.shape = {s.numel};
    t.storage_nbytes = static_cast<uint64_t>(s.numel) * 4;
    t.record = "data/" + s.key;
    return t;
  };
  (void)zt::ckpt::UnpickleValue(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", load);
  return 0;
}
