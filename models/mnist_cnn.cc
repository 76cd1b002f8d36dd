// Implementation of models/mnist_cnn.h (PyTorch examples/mnist/main.py, Net).
#include "models/mnist_cnn.h"

#include "absl/strings/str_cat.h"
#include "models/common.h"
#include "util/error.h"

namespace zt::models {

MnistCnnImpl::MnistCnnImpl() {
  conv1 = register_module("conv1", zt::Unit<torch::nn::Conv2dImpl>(torch::nn::Conv2dOptions(1, 32, 3).stride(1)));
  conv2 = register_module("conv2", zt::Unit<torch::nn::Conv2dImpl>(torch::nn::Conv2dOptions(32, 64, 3).stride(1)));
  fc1 = register_module("fc1", zt::Unit<torch::nn::LinearImpl>(torch::nn::LinearOptions(9216, 128)));
  fc2 = register_module("fc2", zt::Unit<torch::nn::LinearImpl>(torch::nn::LinearOptions(128, 10)));
}

torch::Tensor MnistCnnImpl::forward(const torch::Tensor& input) {
  torch::Tensor x = torch::relu(conv1(input));
  x = torch::relu(conv2(x));
  x = torch::max_pool2d(x, 2);
  x = torch::dropout(x, 0.25, is_training());
  x = torch::flatten(x, 1);
  x = torch::relu(fc1(x));
  x = torch::dropout(x, 0.5, is_training());
  return torch::log_softmax(fc2(x), 1);
}

namespace {

class MnistCnnModel : public Model {
 public:
  explicit MnistCnnModel(const ModelInfo& info) : info_(info), module_(std::make_shared<MnistCnnImpl>()) {}
  const ModelInfo& info() const override { return info_; }
  std::shared_ptr<torch::nn::Module> module() override { return module_; }
  at::Tensor Forward(const at::Tensor& input) override {
    const bool ok = input.defined() && input.dim() == 4 && input.size(1) == 1 && input.size(2) == 28 &&
                    input.size(3) == 28 && at::isFloatingType(input.scalar_type());
    if (!ok) {
      throw Error(absl::InvalidArgumentError(absl::StrCat(
          "model ", info_.name, ": input must be float images of shape [batch, 1, 28, 28], got ",
          input.defined() ? absl::StrCat(std::string(c10::toString(input.scalar_type())), " ", c10::str(input.sizes()))
                          : std::string("an undefined tensor"))));
    }
    return module_->forward(input);
  }
  int CheckpointActivations(int n) override {
    return CheckpointFirst({module_->conv1.get(), module_->conv2.get(), module_->fc1.get(), module_->fc2.get()}, n);
  }

 private:
  ModelInfo info_;
  std::shared_ptr<MnistCnnImpl> module_;
};

}  // namespace

std::unique_ptr<Model> CreateMnistCnn(const ModelInfo& info) { return std::make_unique<MnistCnnModel>(info); }

}  // namespace zt::models
