// UnitHook: what connects one zt::Unit to the stage-3 ParamCoordinator that
// shards it. The unit and the autograd nodes its forward creates hold it;
// the engine detaches it on destruction, after which a forward through the
// unit is a clear error (its parameters hold only this rank's shard).
#pragma once

#include <atomic>
#include <memory>
#include <string>

namespace zt::zero {

class ParamCoordinator;

// Shared by all hooks of one engine; the engine clears it when it goes away.
struct CoordinatorLink {
  std::atomic<ParamCoordinator*> coordinator{nullptr};
};

class UnitHook {
 public:
  UnitHook(std::shared_ptr<CoordinatorLink> link, int unit, std::string name)
      : link_(std::move(link)), unit_(unit), name_(std::move(name)) {}

  int unit() const { return unit_; }
  const std::string& name() const { return name_; }
  // The coordinator, or throws zt::Error when no engine is attached.
  ParamCoordinator& coordinator() const;
  // The coordinator or nullptr (for autograd callbacks that must not throw
  // after the engine is gone).
  ParamCoordinator* coordinator_or_null() const { return link_->coordinator.load(); }

 private:
  std::shared_ptr<CoordinatorLink> link_;
  int unit_;
  std::string name_;
};

}  // namespace zt::zero
