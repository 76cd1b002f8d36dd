// Implementation of comm/group_options.h: environment overrides.
#include "comm/group_options.h"

#include <cmath>
#include <cstdlib>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace zt::comm {
namespace {

const char* Env(const char* name) {
  const char* v = std::getenv(name);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

absl::Status ParseSeconds(const char* name, std::chrono::milliseconds& out) {
  const char* v = Env(name);
  if (v == nullptr) return absl::OkStatus();
  double seconds = 0;
  if (!absl::SimpleAtod(v, &seconds) || !std::isfinite(seconds) || seconds <= 0 || seconds > 7 * 24 * 3600.0) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, "='", v, "' is not a positive number of seconds (e.g. ", name, "=60)"));
  }
  out = std::chrono::milliseconds(static_cast<int64_t>(std::ceil(seconds * 1000.0)));
  return absl::OkStatus();
}

}  // namespace

absl::Status ApplyEnvOverrides(GroupOptions& options) {
  if (absl::Status s = ParseSeconds("ZT_COMM_TIMEOUT_S", options.timeout); !s.ok()) return s;
  if (absl::Status s = ParseSeconds("ZT_RENDEZVOUS_TIMEOUT_S", options.rendezvous_timeout); !s.ok()) {
    return s;
  }
  if (absl::Status s = ParseSeconds("ZT_COMM_HEARTBEAT_S", options.heartbeat_interval); !s.ok()) {
    return s;
  }
  if (const char* v = Env("ZT_COMM_BACKEND")) {
    std::string b = absl::AsciiStrToLower(v);
    if (b == "auto") {
      options.backend = BackendChoice::kAuto;
    } else if (b == "gloo") {
      options.backend = BackendChoice::kGloo;
    } else if (b == "shm") {
      options.backend = BackendChoice::kShm;
    } else if (b == "single") {
      options.backend = BackendChoice::kSingle;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("ZT_COMM_BACKEND='", v, "' is not one of auto, gloo, shm, single"));
    }
  }
  if (const char* v = Env("ZT_COMM_THREADS")) {
    int threads = 0;
    if (!absl::SimpleAtoi(v, &threads) || threads < 1 || threads > 64) {
      return absl::InvalidArgumentError(absl::StrCat("ZT_COMM_THREADS='", v, "' is not an integer in [1, 64]"));
    }
    options.worker_threads = threads;
  }
  if (const char* v = Env("ZT_COMM_SHM_SLOT_KIB")) {
    int64_t kib = 0;
    if (!absl::SimpleAtoi(v, &kib) || kib < 4 || kib > (int64_t{1} << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("ZT_COMM_SHM_SLOT_KIB='", v, "' is not an integer number of KiB in [4, 1048576]"));
    }
    options.shm_slot_bytes = kib << 10;
  }
  if (const char* v = Env("ZT_COMM_CHECK")) {
    const std::string c = absl::AsciiStrToLower(v);
    if (c == "1" || c == "true" || c == "on") {
      options.check_agreement = true;
    } else if (c == "0" || c == "false" || c == "off") {
      options.check_agreement = false;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("ZT_COMM_CHECK='", v, "' is not one of 0, 1"));
    }
  }
  if (const char* v = Env("ZT_REDUCE_SCATTER_ALGO")) {
    std::string a = absl::AsciiStrToLower(v);
    if (a == "alltoall") {
      options.reduce_scatter_algorithm = ReduceScatterAlgorithm::kAllToAll;
    } else if (a == "ring") {
      options.reduce_scatter_algorithm = ReduceScatterAlgorithm::kRing;
    } else {
      return absl::InvalidArgumentError(absl::StrCat("ZT_REDUCE_SCATTER_ALGO='", v, "' is not one of alltoall, ring"));
    }
  }
  return absl::OkStatus();
}

const char* ToString(ReduceScatterAlgorithm algorithm) {
  return algorithm == ReduceScatterAlgorithm::kRing ? "ring" : "alltoall";
}

}  // namespace zt::comm
