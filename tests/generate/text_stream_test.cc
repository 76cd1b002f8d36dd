// generate/sampling/text_stream.h: text is released in whole UTF-8
// characters, a possible stop string's start is held back until it is
// known, and a stop string ends the text before it.
#include "generate/sampling/text_stream.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace zt::generate {
namespace {

// Feeds `full` one byte more at a time, as a byte-level tokenizer would.
std::string FeedBytes(TextStream& s, const std::string& full, std::vector<std::string>* pieces = nullptr) {
  std::string out;
  for (size_t n = 1; n <= full.size() && !s.stopped(); ++n) {
    const std::string piece = s.Push(full.substr(0, n));
    if (pieces != nullptr) pieces->push_back(piece);
    out += piece;
  }
  return out + s.Finish();
}

TEST(TextStream, ReleasesWholeCharactersOnly) {
  const std::string text = "a\xC3\xA9z \xE2\x96\x81 \xF0\x9F\x99\x82!";  // é, ▁, 🙂
  TextStream s({});
  std::vector<std::string> pieces;
  EXPECT_EQ(FeedBytes(s, text, &pieces), text);
  // The pieces are: "a", "", "é", "z", " ", "", "", "▁", " ", "", "", "", "🙂", "!".
  for (const std::string& p : pieces) {
    if (p.empty()) continue;
    const unsigned char last = static_cast<unsigned char>(p.back());
    EXPECT_TRUE(last < 0x80 || (last & 0xC0) == 0x80) << "a piece ends inside a character";
  }
  EXPECT_EQ(pieces[1], "");
  EXPECT_EQ(pieces[2], "\xC3\xA9");
  EXPECT_EQ(pieces[12], "\xF0\x9F\x99\x82");
}

TEST(TextStream, AStopStringEndsTheTextBeforeIt) {
  TextStream s({"\n\n", "The end"});
  EXPECT_EQ(FeedBytes(s, "One day.\nThen The e"), "One day.\nThen The e");
  TextStream t({"\n\n", "The end"});
  EXPECT_EQ(FeedBytes(t, "One day.\nThen The end. More"), "One day.\nThen ");
  EXPECT_TRUE(t.stopped());
  EXPECT_EQ(t.text(), "One day.\nThen ");
  // Several tokens at once: the stop inside one push.
  TextStream u({"\n\n"});
  EXPECT_EQ(u.Push("ab\n\ncd"), "ab");
  EXPECT_TRUE(u.stopped());
  EXPECT_EQ(u.Push("ab\n\ncdef"), "");
}

TEST(TextStream, HoldsBackWhatMayBecomeAStopString) {
  TextStream s({"END"});
  EXPECT_EQ(s.Push("abc E"), "abc ");
  EXPECT_EQ(s.Push("abc EN"), "");
  EXPECT_EQ(s.Push("abc ENx"), "ENx");  // not the stop after all
  EXPECT_FALSE(s.stopped());
  EXPECT_EQ(s.Push("abc ENxE"), "");
  EXPECT_EQ(s.Finish(), "E");  // the end: nothing more can come
  EXPECT_EQ(s.text(), "abc ENxE");
}

TEST(ValidUtf8, ReplacesEveryMalformedByteAndKeepsTheRest) {
  EXPECT_EQ(ValidUtf8("plain \xC3\xA9 \xF0\x9F\x99\x82"), "plain \xC3\xA9 \xF0\x9F\x99\x82");
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8("a\x80"
                      "b"),
            "a" + r + "b");                                 // stray continuation
  EXPECT_EQ(ValidUtf8("a\xC3"), "a" + r);                   // cut at the end
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), r + r);                  // overlong
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), r + r + r);          // a surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), r + r + r + r);  // above U+10FFFF
  EXPECT_EQ(ValidUtf8("\xE2\x96"
                      "z"),
            r + r + "z");  // a lead without its bytes
}

}  // namespace
}  // namespace zt::generate
