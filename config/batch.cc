// ResolveBatch: DeepSpeed's batch-size derivation rules
// (train_batch = micro * accumulation * world), with errors that print the
// equation with the numbers and say what to change.
#include <string>

#include "absl/strings/str_cat.h"
#include "config/config.h"

namespace zt {
namespace {

constexpr const char* kBatch = "train_batch_size";
constexpr const char* kMicro = "train_micro_batch_size_per_gpu";
constexpr const char* kGas = "gradient_accumulation_steps";

// "e.g. 24 or 32": the multiples of `step` around `value` (the lower one only
// when it is positive).
std::string Multiples(int64_t value, int64_t step) {
  int64_t lower = value / step * step;
  int64_t upper = lower + step;
  if (lower <= 0) return absl::StrCat("e.g. ", upper);
  return absl::StrCat("e.g. ", lower, " or ", upper);
}

bool Multiply(int64_t a, int64_t b, int64_t* out) { return !__builtin_mul_overflow(a, b, out); }

absl::Status TooLarge() {
  return absl::InvalidArgumentError("the batch sizes multiply to more than 2^63; use realistic values");
}

}  // namespace

absl::Status ResolveBatch(BatchConfig& batch, int world_size) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("the world size must be >= 1, got ", world_size));
  }
  const int64_t w = world_size;
  const std::optional<int64_t> t = batch.train_batch_size;
  const std::optional<int64_t> m = batch.train_micro_batch_size_per_gpu;
  const std::optional<int64_t> g = batch.gradient_accumulation_steps;
  for (auto [name, value] : {std::pair{kBatch, t}, std::pair{kMicro, m}, std::pair{kGas, g}}) {
    if (value && *value <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(name, " must be > 0, got ", *value));
    }
  }
  int64_t train = 0, micro = 0, gas = 0;
  if (t && m && g) {
    int64_t mg = 0, product = 0;
    if (!Multiply(*m, *g, &mg) || !Multiply(mg, w, &product)) return TooLarge();
    if (*t != product) {
      return absl::InvalidArgumentError(absl::StrCat(kBatch, " ", *t, " != ", kMicro, " ", *m, " * ", kGas, " ", *g,
                                                     " * world size ", w, " (= ", product,
                                                     "); change one of them, or drop ", kBatch, " to have it derived"));
    }
    train = *t, micro = *m, gas = *g;
  } else if (t && m) {
    int64_t mw = 0;
    if (!Multiply(*m, w, &mw)) return TooLarge();
    if (*t % mw != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kBatch, " ", *t, " is not divisible by ", kMicro, " ", *m, " * world size ", w, " (= ", mw, "), so ", kGas,
          " cannot be derived; make ", kBatch, " a multiple of ", mw, " (", Multiples(*t, mw), ") or change ", kMicro));
    }
    train = *t, micro = *m, gas = *t / mw;
  } else if (t && g) {
    int64_t wg = 0;
    if (!Multiply(w, *g, &wg)) return TooLarge();
    if (*t % wg != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kBatch, " ", *t, " is not divisible by world size ", w, " * ", kGas, " ", *g, " (= ", wg, "), so ", kMicro,
          " cannot be derived; make ", kBatch, " a multiple of ", wg, " (", Multiples(*t, wg), ") or change ", kGas));
    }
    train = *t, micro = *t / wg, gas = *g;
  } else if (m && g) {
    int64_t mg = 0;
    if (!Multiply(*m, *g, &mg) || !Multiply(mg, w, &train)) return TooLarge();
    micro = *m, gas = *g;
  } else if (t) {
    if (*t % w != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          kBatch, " ", *t, " is not divisible by world size ", w, ", so ", kMicro, " cannot be derived (with ", kGas,
          " 1); make ", kBatch, " a multiple of ", w, " (", Multiples(*t, w), ") or give ", kMicro, " and ", kGas));
    }
    train = *t, micro = *t / w, gas = 1;
  } else if (m) {
    if (!Multiply(*m, w, &train)) return TooLarge();
    micro = *m, gas = 1;
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "give ", kBatch, " or ", kMicro, g ? absl::StrCat(" (", kGas, " alone does not fix the batch size)") : "",
        "; e.g. \"", kMicro, "\": 8"));
  }
  batch.train_batch = train;
  batch.micro_batch = micro;
  batch.accumulation_steps = gas;
  batch.world_size = world_size;
  return absl::OkStatus();
}

}  // namespace zt
