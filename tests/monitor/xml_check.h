// A small XML well-formedness check for the SVG/HTML tests: every tag is
// closed in order, and every '&' starts an entity.
#pragma once

#include <string>
#include <vector>

namespace zt::monitor::testing {

// "" when well formed, else what is wrong. `void_tags` (HTML's meta...) need
// no closing tag. Counts the elements seen in `*elements`.
inline std::string CheckXml(const std::string& text, const std::vector<std::string>& void_tags = {},
                            int* elements = nullptr) {
  std::vector<std::string> stack;
  int count = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '&') {
      const size_t semi = text.find(';', i);
      if (semi == std::string::npos || semi - i > 8) return "bare '&' at " + std::to_string(i);
      continue;
    }
    if (text[i] == '>') return "bare '>' at " + std::to_string(i);
    if (text[i] != '<') continue;
    const size_t end = text.find('>', i);
    if (end == std::string::npos) return "unterminated tag at " + std::to_string(i);
    std::string tag = text.substr(i + 1, end - i - 1);
    i = end;
    if (tag.empty()) return "empty tag";
    if (tag[0] == '!' || tag[0] == '?') continue;  // doctype, declaration
    if (tag.find('<') != std::string::npos) return "'<' inside tag " + tag;
    if (tag[0] == '/') {
      const std::string name = tag.substr(1);
      if (stack.empty() || stack.back() != name) {
        return "closing </" + name + "> but open <" + (stack.empty() ? std::string("none") : stack.back()) + ">";
      }
      stack.pop_back();
      continue;
    }
    ++count;
    const bool self_closing = tag.back() == '/';
    const std::string name = tag.substr(0, tag.find_first_of(" /"));
    bool is_void = false;
    for (const std::string& v : void_tags) is_void |= v == name;
    if (!self_closing && !is_void) stack.push_back(name);
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (elements != nullptr) *elements = count;
  return "";
}

}  // namespace zt::monitor::testing
