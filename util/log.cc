// Implementation of util/log.h: one write(2) per message so lines from
// several threads (and ranks sharing a terminal) never interleave mid-line.
#include "util/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

namespace zt {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("ZT_LOG_LEVEL");
  if (env == nullptr) return LogLevel::kInfo;
  std::string v(env);
  if (v == "debug") return LogLevel::kDebug;
  if (v == "warning") return LogLevel::kWarning;
  if (v == "error") return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int>& MinLevelStorage() {
  static std::atomic<int> level{static_cast<int>(LevelFromEnv())};
  return level;
}

std::atomic<int> g_rank{-1};

const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "DEBUG";
    case LogLevel::kInfo: return "INFO";
    case LogLevel::kWarning: return "WARNING";
    case LogLevel::kError: return "ERROR";
  }
  return "?";
}

}  // namespace

LogLevel MinLogLevel() { return static_cast<LogLevel>(MinLevelStorage().load()); }
void SetMinLogLevel(LogLevel level) { MinLevelStorage().store(static_cast<int>(level)); }
void SetLogRank(int rank) { g_rank.store(rank); }

namespace internal {

LogMessage::LogMessage(LogLevel level, const char* file, int line) : level_(level) {
  int rank = g_rank.load();
  stream_ << "[zt";
  if (rank >= 0) stream_ << " r" << rank;
  stream_ << " " << LevelName(level);
  if (level >= LogLevel::kWarning) {
    const char* base = std::strrchr(file, '/');
    stream_ << " " << (base ? base + 1 : file) << ":" << line;
  }
  stream_ << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  std::string text = stream_.str();
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(STDERR_FILENO, p, left);
    if (n <= 0) break;  // Nothing sensible to do if stderr is gone.
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace internal
}  // namespace zt
