// Implementation of zero/unit.h: the forward scope and the two identity
// autograd functions that tell the coordinator where backward is.
#include "zero/unit.h"

#include <torch/csrc/autograd/custom_function.h>

#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>

#include "absl/strings/str_cat.h"
#include "util/error.h"
#include "util/log.h"
#include "zero/param_coordinator.h"
#include "zero/sharded_init.h"
#include "zero/unit_hook.h"

namespace zt {

namespace zero {

ParamCoordinator& UnitHook::coordinator() const {
  ParamCoordinator* c = link_->coordinator.load();
  if (c == nullptr) {
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "unit '", name_.empty() ? "<root>" : name_,
        "' holds only this rank's shard of its parameters and no engine is attached: create the zt::Engine "
        "before running the model (a module sharded by an engine cannot run once that engine is destroyed)")));
  }
  return *c;
}

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Carries the hook through AutogradContext::saved_data, which holds IValues.
struct HookCapsule : torch::CustomClassHolder {
  explicit HookCapsule(std::shared_ptr<UnitHook> h) : hook(std::move(h)) {}
  std::shared_ptr<UnitHook> hook;
};

std::shared_ptr<UnitHook> HookOf(AutogradContext* ctx) {
  return c10::static_intrusive_pointer_cast<HookCapsule>(ctx->saved_data["hook"].toCapsule())->hook;
}

variable_list Identity(AutogradContext* ctx, at::TensorList xs, const c10::intrusive_ptr<HookCapsule>& hook) {
  ctx->set_materialize_grads(false);
  ctx->saved_data["hook"] = at::IValue::make_capsule(hook);
  return xs.vec();
}

variable_list PassGrads(variable_list grads) {
  grads.emplace_back();  // for the capsule argument
  return grads;
}

// On a unit's outputs: its backward runs before any of the unit's own
// backward nodes, so the parameters are gathered in time.
struct PreBackwardFn : torch::autograd::Function<PreBackwardFn> {
  static variable_list forward(AutogradContext* ctx, at::TensorList xs, c10::intrusive_ptr<HookCapsule> hook) {
    return Identity(ctx, xs, hook);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    std::shared_ptr<UnitHook> hook = HookOf(ctx);
    hook->coordinator().PreBackward(hook->unit());
    return PassGrads(std::move(grads));
  }
};

// On a unit's tensor arguments: created before any of the unit's nodes, so
// autograd (which runs the newest ready node first) reaches it only after
// all of them: the unit's backward for this call is done.
struct PostBackwardFn : torch::autograd::Function<PostBackwardFn> {
  static variable_list forward(AutogradContext* ctx, at::TensorList xs, c10::intrusive_ptr<HookCapsule> hook) {
    return Identity(ctx, xs, hook);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    std::shared_ptr<UnitHook> hook = HookOf(ctx);
    if (ParamCoordinator* c = hook->coordinator_or_null()) c->PostBackward(hook->unit());
    return PassGrads(std::move(grads));
  }
};

bool NeedsGrad(const at::Tensor& t) {
  return t.defined() && t.requires_grad() && at::isFloatingType(t.scalar_type());
}

}  // namespace

namespace internal {

UnitCall::UnitCall(UnitBase& unit) {
  const std::shared_ptr<UnitHook>& hook = unit.unit_hook();
  if (hook == nullptr) return;
  training_ = c10::GradMode::is_enabled();
  hook->coordinator().PreForward(hook->unit(), training_);
  hook_ = hook;
}

UnitCall::~UnitCall() {
  if (hook_ == nullptr) return;
  ParamCoordinator* c = hook_->coordinator_or_null();
  if (c == nullptr) return;
  try {
    if (input_nodes_ > 0) c->AddInputNodes(hook_->unit(), input_nodes_);
    c->PostForward(hook_->unit(), training_);
  } catch (const std::exception& e) {
    // Releasing only frees memory, so this is not expected; a destructor
    // must not throw, and the process group reports real failures again.
    ZT_LOG(ERROR) << "unit '" << hook_->name() << "': releasing its parameters failed: " << e.what();
  }
}

at::Tensor UnitCall::Input(const at::Tensor& t) {
  if (!training_ || !NeedsGrad(t)) return t;
  ++input_nodes_;
  return PostBackwardFn::apply(at::TensorList(t), c10::make_intrusive<HookCapsule>(hook_))[0];
}

void UnitCall::Outputs(const std::vector<at::Tensor*>& outputs) {
  if (!training_) return;
  std::vector<at::Tensor> needs;
  std::vector<at::Tensor*> where;
  for (at::Tensor* t : outputs) {
    if (NeedsGrad(*t)) {
      needs.push_back(*t);
      where.push_back(t);
    }
  }
  if (needs.empty()) return;
  variable_list wrapped = PreBackwardFn::apply(at::TensorList(needs), c10::make_intrusive<HookCapsule>(hook_));
  for (size_t i = 0; i < where.size(); ++i) *where[i] = wrapped[i];
}

}  // namespace internal
}  // namespace zero

UnitBase::UnitBase() = default;
UnitBase::~UnitBase() = default;

void UnitBase::OnConstructed(torch::nn::Module& self) { zero::ShardAtConstruction(self, *this); }

UnitBase* AsUnit(torch::nn::Module& module) { return dynamic_cast<UnitBase*>(&module); }

}  // namespace zt
