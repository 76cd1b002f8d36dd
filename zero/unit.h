// zt::Unit<Impl>: marks a module as a ZeRO stage-3 sharding unit, the C++
// counterpart of FSDP's auto-wrap units. LibTorch modules have no forward
// hooks, so the unit wraps the module's own forward instead:
//
//   struct BlockImpl : torch::nn::Module { ... torch::Tensor forward(torch::Tensor x); };
//   TORCH_MODULE(Block);                        // unsharded use, unchanged
//
//   struct GptImpl : torch::nn::Module {
//     GptImpl() { for (int i = 0; i < 12; ++i) h.push_back(register_module(
//                     "h" + std::to_string(i), zt::Unit<BlockImpl>(768))); }
//     std::vector<zt::Unit<BlockImpl>> h;       // each block: one unit
//   };
//   using Gpt = zt::Unit<GptImpl>;              // optional: the top module as a unit too
//
// UnitImpl<Impl> derives from Impl, so parameter names, constructors and
// every member stay exactly those of Impl (state dicts and checkpoints do not
// see the wrapper). Its forward, under a stage-3 engine, gathers the unit's
// parameters (waiting on a prefetch already in flight), runs Impl::forward,
// releases them, and hooks the autograd nodes that produced its results (so
// backward gathers them again before the unit's own nodes run) and its
// tensor arguments (so it knows when the unit's backward is done). The hooks
// sit on graph nodes and create no tensors: code around a unit may change
// its results and arguments in place. Outside stage 3 (no engine, stages
// 0-2) it is exactly Impl.
//
// Rules for units:
//  * Every parameter belongs to the innermost unit that registers it;
//    parameters outside every unit belong to the root, which stays gathered
//    (nothing tells us when the top module's forward runs) unless the top
//    module is itself a unit. A parameter registered under several units
//    (tied weights) belongs to their innermost common ancestor.
//  * A unit's parameters hold data only inside its forward and backward, or
//    inside zt::GatheredParameters. Read shapes freely; read values there.
//  * Results are found through zt::UnitTensors<T>: at::Tensor, tuples,
//    pairs, vectors of those and plain scalars work; specialize UnitTensors
//    for your own result structs. Top-level at::Tensor arguments are tracked
//    for backward; tensors nested inside other argument types are not (their
//    only effect: frozen parameters are then freed at the end of backward).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "zero/activation_checkpoint.h"

namespace zt {

namespace zero {
class UnitHook;
struct PresharedUnit;
}  // namespace zero

// The part of a unit the engine sees, whatever Impl is.
class UnitBase {
 public:
  UnitBase();
  virtual ~UnitBase();
  UnitBase(const UnitBase&) = delete;
  UnitBase& operator=(const UnitBase&) = delete;

  // Internal: the engine's connection while it shards this unit.
  const std::shared_ptr<zero::UnitHook>& unit_hook() const { return hook_; }
  void set_unit_hook(std::shared_ptr<zero::UnitHook> hook) { hook_ = std::move(hook); }
  // Internal: shards made by zt::ShardedInit, until Engine::Create adopts them.
  std::shared_ptr<zero::PresharedUnit>& preshard() { return preshard_; }

  // Activation checkpointing of the whole unit (zero/activation_checkpoint.h):
  // its forward keeps only its tensor arguments and runs again in backward.
  // Works at every stage. CheckpointUnits sets it by the config.
  void set_activation_checkpointing(bool on) { checkpointed_ = on; }
  bool activation_checkpointing() const { return checkpointed_; }

 protected:
  // Called by UnitImpl once Impl is constructed (construction-time sharding).
  void OnConstructed(torch::nn::Module& self);

 private:
  std::shared_ptr<zero::UnitHook> hook_;
  std::shared_ptr<zero::PresharedUnit> preshard_;
  bool checkpointed_ = false;
};

// A callback every unit built on this thread runs on itself once Impl is
// constructed, before construction-time sharding (zt::ShardedInit) looks at
// its parameters: what it adds or freezes is sharded accordingly. LoRA
// (lora/lora_scope.h) adds its adapters this way. Hooks nest; the innermost
// runs last. RAII: the hook is active for the object's lifetime, on the
// constructing thread only.
class UnitConstructionHook {
 public:
  explicit UnitConstructionHook(std::function<void(torch::nn::Module&)> fn);
  ~UnitConstructionHook();
  UnitConstructionHook(const UnitConstructionHook&) = delete;
  UnitConstructionHook& operator=(const UnitConstructionHook&) = delete;

  // Runs every active hook on `unit` (UnitBase::OnConstructed calls it).
  static void RunAll(torch::nn::Module& unit);

 private:
  std::function<void(torch::nn::Module&)> fn_;
};

// How a unit finds the tensors in its forward's result. kKnown is false for
// types it cannot see into; specialize for your own structs:
//   template <> struct zt::UnitTensors<MyOut> {
//     static constexpr bool kKnown = true;
//     template <typename F> static void ForEach(MyOut& o, F&& f) { f(o.hidden); f(o.logits); }
//   };
template <typename T, typename Enable = void>
struct UnitTensors {
  static constexpr bool kKnown = std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string>;
  template <typename F>
  static void ForEach(T&, F&&) {}
};

template <>
struct UnitTensors<at::Tensor> {
  static constexpr bool kKnown = true;
  template <typename F>
  static void ForEach(at::Tensor& t, F&& f) {
    f(t);
  }
};

template <typename... Ts>
struct UnitTensors<std::tuple<Ts...>> {
  static constexpr bool kKnown = (UnitTensors<Ts>::kKnown && ...);
  template <typename F>
  static void ForEach(std::tuple<Ts...>& t, F&& f) {
    std::apply([&f](auto&... e) { (UnitTensors<std::decay_t<decltype(e)>>::ForEach(e, f), ...); }, t);
  }
};

template <typename A, typename B>
struct UnitTensors<std::pair<A, B>> {
  static constexpr bool kKnown = UnitTensors<A>::kKnown && UnitTensors<B>::kKnown;
  template <typename F>
  static void ForEach(std::pair<A, B>& p, F&& f) {
    UnitTensors<A>::ForEach(p.first, f);
    UnitTensors<B>::ForEach(p.second, f);
  }
};

template <typename T>
struct UnitTensors<std::vector<T>> {
  static constexpr bool kKnown = UnitTensors<T>::kKnown;
  template <typename F>
  static void ForEach(std::vector<T>& v, F&& f) {
    for (T& e : v) UnitTensors<T>::ForEach(e, f);
  }
};

namespace zero::internal {

// One forward call of a unit. The constructor gathers (stage 3 only), the
// destructor releases; Input/Outputs hook the autograd graph.
class UnitCall {
 public:
  explicit UnitCall(UnitBase& unit);
  ~UnitCall();
  UnitCall(const UnitCall&) = delete;
  UnitCall& operator=(const UnitCall&) = delete;

  // False outside stage 3: the unit is then a plain module.
  bool active() const { return hook_ != nullptr; }
  void Input(const at::Tensor& t);
  void Outputs(const std::vector<at::Tensor*>& outputs);

 private:
  std::shared_ptr<UnitHook> hook_;
  bool training_ = false;
  std::vector<const void*> input_nodes_;
};

template <typename T>
T&& TrackArg(UnitCall& call, T&& arg) {
  if constexpr (std::is_same_v<std::decay_t<T>, at::Tensor>) call.Input(arg);
  return std::forward<T>(arg);
}

template <typename T>
void WrapOutputs(UnitCall& call, T& out) {
  static_assert(UnitTensors<T>::kKnown,
                "zt::Unit: the module's forward returns a type the unit cannot look into; specialize "
                "zt::UnitTensors<T> for it (see zero/unit.h)");
  std::vector<at::Tensor*> tensors;
  UnitTensors<T>::ForEach(out, [&tensors](at::Tensor& t) { tensors.push_back(&t); });
  call.Outputs(tensors);
}

template <typename T>
void ReplaceTensor(T& arg, const std::vector<at::Tensor>& inputs, size_t& next) {
  if constexpr (std::is_same_v<T, at::Tensor>) arg = inputs[next++];
}

// Runs fn(args...) checkpointed: its tensor arguments are the checkpoint's
// inputs, the other arguments are copied for the recomputation, and the
// tensors of the result are replaced by the checkpoint's outputs.
template <typename Fn, typename... Args>
auto RunCheckpointed(Fn fn, Args&&... args) {
  using Out = std::decay_t<decltype(fn(std::forward<Args>(args)...))>;
  static_assert(UnitTensors<Out>::kKnown,
                "zt::Unit: a checkpointed unit's result must be visible to zt::UnitTensors<T> (see zero/unit.h)");
  std::vector<at::Tensor> inputs;
  auto collect = [&inputs](const auto& a) {
    if constexpr (std::is_same_v<std::decay_t<decltype(a)>, at::Tensor>) inputs.push_back(a);
  };
  (collect(args), ...);
  auto saved = std::make_shared<std::tuple<std::decay_t<Args>...>>(args...);
  struct First {
    std::optional<Out> value;
    bool taken = false;
  };
  auto first = std::make_shared<First>();
  CheckpointFn run = [fn, saved, first](const std::vector<at::Tensor>& xs) {
    auto a = *saved;
    size_t next = 0;
    std::apply([&](auto&... e) { (ReplaceTensor(e, xs, next), ...); }, a);
    Out out = std::apply([&](auto&... e) { return fn(e...); }, a);
    std::vector<at::Tensor> tensors;
    UnitTensors<Out>::ForEach(out, [&tensors](at::Tensor& t) { tensors.push_back(t); });
    if (!first->taken && !first->value) first->value.emplace(std::move(out));  // the structure, once
    return tensors;
  };
  std::vector<at::Tensor> outs = CheckpointAll(run, inputs);
  Out result = std::move(*first->value);
  first->value.reset();
  first->taken = true;
  size_t k = 0;
  UnitTensors<Out>::ForEach(result, [&outs, &k](at::Tensor& t) { t = outs[k++]; });
  return result;
}

// Called when a stage-3 unit's forward failed with an ATen error. If the
// error is ATen's complaint about a parameter with no storage and one of the
// unit's inner units has its parameters released, the inner unit was called
// past its wrapper (LibTorch's `list[i]->as<Impl>()->forward(x)` idiom, which
// skips the gather): throws zt::Error naming that unit and the right call.
// Otherwise returns, and the caller rethrows the original error.
void ExplainReleasedParameter(torch::nn::Module& unit, const std::exception& error);

}  // namespace zero::internal

template <typename Impl>
class UnitImpl : public Impl, public UnitBase {
 public:
  template <typename... Args>
  explicit UnitImpl(Args&&... args) : Impl(std::forward<Args>(args)...) {
    OnConstructed(*this);
  }

  template <typename... Args>
  auto forward(Args&&... args) {
    zero::internal::UnitCall call(*this);
    if (!call.active()) return Forward(call, std::forward<Args>(args)...);
    try {
      return Forward(call, std::forward<Args>(args)...);
    } catch (const c10::Error& e) {
      zero::internal::ExplainReleasedParameter(*this, e);
      throw;
    }
  }

 private:
  template <typename... Args>
  auto Forward(zero::internal::UnitCall& call, Args&&... args) {
    if (activation_checkpointing() && c10::GradMode::is_enabled()) {
      auto out = zero::internal::RunCheckpointed(
          [this](auto&&... a) { return this->Impl::forward(std::forward<decltype(a)>(a)...); },
          zero::internal::TrackArg(call, std::forward<Args>(args))...);
      if (call.active()) zero::internal::WrapOutputs(call, out);
      return out;
    }
    if (!call.active()) return Impl::forward(std::forward<Args>(args)...);
    auto out = Impl::forward(zero::internal::TrackArg(call, std::forward<Args>(args))...);
    zero::internal::WrapOutputs(call, out);
    return out;
  }
};

// The module holder, like the ones TORCH_MODULE declares. Its call operator
// is its own: ModuleHolder's deduces the result from `&Impl::forward`, which
// a template forward does not have. (For the same reason a unit cannot sit
// directly in a torch::nn::Sequential; make the Sequential a unit instead.)
template <typename Impl>
class Unit : public torch::nn::ModuleHolder<UnitImpl<Impl>> {
 public:
  using torch::nn::ModuleHolder<UnitImpl<Impl>>::ModuleHolder;
  template <typename... Args>
  decltype(auto) operator()(Args&&... args) {
    return this->get()->forward(std::forward<Args>(args)...);
  }
};

// The unit behind a module, or nullptr when the module is not a unit.
UnitBase* AsUnit(torch::nn::Module& module);

// Turns on activation checkpointing for the innermost units of `model` (units
// with no unit inside, e.g. a transformer's blocks): all of them, or with
// `number_checkpoints` (the config's activation_checkpointing key) that many,
// every k-th from the first, k = ceil(units / number_checkpoints). Returns
// how many units it marked.
int CheckpointUnits(torch::nn::Module& model, std::optional<int64_t> number_checkpoints = std::nullopt);

}  // namespace zt
