// bf16 tensors with fp32 arithmetic: CPU kernels registered over LibTorch's
// own for ten ops, and what this CPU can do.
#include "engine/bf16_compute.h"

#include <ATen/Context.h>
#include <ATen/ops/addmm_cpu_dispatch.h>
#include <ATen/ops/baddbmm_cpu_dispatch.h>
#include <ATen/ops/bmm_cpu_dispatch.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/gelu_backward_cpu_dispatch.h>
#include <ATen/ops/gelu_cpu_dispatch.h>
#include <ATen/ops/mm_cpu_dispatch.h>
#include <ATen/ops/native_layer_norm_backward_native.h>
#include <ATen/ops/native_layer_norm_native.h>
#include <ATen/ops/silu_backward_cpu_dispatch.h>
#include <ATen/ops/silu_cpu_dispatch.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace zt {
namespace {

bool IsBf16(const at::Tensor& t) { return t.defined() && t.scalar_type() == at::kBFloat16; }

at::Tensor Up(const at::Tensor& t) { return t.to(at::kFloat); }

c10::optional<at::Tensor> UpOptional(const c10::optional<at::Tensor>& t) {
  if (!t.has_value() || !t->defined()) return t;
  return t->to(at::kFloat);
}

// The GEMMs: the fp32 kernel is LibTorch's own CPU kernel, called directly
// (at::cpu::), so it is neither dispatched back here nor recorded by
// autograd (the dispatcher already sits below the autograd key).
at::Tensor Mm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!IsBf16(self) || !IsBf16(mat2)) return at::cpu::mm(self, mat2);
  return at::cpu::mm(Up(self), Up(mat2)).to(at::kBFloat16);
}

at::Tensor Addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  if (!IsBf16(self) || !IsBf16(mat1) || !IsBf16(mat2)) return at::cpu::addmm(self, mat1, mat2, beta, alpha);
  return at::cpu::addmm(Up(self), Up(mat1), Up(mat2), beta, alpha).to(at::kBFloat16);
}

at::Tensor Bmm(const at::Tensor& self, const at::Tensor& mat2) {
  if (!IsBf16(self) || !IsBf16(mat2)) return at::cpu::bmm(self, mat2);
  return at::cpu::bmm(Up(self), Up(mat2)).to(at::kBFloat16);
}

at::Tensor Baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  if (!IsBf16(self) || !IsBf16(batch1) || !IsBf16(batch2)) {
    return at::cpu::baddbmm(self, batch1, batch2, beta, alpha);
  }
  return at::cpu::baddbmm(Up(self), Up(batch1), Up(batch2), beta, alpha).to(at::kBFloat16);
}

// The activations LibTorch 1.13 runs 2.5-5x slower in bf16 than in fp32
// (GPT-2's and BERT's GELU, LLaMA's SiLU): fp32 inside, bf16 out. Cheaper
// element-wise ops (add, mul, softmax) keep their bf16 kernels. The fp32
// copies are made a chunk at a time, so that an activation's transient
// fp32 memory is a chunk, not twice the (bf16) activation.
constexpr int64_t kChunk = 1 << 16;

// op(fp32 chunk of each input) -> fp32 chunk, written into a bf16 result
// shaped like inputs[0]. All inputs bf16, contiguous, of one shape.
template <typename Op>
at::Tensor ChunkedInFp32(const std::vector<at::Tensor>& inputs, Op op) {
  at::Tensor out = at::empty_like(inputs[0], at::MemoryFormat::Contiguous);
  const at::Tensor flat_out = out.view({-1});
  std::vector<at::Tensor> flat;
  for (const at::Tensor& t : inputs) flat.push_back(t.contiguous().view({-1}));
  const int64_t n = flat_out.numel();
  std::vector<at::Tensor> up(inputs.size());
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t len = std::min(kChunk, n - start);
    for (size_t i = 0; i < flat.size(); ++i) up[i] = flat[i].narrow(0, start, len).to(at::kFloat);
    flat_out.narrow(0, start, len).copy_(op(up));
  }
  return out;
}

bool SameShape(const at::Tensor& a, const at::Tensor& b) { return a.sizes() == b.sizes(); }

at::Tensor Gelu(const at::Tensor& self, c10::string_view approximate) {
  if (!IsBf16(self)) return at::cpu::gelu(self, approximate);
  const std::string how(approximate);  // the view may not outlive this call's argument
  return ChunkedInFp32({self}, [&](const std::vector<at::Tensor>& t) { return at::cpu::gelu(t[0], how); });
}

at::Tensor GeluBackward(const at::Tensor& grad_output, const at::Tensor& self, c10::string_view approximate) {
  if (!IsBf16(grad_output) || !IsBf16(self) || !SameShape(grad_output, self)) {
    return at::cpu::gelu_backward(grad_output, self, approximate);
  }
  const std::string how(approximate);
  return ChunkedInFp32({grad_output, self},
                       [&](const std::vector<at::Tensor>& t) { return at::cpu::gelu_backward(t[0], t[1], how); });
}

at::Tensor Silu(const at::Tensor& self) {
  if (!IsBf16(self)) return at::cpu::silu(self);
  return ChunkedInFp32({self}, [](const std::vector<at::Tensor>& t) { return at::cpu::silu(t[0]); });
}

at::Tensor SiluBackward(const at::Tensor& grad_output, const at::Tensor& self) {
  if (!IsBf16(grad_output) || !IsBf16(self) || !SameShape(grad_output, self)) {
    return at::cpu::silu_backward(grad_output, self);
  }
  return ChunkedInFp32({grad_output, self},
                       [](const std::vector<at::Tensor>& t) { return at::cpu::silu_backward(t[0], t[1]); });
}

using Three = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

Three LayerNorm(const at::Tensor& input, c10::SymIntArrayRef normalized_shape, const c10::optional<at::Tensor>& weight,
                const c10::optional<at::Tensor>& bias, double eps) {
  const at::IntArrayRef shape = c10::asIntArrayRefSlow(normalized_shape);
  if (!IsBf16(input)) return at::native::layer_norm_cpu(input, shape, weight, bias, eps);
  auto [out, mean, rstd] = at::native::layer_norm_cpu(Up(input), shape, UpOptional(weight), UpOptional(bias), eps);
  return {out.to(at::kBFloat16), mean, rstd};
}

at::Tensor Like(const at::Tensor& grad, const c10::optional<at::Tensor>& like) {
  if (!grad.defined() || !like.has_value() || !like->defined()) return grad;
  return grad.to(like->scalar_type());
}

Three LayerNormBackward(const at::Tensor& grad_out, const at::Tensor& input, c10::SymIntArrayRef normalized_shape,
                        const at::Tensor& mean, const at::Tensor& rstd, const c10::optional<at::Tensor>& weight,
                        const c10::optional<at::Tensor>& bias, std::array<bool, 3> output_mask) {
  const at::IntArrayRef shape = c10::asIntArrayRefSlow(normalized_shape);
  if (!IsBf16(input)) {
    return at::native::layer_norm_backward_cpu(grad_out, input, shape, mean, rstd, weight, bias, output_mask);
  }
  auto [grad_input, grad_weight, grad_bias] = at::native::layer_norm_backward_cpu(
      Up(grad_out), Up(input), shape, Up(mean), Up(rstd), UpOptional(weight), UpOptional(bias), output_mask);
  if (grad_input.defined()) grad_input = grad_input.to(input.scalar_type());
  return {grad_input, Like(grad_weight, weight), Like(grad_bias, bias)};
}

// LibTorch warns once per op that a kernel replaces one already registered
// for the key: that replacement is the point here, so only that warning is
// dropped; any other goes to the handler that was in place. (LibTorch 1.13's
// handler is process-wide, so a warning another thread raises meanwhile
// passes through this one too.)
class DropOverrideWarnings : public c10::WarningHandler {
 public:
  explicit DropOverrideWarnings(c10::WarningHandler* next) : next_(next) {}
  void process(const c10::SourceLocation& where, const std::string& msg, bool verbatim) override {
    if (msg.find("Overriding a previously registered kernel") != std::string::npos) return;
    next_->process(where, msg, verbatim);
  }

 private:
  c10::WarningHandler* next_;
};

struct Registry {
  absl::Mutex mu;
  int users ABSL_GUARDED_BY(mu) = 0;
  std::unique_ptr<torch::Library> library ABSL_GUARDED_BY(mu);
};

// Leaked on purpose: a registration still alive at exit must not be torn
// down after LibTorch's dispatcher is.
Registry& TheRegistry() {
  static Registry* registry = new Registry;
  return *registry;
}

}  // namespace

plan::CpuBf16Support DetectCpuBf16Support() {
  plan::CpuBf16Support s;
  s.onednn_enabled = at::hasMKLDNN() && at::globalContext().userEnabledMkldnn();
#if defined(__x86_64__) || defined(_M_X64)
  __builtin_cpu_init();
  s.avx512_core =
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#if defined(__clang__) && __clang_major__ < 19
  // Clang before 19 rejects "amx-bf16" here; the build is GCC's, and clang
  // parses this file only for scripts/thread_safety.sh.
  s.bf16_instructions = __builtin_cpu_supports("avx512bf16");
#else
  s.bf16_instructions = __builtin_cpu_supports("avx512bf16") || __builtin_cpu_supports("amx-bf16");
#endif
#endif
  return s;
}

Fp32ComputeForBf16::Fp32ComputeForBf16() {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  if (r.users++ > 0) return;
  DropOverrideWarnings quiet(c10::Warning::get_warning_handler());
  c10::Warning::WarningHandlerGuard guard(&quiet);
  auto library = std::make_unique<torch::Library>(torch::Library::IMPL, "aten",
                                                  c10::make_optional(c10::DispatchKey::CPU), __FILE__, __LINE__);
  library->impl("mm", TORCH_FN(Mm));
  library->impl("addmm", TORCH_FN(Addmm));
  library->impl("bmm", TORCH_FN(Bmm));
  library->impl("baddbmm", TORCH_FN(Baddbmm));
  library->impl("native_layer_norm", TORCH_FN(LayerNorm));
  library->impl("native_layer_norm_backward", TORCH_FN(LayerNormBackward));
  library->impl("gelu", TORCH_FN(Gelu));
  library->impl("gelu_backward", TORCH_FN(GeluBackward));
  library->impl("silu", TORCH_FN(Silu));
  library->impl("silu_backward", TORCH_FN(SiluBackward));
  r.library = std::move(library);
}

Fp32ComputeForBf16::~Fp32ComputeForBf16() {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  if (--r.users == 0) r.library.reset();
}

bool Fp32ComputeForBf16::Active() {
  Registry& r = TheRegistry();
  absl::MutexLock lock(&r.mu);
  return r.users > 0;
}

}  // namespace zt
