// tokenizer.json from arbitrary bytes: loaded, and if it loads, text
// encoded and decoded again.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_input.h"
#include "tokenizer/hf_tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = zt::fuzz::ScratchFolder() + "/tokenizer.json";
  zt::fuzz::WriteWhole(path, data, size);
  auto t = zt::data::HfTokenizer::Load(path);
  if (!t.ok()) return 0;
  for (const char* text : {"Hello world, it's 2026!", " \xC3\xA9t\xC3\xA9  tabs\tand\nnewlines 12345", ""}) {
    auto ids = (*t)->Encode(text, /*add_special_tokens=*/true);
    if (ids.ok()) (void)(*t)->Decode(*ids);
  }
  return 0;
}
