// Status plumbing shared by every module.
//
// Contract: input and environment failures (bad config, missing file, dead
// peer, full disk) travel as absl::Status with a message that names the key,
// file or rank and says what to change. Broken invariants use ZT_CHECK, which
// aborts with file:line, because no caller can act on them.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define ZT_STATUS_CONCAT_INNER_(a, b) a##b
#define ZT_STATUS_CONCAT_(a, b) ZT_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function when `expr` (an absl::Status) is not OK.
#define ZT_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::absl::Status zt_status_ = (expr);      \
    if (!zt_status_.ok()) return zt_status_; \
  } while (0)

// `ZT_ASSIGN_OR_RETURN(auto x, MakeX());` unwraps a StatusOr or returns its error.
#define ZT_ASSIGN_OR_RETURN(lhs, expr) ZT_ASSIGN_OR_RETURN_IMPL_(ZT_STATUS_CONCAT_(zt_statusor_, __LINE__), lhs, expr)
#define ZT_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = std::move(tmp).value()

// Invariant check: prints the condition with file:line and aborts.
#define ZT_CHECK(cond)                                                                                          \
  do {                                                                                                          \
    if (!(cond)) {                                                                                              \
      std::fprintf(stderr, "zerotorch internal error at %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                                             \
    }                                                                                                           \
  } while (0)

// Invariant check with an explanation (a printf-style message).
#define ZT_CHECK_MSG(cond, ...)                                                                                 \
  do {                                                                                                          \
    if (!(cond)) {                                                                                              \
      std::fprintf(stderr, "zerotorch internal error at %s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      std::fprintf(stderr, __VA_ARGS__);                                                                        \
      std::fprintf(stderr, "\n");                                                                               \
      std::abort();                                                                                             \
    }                                                                                                           \
  } while (0)
