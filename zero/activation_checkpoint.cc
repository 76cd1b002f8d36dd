// Implementation of zero/activation_checkpoint.h.
#include "zero/activation_checkpoint.h"

#include <ATen/ATen.h>
#include <ATen/core/ivalue.h>
#include <ATen/detail/CUDAHooksInterface.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <atomic>
#include <chrono>
#include <mutex>  // std::call_once, and at::Generator's own std::mutex

#include "absl/base/const_init.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "util/log.h"

namespace zt {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using Clock = std::chrono::steady_clock;

struct Settings {
  bool cpu_checkpointing = false;
  bool contiguous = false;
  bool synchronize = false;
  bool profile = false;
};

ABSL_CONST_INIT absl::Mutex g_mu(absl::kConstInit);  // guards the settings and the profile
Settings g_settings ABSL_GUARDED_BY(g_mu);
CheckpointProfile g_profile ABSL_GUARDED_BY(g_mu);
std::atomic<int64_t> g_saved_bytes{0};
thread_local int t_recompute_depth = 0;

Settings CurrentSettings() ABSL_LOCKS_EXCLUDED(g_mu) {
  absl::MutexLock lock(&g_mu);
  return g_settings;
}

double Ms(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); }

// Waits for the CUDA devices of `tensors` (synchronize_checkpoint_boundary,
// and honest profile times); nothing for CPU tensors.
void SynchronizeDevices(const std::vector<at::Tensor>& tensors) {
  for (const at::Tensor& t : tensors) {
    if (t.defined() && t.is_cuda()) at::detail::getCUDAHooks().deviceSynchronize(t.device().index());
  }
}

// contiguous_memory_optimization: saved inputs live in one byte buffer that
// grows to what the checkpoints of one backward need together, and is reused
// once all of them have been consumed.
class SavedInputArena {
 public:
  static constexpr int64_t kAlign = 64;

  // A copy of `t` in the buffer, or in its own allocation when the buffer is
  // too small this time (it grows for the next round).
  at::Tensor Copy(const at::Tensor& t) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    const int64_t bytes = (static_cast<int64_t>(t.nbytes()) + kAlign - 1) / kAlign * kAlign;
    ++outstanding_;
    needed_ += bytes;
    at::Tensor out;
    if (buffer_.defined() && buffer_.device() == t.device() && used_ + bytes <= buffer_.numel()) {
      out = buffer_.narrow(0, used_, static_cast<int64_t>(t.nbytes())).view(t.scalar_type()).view(t.sizes());
      used_ += bytes;
    } else {
      out = at::empty(t.sizes(), t.options().memory_format(at::MemoryFormat::Contiguous));
    }
    out.copy_(t);
    return out;
  }

  // One saved input was consumed or dropped.
  void Release(const at::Device& device) ABSL_LOCKS_EXCLUDED(mu_) {
    absl::MutexLock lock(&mu_);
    if (--outstanding_ > 0) return;
    if (!buffer_.defined() || buffer_.numel() < needed_ || buffer_.device() != device) {
      buffer_ = at::Tensor();  // the old one goes before the new one comes
      buffer_ = at::empty({needed_}, at::TensorOptions().dtype(at::kByte).device(device));
    }
    used_ = 0;
    needed_ = 0;
  }

 private:
  absl::Mutex mu_;
  at::Tensor buffer_ ABSL_GUARDED_BY(mu_);
  int64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t needed_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t outstanding_ ABSL_GUARDED_BY(mu_) = 0;
};

SavedInputArena& Arena() {
  static SavedInputArena* arena = new SavedInputArena();  // never destroyed: saved tensors may outlive statics
  return *arena;
}

// Everything a checkpoint needs in backward. Carried in saved_data as a
// capsule (AutogradContext stores IValues); destroyed with the graph.
struct CheckpointState : torch::CustomClassHolder {
  CheckpointFn fn;
  size_t num_inputs = 0;  // fn's inputs; an anchor may follow (see CheckpointAll)
  Settings settings;
  at::Tensor cpu_rng;
  std::vector<std::pair<at::Device, at::Tensor>> cuda_rng;
  // Per input: how it was saved, whether it required grad, its device.
  enum class Saved { kNone, kAutograd, kCopy, kArena };
  std::vector<Saved> how;
  std::vector<char> requires_grad;
  std::vector<at::Device> devices;
  std::vector<at::Tensor> copies;  // kCopy / kArena inputs (others undefined)
  int64_t saved_bytes = 0;

  ~CheckpointState() override {
    g_saved_bytes -= saved_bytes;
    for (size_t i = 0; i < how.size(); ++i) {
      if (how[i] == Saved::kArena) Arena().Release(devices[i]);
    }
  }
};

at::Tensor GeneratorState(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetGeneratorState(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// Saves, then restores at scope end, the RNG states the recomputation sets.
class RngFork {
 public:
  explicit RngFork(const CheckpointState& st) : st_(st) {
    cpu_ = GeneratorState(at::detail::getDefaultCPUGenerator());
    for (const auto& [device, state] : st_.cuda_rng)
      cuda_.push_back(GeneratorState(at::globalContext().defaultGenerator(device)));
    SetGeneratorState(at::detail::getDefaultCPUGenerator(), st_.cpu_rng);
    for (const auto& [device, state] : st_.cuda_rng)
      SetGeneratorState(at::globalContext().defaultGenerator(device), state);
  }
  ~RngFork() {
    SetGeneratorState(at::detail::getDefaultCPUGenerator(), cpu_);
    for (size_t i = 0; i < cuda_.size(); ++i) {
      SetGeneratorState(at::globalContext().defaultGenerator(st_.cuda_rng[i].first), cuda_[i]);
    }
  }

 private:
  const CheckpointState& st_;
  at::Tensor cpu_;
  std::vector<at::Tensor> cuda_;
};

struct DepthScope {
  DepthScope() { ++t_recompute_depth; }
  ~DepthScope() { --t_recompute_depth; }
};

struct CheckpointFunction : torch::autograd::Function<CheckpointFunction> {
  static variable_list forward(AutogradContext* ctx, at::TensorList inputs, c10::intrusive_ptr<CheckpointState> st) {
    ctx->set_materialize_grads(false);
    // RNG state before the first run, for the recomputation.
    st->cpu_rng = GeneratorState(at::detail::getDefaultCPUGenerator());
    for (const at::Tensor& x : inputs) {
      if (!x.defined() || !x.is_cuda()) continue;
      bool seen = false;
      for (const auto& [device, state] : st->cuda_rng) seen = seen || device == x.device();
      if (!seen)
        st->cuda_rng.emplace_back(x.device(), GeneratorState(at::globalContext().defaultGenerator(x.device())));
    }

    const std::vector<at::Tensor> fn_inputs(inputs.begin(),
                                            inputs.begin() + static_cast<std::ptrdiff_t>(st->num_inputs));
    if (st->settings.synchronize) SynchronizeDevices(fn_inputs);
    const auto t0 = Clock::now();
    variable_list outputs = st->fn(fn_inputs);  // Function::apply runs forward with grad mode off
    if (st->settings.synchronize || st->settings.profile) SynchronizeDevices(outputs);
    const double ms = Ms(t0, Clock::now());

    // Save the inputs: as they are (autograd's version check catches later
    // in-place changes), in host memory, or in the contiguous arena.
    using Saved = CheckpointState::Saved;
    variable_list keep;
    for (const at::Tensor& x : inputs) {
      st->requires_grad.push_back(x.defined() && x.requires_grad() ? 1 : 0);
      st->devices.push_back(x.defined() ? x.device() : at::Device(at::kCPU));
      st->copies.emplace_back();
      if (!x.defined()) {
        st->how.push_back(Saved::kNone);
        continue;
      }
      st->saved_bytes += static_cast<int64_t>(x.nbytes());
      if (st->settings.cpu_checkpointing && x.is_cuda()) {
        st->copies.back() = at::empty(x.sizes(), x.options().device(at::kCPU).pinned_memory(true));
        st->copies.back().copy_(x.detach(), /*non_blocking=*/true);
        st->how.push_back(Saved::kCopy);
      } else if (st->settings.contiguous) {
        st->copies.back() = Arena().Copy(x.detach());
        st->how.push_back(Saved::kArena);
      } else {
        keep.push_back(x);
        st->how.push_back(Saved::kAutograd);
      }
    }
    g_saved_bytes += st->saved_bytes;
    ctx->save_for_backward(keep);
    ctx->saved_data["state"] = at::IValue::make_capsule(st);

    std::vector<at::Tensor> non_diff;
    for (const at::Tensor& y : outputs) {
      if (y.defined() && !at::isFloatingType(y.scalar_type())) non_diff.push_back(y);
    }
    if (!non_diff.empty()) ctx->mark_non_differentiable(non_diff);
    if (st->settings.profile) {
      absl::MutexLock lock(&g_mu);
      ++g_profile.calls;
      g_profile.forward_ms += ms;
    }
    return outputs;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto st = c10::static_intrusive_pointer_cast<CheckpointState>(ctx->saved_data["state"].toCapsule());
    using Saved = CheckpointState::Saved;
    variable_list kept = ctx->get_saved_variables();
    size_t next_kept = 0;
    std::vector<at::Tensor> inputs;
    for (size_t i = 0; i < st->how.size(); ++i) {
      at::Tensor x;
      switch (st->how[i]) {
        case Saved::kNone: break;
        case Saved::kAutograd: x = kept.at(next_kept++); break;
        case Saved::kCopy: x = st->copies[i].to(st->devices[i], /*non_blocking=*/true); break;
        case Saved::kArena: x = st->copies[i]; break;
      }
      // Fresh leaves: the recomputation's gradients for them stop here.
      if (x.defined()) x = x.detach().requires_grad_(st->requires_grad[i] != 0);
      inputs.push_back(x);
    }

    const std::vector<at::Tensor> fn_inputs(inputs.begin(),
                                            inputs.begin() + static_cast<std::ptrdiff_t>(st->num_inputs));
    variable_list outputs;
    double ms = 0;
    {
      DepthScope depth;
      RngFork rng(*st);
      at::AutoGradMode grad(true);
      if (st->settings.synchronize) SynchronizeDevices(fn_inputs);
      const auto t0 = Clock::now();
      outputs = st->fn(fn_inputs);
      if (st->settings.synchronize || st->settings.profile) SynchronizeDevices(outputs);
      ms = Ms(t0, Clock::now());
    }
    std::vector<at::Tensor> roots, root_grads;
    for (size_t i = 0; i < outputs.size() && i < grads.size(); ++i) {
      if (outputs[i].defined() && outputs[i].requires_grad() && grads[i].defined()) {
        roots.push_back(outputs[i]);
        root_grads.push_back(grads[i]);
      }
    }
    if (!roots.empty()) {
      DepthScope depth;
      torch::autograd::backward(roots, root_grads);
    }
    if (st->settings.profile) {
      absl::MutexLock lock(&g_mu);
      g_profile.recompute_ms += ms;
    }

    variable_list result;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const bool wanted = i < st->num_inputs && inputs[i].defined() && st->requires_grad[i];
      result.push_back(wanted ? inputs[i].grad() : at::Tensor());
    }
    result.emplace_back();  // the state capsule
    return result;
  }
};

}  // namespace

std::vector<at::Tensor> CheckpointAll(const CheckpointFn& fn, const std::vector<at::Tensor>& inputs) {
  if (!c10::GradMode::is_enabled()) return fn(inputs);  // nothing to save for: just run it
  auto st = c10::make_intrusive<CheckpointState>();
  st->fn = fn;
  st->num_inputs = inputs.size();
  st->settings = CurrentSettings();
  // A function whose inputs need no gradient (the first block, fed data)
  // still has parameters that do. Autograd records a node only when an
  // input requires grad, so give it an empty one that does: its backward
  // then recomputes and reaches the parameters.
  bool any = false;
  for (const at::Tensor& x : inputs) any = any || (x.defined() && x.requires_grad());
  if (any) return CheckpointFunction::apply(at::TensorList(inputs), st);
  std::vector<at::Tensor> anchored = inputs;
  anchored.push_back(at::empty({0}).requires_grad_(true));
  return CheckpointFunction::apply(at::TensorList(anchored), st);
}

void ConfigureActivationCheckpointing(const ActivationCheckpointingConfig& config) {
  static std::once_flag partition_note, cpu_note;
  if (config.partition_activations) {
    std::call_once(partition_note, [] {
      ZT_LOG(INFO) << "activation_checkpointing.partition_activations: DeepSpeed splits saved activations across "
                      "tensor-parallel ranks; zerotorch has no tensor parallelism, so each rank keeps its "
                      "checkpoints' inputs whole (logged once)";
    });
  }
  if (config.cpu_checkpointing) {
    std::call_once(cpu_note, [] {
      ZT_LOG(INFO) << "activation_checkpointing.cpu_checkpointing: checkpoint inputs on CUDA devices are moved to "
                      "pinned host memory; CPU tensors are in host memory already (logged once)";
    });
  }
  absl::MutexLock lock(&g_mu);
  g_settings.cpu_checkpointing = config.cpu_checkpointing;
  g_settings.contiguous = config.contiguous_memory_optimization;
  g_settings.synchronize = config.synchronize_checkpoint_boundary;
  g_settings.profile = config.profile;
}

CheckpointProfile TakeCheckpointProfile() {
  absl::MutexLock lock(&g_mu);
  CheckpointProfile p = g_profile;
  g_profile = CheckpointProfile();
  return p;
}

bool InCheckpointRecompute() { return t_recompute_depth > 0; }

int64_t CheckpointSavedBytes() { return g_saved_bytes.load(); }

}  // namespace zt
