// A small, learnable text corpus for the tests that run `zt train` end to end:
// 900 lines of 8 words from a 12-word vocabulary, with a fixed pseudo-random
// variation, so every run (and every host) reads the same bytes. Header-only.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace zt::testing {

// Writes the corpus to <dir>/corpus.txt and returns that path.
inline std::string MakeWordCorpus(const std::string& dir) {
  const std::string path = dir + "/corpus.txt";
  std::ofstream out(path);
  const char* words[] = {"the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "and", "runs", "home"};
  uint64_t x = 12345;
  for (int line = 0; line < 900; ++line) {
    for (int w = 0; w < 8; ++w) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      out << words[(line + w + ((x >> 33) % 3 == 0 ? 1 : 0)) % 12] << (w == 7 ? ".\n" : " ");
    }
  }
  return path;
}

}  // namespace zt::testing
