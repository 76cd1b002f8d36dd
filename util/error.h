// zt::Error: the exception our C++ API throws where returning a Status would
// make user code unreadable (Engine::Backward, Engine::Step). It carries the
// absl::Status so callers that catch it can still branch on the code.
#pragma once

#include <stdexcept>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace zt {

class Error : public std::runtime_error {
 public:
  explicit Error(absl::Status status) : std::runtime_error(std::string(status.message())), status_(std::move(status)) {}
  const absl::Status& status() const { return status_; }

 private:
  absl::Status status_;
};

// Throws zt::Error when `status` is not OK.
inline void ThrowIfError(const absl::Status& status) {
  if (!status.ok()) throw Error(status);
}

// Unwraps `value_or` or throws its error as zt::Error.
template <typename T>
T ValueOrThrow(absl::StatusOr<T> value_or) {
  if (!value_or.ok()) throw Error(std::move(value_or).status());
  return std::move(value_or).value();
}

}  // namespace zt
