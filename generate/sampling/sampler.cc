// Implementation of generate/sampling/sampler.h.
#include "generate/sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"

namespace zt::generate {

absl::StatusOr<Sampler> Sampler::Create(const SamplingOptions& o) {
  if (!(o.temperature >= 0.0) || !std::isfinite(o.temperature)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--temperature ", o.temperature, " must be a finite number >= 0 (0: greedy)"));
  }
  if (o.top_k < 0) return absl::InvalidArgumentError(absl::StrCat("--top-k ", o.top_k, " must be >= 0 (0: off)"));
  if (!(o.top_p > 0.0 && o.top_p <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("--top-p ", o.top_p, " must be in (0, 1] (1: off)"));
  }
  return Sampler(o);
}

int32_t Argmax(absl::Span<const float> logits) {
  // NaN is never the largest (a NaN first logit must not stick).
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    const float b = logits[static_cast<size_t>(best)];
    if (logits[i] > b || (std::isnan(b) && !std::isnan(logits[i]))) best = static_cast<int32_t>(i);
  }
  return best;
}

int32_t Sampler::Next(absl::Span<const float> logits) {
  if (greedy()) return Argmax(logits);
  const size_t n = logits.size();
  // Softmax of logits / temperature in double, from the largest logit.
  const int32_t best = Argmax(logits);
  const double top = logits[static_cast<size_t>(best)];
  // +inf is certain; no finite logit at all leaves nothing to draw from.
  if (!std::isfinite(top)) return best;
  probs_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    probs_[i] = std::isfinite(logits[i]) ? std::exp((logits[i] - top) / options_.temperature) : 0.0;
  }
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  // Most likely first; equal probabilities by id, so the order is defined.
  auto by_prob = [this](int32_t a, int32_t b) {
    const double pa = probs_[static_cast<size_t>(a)], pb = probs_[static_cast<size_t>(b)];
    return pa > pb || (pa == pb && a < b);
  };
  size_t keep = n;
  if (options_.top_k > 0 && static_cast<size_t>(options_.top_k) < n) {
    keep = static_cast<size_t>(options_.top_k);
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(keep), order_.end(), by_prob);
  } else {
    std::sort(order_.begin(), order_.end(), by_prob);
  }
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) total += probs_[static_cast<size_t>(order_[i])];
  if (options_.top_p < 1.0) {
    // The smallest prefix whose probability reaches top_p (at least one token).
    double cum = 0.0;
    size_t k = 0;
    while (k < keep) {
      cum += probs_[static_cast<size_t>(order_[k])] / total;
      ++k;
      if (cum >= options_.top_p) break;
    }
    keep = k;
    total = 0.0;
    for (size_t i = 0; i < keep; ++i) total += probs_[static_cast<size_t>(order_[i])];
  }
  // A uniform draw in [0, total): 53 random bits.
  const double u = static_cast<double>(rng_.Next() >> 11) * (1.0 / 9007199254740992.0) * total;
  double cum = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    cum += probs_[static_cast<size_t>(order_[i])];
    if (u < cum) return order_[i];
  }
  return order_[keep - 1];  // rounding at the very top
}

}  // namespace zt::generate
