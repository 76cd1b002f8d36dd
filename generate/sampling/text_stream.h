// The text a generation adds, released piece by piece as tokens arrive:
// only whole UTF-8 characters (a byte-level token may end inside one), and
// never the start of a stop string before it is known not to be one. When
// a stop string appears, the text before it is the last released and the
// generation should stop (`stopped()`), as Hugging Face's stop_strings and
// llama.cpp's reverse prompts do. No LibTorch.
//
//   TextStream s({"\n\n"});
//   std::fputs(s.Push(continuation_so_far).c_str(), stdout);   // per token
//   std::fputs(s.Finish().c_str(), stdout);
#pragma once

#include <string>
#include <vector>

namespace zt::generate {

// `text` with every byte that is not part of a well-formed UTF-8 character
// replaced by U+FFFD (what a checkpoint's pickled strings, JSON and HTML
// need; a young byte-level model emits any bytes).
std::string ValidUtf8(const std::string& text);

class TextStream {
 public:
  explicit TextStream(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // `continuation`: the whole generated text so far (each call extends the
  // one before). Returns what can be released now.
  std::string Push(const std::string& continuation);
  // What was held back (an incomplete character, a possible stop string's
  // start), unless a stop string ended the text.
  std::string Finish();
  bool stopped() const { return stopped_; }
  // Everything released so far.
  const std::string& text() const { return released_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;   // the latest continuation
  std::string released_;  // its prefix given out
  bool stopped_ = false;
};

}  // namespace zt::generate
