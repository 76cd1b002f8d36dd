// What a ZeRO stage shards, asked in one place (llm.c's shard_at_stage): the
// engine, its setup and its checkpointer ask these questions instead of
// comparing the stage number. LibTorch-free.
//   stage 0: nothing sharded (data parallel; every rank steps everything);
//   stage 1: the fp32 master weights and optimizer state, one slice per rank;
//   stage 2: and the gradients (each rank keeps its slice's reduced sum);
//   stage 3: and the parameters themselves (gathered per unit for use).
// Where the gradients live at each stage is zero::GradResidencyForStage
// (zero/flat_group.h), built on the same numbers.
#pragma once

namespace zt::plan {

class StageSharding {
 public:
  StageSharding() = default;
  // `stage` is 0..3 (the config parser refuses anything else).
  explicit StageSharding(int stage) : stage_(stage) {}

  int stage() const { return stage_; }
  // Each rank keeps and updates only its slice of the master weights and the
  // optimizer state; the updated slices are gathered back after the step.
  bool optimizer_state() const { return stage_ >= 1; }
  // Gradients are reduce-scattered: each rank keeps only its slice's sum.
  bool gradients() const { return stage_ >= 2; }
  // Parameters live as shards between uses: each rank writes its own model
  // states in a checkpoint, and the module's own tensors are not the values.
  bool parameters() const { return stage_ == 3; }

 private:
  int stage_ = 0;
};

}  // namespace zt::plan
