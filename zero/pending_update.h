// PendingUpdate: an optimizer update the next forward completes (the update
// at gather, plan/update_schedule.h), as the parameter coordinator sees it.
// The coordinator asks it before each gather, so a gather never reads
// parameters older than the last step; the engine's UpdateInFlight
// (engine/update_in_flight.h) implements it over the optimizer, so the
// coordinator holds no pointer to the optimizer.
#pragma once

namespace zt::zero {

class PendingUpdate {
 public:
  virtual ~PendingUpdate() = default;
  // Whether an update waits for the forward at all.
  virtual bool open() const = 0;
  // Trainable groups [0, updated_groups()) hold their values after the last
  // step (all of them when none is open).
  virtual int updated_groups() const = 0;
  // Updates every group through g (waits for the swap I/O it needs). Throws
  // zt::Error on failure; the update then stays failed.
  virtual void UpdateThrough(int g) = 0;
};

}  // namespace zt::zero
