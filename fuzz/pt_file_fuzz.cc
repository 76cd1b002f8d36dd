// A whole .pt file (zip directory, pickle, records) from arbitrary bytes:
// opened, every record verified, every tensor read.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "ckpt/format/pt_file.h"
#include "fuzz/fuzz_input.h"

namespace {

void ReadTensors(const zt::ckpt::PtReader& r, const zt::ckpt::Value& v, int depth) {
  if (depth > 64) return;
  if (v.is_tensor()) {
    const zt::ckpt::TensorRef& t = v.AsTensor();
    if (t.nbytes() <= (uint64_t{1} << 24)) {
      std::vector<char> dst(t.nbytes());
      (void)r.Read(t, dst.data());
    }
  } else if (v.is_list() || v.is_tuple()) {
    for (const zt::ckpt::Value& c : v.AsList()) ReadTensors(r, c, depth + 1);
  } else if (v.is_dict()) {
    for (const auto& [k, c] : v.AsDict().items) ReadTensors(r, c, depth + 1);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zt::fuzz::MemFile file(data, size);
  auto r = zt::ckpt::PtReader::Open(file.path());
  if (!r.ok()) return 0;
  (void)(*r)->VerifyAll();
  ReadTensors(**r, (*r)->root(), 0);
  return 0;
}
