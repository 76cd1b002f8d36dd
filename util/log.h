// Minimal rank-aware logging to stderr.
//
//   ZT_LOG(INFO) << "step " << step;   // "[zt r0 INFO] step 10"
//
// Thread-safe: each message is formatted in full and written with one call.
// The rank prefix is set once by comm after rendezvous (SetLogRank).
#pragma once

#include <sstream>
#include <string>

namespace zt {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below this level are dropped. Default kInfo; ZT_LOG_LEVEL=debug|info|warning|error.
LogLevel MinLogLevel();
void SetMinLogLevel(LogLevel level);

// The rank printed in every prefix; -1 (the default) prints no rank.
void SetLogRank(int rank);

namespace internal {
class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostringstream& stream() { return stream_; }

 private:
  LogLevel level_;
  std::ostringstream stream_;
};
}  // namespace internal
}  // namespace zt

#define ZT_LOG_LEVEL_DEBUG ::zt::LogLevel::kDebug
#define ZT_LOG_LEVEL_INFO ::zt::LogLevel::kInfo
#define ZT_LOG_LEVEL_WARNING ::zt::LogLevel::kWarning
#define ZT_LOG_LEVEL_ERROR ::zt::LogLevel::kError

#define ZT_LOG(level)                               \
  if (ZT_LOG_LEVEL_##level < ::zt::MinLogLevel()) { \
  } else                                            \
    ::zt::internal::LogMessage(ZT_LOG_LEVEL_##level, __FILE__, __LINE__).stream()
