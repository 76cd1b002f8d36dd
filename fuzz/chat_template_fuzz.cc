// A Jinja chat template from arbitrary bytes: parsed as transformers sets
// Jinja2 up, and rendered over a short conversation.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja.h"

namespace jinja = zt::data::jinja;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source(reinterpret_cast<const char*>(data), size);
  auto t = jinja::Template::Parse(source, jinja::Options{/*trim_blocks=*/true, /*lstrip_blocks=*/true});
  if (!t.ok()) return 0;
  std::vector<jinja::Value> messages;
  for (const auto& [role, content] : std::vector<std::pair<std::string, std::string>>{
           {"system", "Be brief."}, {"user", "Hi {{ there }}"}, {"assistant", "Hello."}}) {
    messages.push_back(jinja::Value::MakeDict({{"role", jinja::Value(role)}, {"content", jinja::Value(content)}}));
  }
  (void)t->Render({{"messages", jinja::Value::MakeList(std::move(messages))},
                   {"add_generation_prompt", jinja::Value(true)},
                   {"bos_token", jinja::Value(std::string("<s>"))},
                   {"eos_token", jinja::Value(std::string("</s>"))}});
  return 0;
}
