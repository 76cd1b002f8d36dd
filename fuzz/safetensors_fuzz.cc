// A safetensors file from arbitrary bytes: the header parsed and checked,
// every tensor read; and the same bytes as a model folder's index.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ckpt/format/safetensors.h"
#include "fuzz/fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  {
    zt::fuzz::MemFile file(data, size);
    auto r = zt::ckpt::SafetensorsReader::Open(file.path());
    if (r.ok()) {
      for (const auto& t : (*r)->tensors()) {
        if (t.nbytes > (uint64_t{1} << 24)) continue;
        std::vector<char> dst(t.nbytes);
        (void)(*r)->Read(t, dst.data());
      }
    }
  }
  // As model.safetensors.index.json: the shard names it gives stay inside
  // the scratch folder (which holds no shard), whatever they are.
  const std::string& dir = zt::fuzz::ScratchFolder();
  zt::fuzz::WriteWhole(dir + "/model.safetensors.index.json", data, size);
  (void)zt::ckpt::SafetensorsModel::Open(dir);
  return 0;
}
