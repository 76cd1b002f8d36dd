// Implementation of models/kv_cache.h.
#include "models/kv_cache.h"

#include <torch/torch.h>

#include <algorithm>

namespace zt::models {

std::pair<at::Tensor, at::Tensor> KvCache::Append(size_t layer, const at::Tensor& k, const at::Tensor& v) {
  if (layers_.size() <= layer) layers_.resize(layer + 1);
  Layer& l = layers_[layer];
  const int64_t t = k.size(2), need = length_ + t;
  if (!l.k.defined() || l.k.size(2) < need) {
    // Grow by doubling: appending one token at a time copies each position
    // O(1) times on average.
    const int64_t capacity = std::max<int64_t>(need, l.k.defined() ? 2 * l.k.size(2) : std::max<int64_t>(need, 64));
    std::vector<int64_t> shape = k.sizes().vec();
    shape[2] = capacity;
    at::Tensor nk = torch::empty(shape, k.options()), nv = torch::empty(shape, v.options());
    if (length_ > 0) {
      nk.narrow(2, 0, length_).copy_(l.k.narrow(2, 0, length_));
      nv.narrow(2, 0, length_).copy_(l.v.narrow(2, 0, length_));
    }
    l.k = nk;
    l.v = nv;
  }
  l.k.narrow(2, length_, t).copy_(k);
  l.v.narrow(2, length_, t).copy_(v);
  return {l.k.narrow(2, 0, need), l.v.narrow(2, 0, need)};
}

int64_t KvCache::nbytes() const {
  int64_t n = 0;
  for (const Layer& l : layers_) {
    if (l.k.defined()) n += static_cast<int64_t>(l.k.nbytes() + l.v.nbytes());
  }
  return n;
}

}  // namespace zt::models
