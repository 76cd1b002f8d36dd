// Implementation of generate/sampling/text_stream.h.
#include "generate/sampling/text_stream.h"

#include <algorithm>

namespace zt::generate {
namespace {

bool IsContinuation(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

// The length of `s`'s longest prefix that does not end inside a UTF-8
// character: a lead byte at the end still waiting for its continuation
// bytes is left out with them. Malformed bytes are released as they are.
size_t WholeCharacters(const std::string& s) {
  size_t i = s.size(), continuation = 0;
  while (i > 0 && continuation < 3 && IsContinuation(s[i - 1])) {
    --i;
    ++continuation;
  }
  if (i == 0) return s.size();
  const unsigned char lead = static_cast<unsigned char>(s[i - 1]);
  size_t need = 0;
  if (lead >= 0xF0) {
    need = 3;
  } else if (lead >= 0xE0) {
    need = 2;
  } else if (lead >= 0xC0) {
    need = 1;
  } else {
    return s.size();  // ASCII or a stray continuation byte
  }
  return continuation >= need ? s.size() : i - 1;
}

}  // namespace

std::string ValidUtf8(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    uint32_t cp = 0, min = 0;
    if (c < 0x80) {
      out.push_back(s[i++]);
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      n = 1, cp = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
      n = 2, cp = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
      n = 3, cp = c & 0x07, min = 0x10000;
    }
    bool ok = n > 0;
    for (size_t k = 1; ok && k <= n; ++k) {
      ok = i + k < s.size() && IsContinuation(s[i + k]);
      if (ok) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    ok = ok && cp >= min && cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF);
    if (ok) {
      out.append(s, i, n + 1);
      i += n + 1;
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  return out;
}

std::string TextStream::Push(const std::string& continuation) {
  if (stopped_) return "";
  // Each continuation extends the last (the decoders decode token by
  // token); one that does not releases nothing new rather than throwing.
  if (continuation.compare(0, released_.size(), released_) != 0) return "";
  pending_ = continuation;
  size_t end = pending_.size();
  for (const std::string& stop : stops_) {
    if (stop.empty()) continue;
    const size_t at = pending_.find(stop);
    if (at != std::string::npos && at < end) {
      end = at;
      stopped_ = true;
    }
  }
  if (!stopped_) {
    const size_t whole = WholeCharacters(pending_);
    end = whole;
    // Hold back the longest tail that is the start of a stop string.
    for (const std::string& stop : stops_) {
      for (size_t k = std::min(stop.size() - (stop.empty() ? 0 : 1), whole); k > 0; --k) {
        if (pending_.compare(whole - k, k, stop, 0, k) == 0) {
          end = std::min(end, whole - k);
          break;
        }
      }
    }
  }
  end = std::max(end, released_.size());
  std::string out = pending_.substr(released_.size(), end - released_.size());
  released_ += out;
  return out;
}

std::string TextStream::Finish() {
  if (stopped_) return "";
  std::string out = pending_.substr(std::min(released_.size(), pending_.size()));
  released_ += out;
  return out;
}

}  // namespace zt::generate
