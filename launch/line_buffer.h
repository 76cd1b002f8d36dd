// LineBuffer: turns a byte stream (a rank's stdout or stderr pipe) into whole
// lines, so the launcher can prefix each line and never interleave two ranks
// mid-line. Not thread-safe; one buffer per stream.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <string_view>

namespace zt::comm {

class LineBuffer {
 public:
  // A line longer than this is emitted in pieces of this size (each piece gets
  // its own '\n'), so one runaway line cannot grow the buffer without bound.
  static constexpr size_t kMaxLineBytes = 64 * 1024;

  using Emit = std::function<void(std::string_view line)>;  // line ends with '\n'

  // Appends `data` and emits every line it completes.
  void Append(std::string_view data, const Emit& emit);
  // Emits the unterminated rest, if any, with a '\n' added (end of stream).
  void Flush(const Emit& emit);
  bool empty() const { return pending_.empty(); }

 private:
  std::string pending_;
};

}  // namespace zt::comm
