// Implementation of data/packing.h.
#include "data/packing.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace zt::data {

int64_t PackedLength(const SupervisedExample& e, int64_t seq_len) {
  return std::min<int64_t>(static_cast<int64_t>(e.ids.size()), seq_len);
}

std::vector<PackedSample> PackExamples(const std::vector<SupervisedExample>& examples, int64_t seq_len) {
  std::vector<int64_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    return PackedLength(examples[static_cast<size_t>(a)], seq_len) >
           PackedLength(examples[static_cast<size_t>(b)], seq_len);
  });
  std::vector<PackedSample> samples;
  // Room left -> samples with that much room, in creation order (the first
  // is taken on ties, so the result is deterministic).
  std::multimap<int64_t, int64_t> room;
  for (int64_t i : order) {
    const int64_t n = PackedLength(examples[static_cast<size_t>(i)], seq_len);
    auto fit = room.lower_bound(n);  // the fullest sample it fits
    int64_t s;
    int64_t left;
    if (fit == room.end()) {
      s = static_cast<int64_t>(samples.size());
      samples.emplace_back();
      left = seq_len;
    } else {
      s = fit->second;
      left = fit->first;
      room.erase(fit);
    }
    samples[static_cast<size_t>(s)].examples.push_back(i);
    if (left - n > 0) room.emplace(left - n, s);
  }
  return samples;
}

int64_t PackedWindow(const std::vector<SupervisedExample>& examples, const PackedSample& sample, int64_t seq_len,
                     int32_t pad, int64_t* input, int64_t* target, int64_t* documents) {
  int64_t t = 0, with_loss = 0, doc = 0;
  for (int64_t i : sample.examples) {
    const SupervisedExample& e = examples[static_cast<size_t>(i)];
    const int64_t n = static_cast<int64_t>(e.ids.size()), m = PackedLength(e, seq_len);
    ++doc;
    for (int64_t k = 0; k < m && t < seq_len; ++k, ++t) {
      input[t] = e.ids[static_cast<size_t>(k)];
      // Token k predicts token k + 1 of the same example, as SupervisedWindow.
      const bool loss = k + 1 < n && k + 1 >= e.loss_from;
      target[t] = loss ? e.ids[static_cast<size_t>(k + 1)] : kIgnoreTarget;
      documents[t] = doc;
      with_loss += loss;
    }
  }
  for (; t < seq_len; ++t) {
    input[t] = pad;
    target[t] = kIgnoreTarget;
    documents[t] = 0;
  }
  return with_loss;
}

}  // namespace zt::data
