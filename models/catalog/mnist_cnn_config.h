// The built-in MNIST CNN (models/mnist_cnn.h) as the catalog sees it: no
// dimensions to override, and its parameter count. No LibTorch.
#pragma once

#include <cstdint>

namespace zt::models {

struct MnistConfig {};

constexpr int64_t kMnistCnnParams = 1199882;

}  // namespace zt::models
