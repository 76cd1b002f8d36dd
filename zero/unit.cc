// Implementation of zero/unit.h: the forward scope and the autograd hooks
// that tell the coordinator where backward is.
#include "zero/unit.h"

#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>

#include <algorithm>
#include <atomic>
#include <string>
#include <vector>

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

using torch::autograd::Node;
using torch::autograd::variable_list;

// The pre-hook a unit puts on one node of the autograd graph: it runs right
// before the node does. Hooks on nodes rather than identity functions on
// tensors: they create no views, so code around a unit may change its
// results and arguments in place. One hook per node serves every unit that
// needs it: a block's result is the next block's argument, and the next
// block must be released before this one is gathered again.
class BoundaryHook : public torch::autograd::FunctionPreHook {
 public:
  // This node produced an argument of `unit`: when it runs, that call's
  // backward has passed through the unit.
  void AddRelease(std::shared_ptr<UnitHook> unit) { release_.push_back(std::move(unit)); }
  // This node produced a result of `unit`: gather before the unit's nodes
  // run. `fired` is shared by the call's result nodes (gather once).
  void AddGather(std::shared_ptr<UnitHook> unit, std::shared_ptr<std::atomic<bool>> fired) {
    gather_.push_back({std::move(unit), std::move(fired)});
  }

  variable_list operator()(const variable_list& grads) override {
    for (const std::shared_ptr<UnitHook>& unit : release_) {
      if (ParamCoordinator* c = unit->coordinator_or_null()) c->PostBackward(unit->unit());
    }
    for (auto& [unit, fired] : gather_) {
      if (!fired->exchange(true)) unit->coordinator().PreBackward(unit->unit());
    }
    return grads;
  }

  // The node's BoundaryHook, added if it has none yet.
  static BoundaryHook& On(Node& node) {
    for (const auto& h : node.pre_hooks()) {
      if (auto* mine = dynamic_cast<BoundaryHook*>(h.get())) return *mine;
    }
    auto hook = std::make_unique<BoundaryHook>();
    BoundaryHook& ref = *hook;
    node.add_pre_hook(std::move(hook));
    return ref;
  }

 private:
  std::vector<std::shared_ptr<UnitHook>> release_;
  std::vector<std::pair<std::shared_ptr<UnitHook>, std::shared_ptr<std::atomic<bool>>>> gather_;
};

bool NeedsGrad(const at::Tensor& t) { return t.defined() && t.requires_grad() && at::isFloatingType(t.scalar_type()); }

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
    if (!input_nodes_.empty()) c->AddInputNodes(hook_->unit(), static_cast<int>(input_nodes_.size()));
    c->PostForward(hook_->unit(), training_);
  } catch (const std::exception& e) {
    // Releasing only frees memory, so this is not expected; a destructor
    // must not throw, and the process group reports real failures again.
    ZT_LOG(ERROR) << "unit '" << hook_->name() << "': releasing its parameters failed: " << e.what();
  }
}

void UnitCall::Input(const at::Tensor& t) {
  // The node that produced an argument runs only after every node that
  // consumed it: then this call's backward has passed through the unit.
  // Leaves (parameters, user inputs) have no such node worth hooking, and a
  // parameter's accumulator lives on, so hooks on it would pile up.
  if (!training_ || !NeedsGrad(t) || t.grad_fn() == nullptr) return;
  Node* node = t.grad_fn().get();
  if (std::find(input_nodes_.begin(), input_nodes_.end(), node) != input_nodes_.end()) return;
  input_nodes_.push_back(node);
  BoundaryHook::On(*node).AddRelease(hook_);
}

void UnitCall::Outputs(const std::vector<at::Tensor*>& outputs) {
  if (!training_) return;
  auto fired = std::make_shared<std::atomic<bool>>(false);
  std::vector<Node*> hooked;
  for (const at::Tensor* t : outputs) {
    if (!NeedsGrad(*t) || t->grad_fn() == nullptr) continue;
    Node* node = t->grad_fn().get();
    if (std::find(hooked.begin(), hooked.end(), node) != hooked.end()) continue;
    hooked.push_back(node);
    BoundaryHook::On(*node).AddGather(hook_, fired);
  }
}

}  // namespace internal
}  // namespace zero

UnitBase::UnitBase() = default;
UnitBase::~UnitBase() = default;

void UnitBase::OnConstructed(torch::nn::Module& self) {
  UnitConstructionHook::RunAll(self);
  zero::ShardAtConstruction(self, *this);
}

namespace {
// The constructing thread's hooks, outermost first.
thread_local std::vector<UnitConstructionHook*> construction_hooks;
}  // namespace

UnitConstructionHook::UnitConstructionHook(std::function<void(torch::nn::Module&)> fn) : fn_(std::move(fn)) {
  construction_hooks.push_back(this);
}

UnitConstructionHook::~UnitConstructionHook() {
  auto it = std::find(construction_hooks.begin(), construction_hooks.end(), this);
  if (it != construction_hooks.end()) construction_hooks.erase(it);
}

void UnitConstructionHook::RunAll(torch::nn::Module& unit) {
  for (UnitConstructionHook* h : construction_hooks) h->fn_(unit);
}

UnitBase* AsUnit(torch::nn::Module& module) { return dynamic_cast<UnitBase*>(&module); }

namespace zero::internal {
namespace {

// A parameter of `module` itself or of its non-unit descendants (those of
// inner units belong to them) whose storage is released.
bool HasReleasedOwnParameter(torch::nn::Module& module) {
  for (const at::Tensor& p : module.parameters(/*recurse=*/false)) {
    if (p.numel() > 0 && p.storage().nbytes() == 0) return true;
  }
  for (const auto& child : module.children()) {
    if (AsUnit(*child) == nullptr && HasReleasedOwnParameter(*child)) return true;
  }
  return false;
}

}  // namespace

void ExplainReleasedParameter(torch::nn::Module& unit, const std::exception& error) {
  // ATen's words for a tensor whose storage holds nothing (a view of it, or
  // its data read); any other error is the user's own and stays as it is.
  const std::string what = error.what();
  if (what.find("storage of size 0") == std::string::npos &&
      what.find("data is not allocated yet") == std::string::npos) {
    return;
  }
  for (const auto& item : unit.named_modules("", /*include_self=*/false)) {
    UnitBase* inner = AsUnit(*item.value());
    if (inner == nullptr || inner->unit_hook() == nullptr || !HasReleasedOwnParameter(*item.value())) continue;
    const std::string type = item.value()->name();
    throw Error(absl::FailedPreconditionError(absl::StrCat(
        "unit '", inner->unit_hook()->name(), "' (", type,
        ") was run without gathering its parameters: its inner module was called directly, e.g. through "
        "LibTorch's ModuleList idiom `list[i]->as<BlockImpl>()->forward(x)`, which skips the unit. Call the unit "
        "itself: `list[i]->as<",
        type,
        ">()->forward(x)`, or keep the blocks in a std::vector<zt::Unit<BlockImpl>> and call `block(x)`. "
        "(ATen: ",
        what.substr(0, what.find('\n')), ")")));
  }
}

}  // namespace zero::internal

namespace {

// Innermost units in module order; returns whether `m`'s subtree has a unit.
bool CollectInnermost(torch::nn::Module& m, std::vector<UnitBase*>& out) {
  bool below = false;
  for (const auto& child : m.named_children()) below = CollectInnermost(*child.value(), out) || below;
  UnitBase* self = AsUnit(m);
  if (self != nullptr && !below) out.push_back(self);
  return below || self != nullptr;
}

}  // namespace

int CheckpointUnits(torch::nn::Module& model, std::optional<int64_t> number_checkpoints) {
  std::vector<UnitBase*> units;
  CollectInnermost(model, units);
  // Children are visited before their parent, so `units` is in module order.
  const int64_t n = static_cast<int64_t>(units.size());
  int64_t every = 1;
  if (number_checkpoints.has_value() && *number_checkpoints > 0 && *number_checkpoints < n) {
    every = (n + *number_checkpoints - 1) / *number_checkpoints;
  }
  int marked = 0;
  for (int64_t i = 0; i < n; ++i) {
    const bool on = i % every == 0;
    units[static_cast<size_t>(i)]->set_activation_checkpointing(on);
    marked += on ? 1 : 0;
  }
  return marked;
}

}  // namespace zt
