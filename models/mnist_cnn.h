// The convolutional net of PyTorch's examples/mnist (`Net`), with its
// parameter names (conv1, conv2, fc1, fc2): two 3x3 convolutions, max-pool,
// dropout 0.25, a 9216 -> 128 layer, dropout 0.5, 10 classes, log_softmax.
// Each of the four layers is its own zt::Unit (fc1 holds 98% of the weights).
#pragma once

#include <torch/torch.h>

#include <memory>

#include "models/catalog/mnist_cnn_config.h"
#include "models/model.h"
#include "zero/unit.h"

namespace zt::models {

struct MnistCnnImpl : torch::nn::Module {
  MnistCnnImpl();
  torch::Tensor forward(const torch::Tensor& x);  // [B, 1, 28, 28] -> log-probabilities [B, 10]
  zt::Unit<torch::nn::Conv2dImpl> conv1{nullptr}, conv2{nullptr};
  zt::Unit<torch::nn::LinearImpl> fc1{nullptr}, fc2{nullptr};
};

std::unique_ptr<Model> CreateMnistCnn(const ModelInfo& info);

}  // namespace zt::models
