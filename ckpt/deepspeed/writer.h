// Writing a checkpoint in DeepSpeed's own format (the files DeepSpeed 0.14.5
// writes for ZeRO stages 1-3), so DeepSpeed users can take zerotorch's
// checkpoints back: engine.load_checkpoint and zero_to_fp32 read them as
// their own. Key for key and type for type what DeepSpeed's engine
// (_save_checkpoint, _save_zero_checkpoint), stage_1_and_2.state_dict and
// stage3._rigid_state_dict write, checked against DeepSpeed's own files
// (tests/fixtures/deepspeed-0.14.5):
//
//  * model states (rank 0's at stages 1/2, every rank's at stage 3): module
//    (stages 1/2 the full state dict in the model dtype, stage 3 an empty
//    tensor per parameter, buffers in full; with its _metadata), param_shapes
//    (OrderedDicts of torch.Size per optimizer param group), shared_params
//    (rank 0's file only, as DeepSpeed walks the module on rank 0 only), the
//    counters, lr_scheduler, ds_config, ds_version, ...
//  * optim states per rank: stages 1/2 the group's flat fp32 partition (the
//    param group's parameters back to back, padded at the end to a multiple
//    of 2 x world, split evenly: group_paddings is the padding on the last
//    rank, whose fp32 partition is saved without it as DeepSpeed does), the
//    base optimizer's state laid out alike (whole), param_slice_mappings;
//    stage 3 each parameter partitioned on its own (ceil(numel / world)
//    elements per rank, the last rank padded), concatenated in param_shapes
//    order per sub-group (zero_optimization.sub_group_size, DeepSpeed's split).
//    That order must be the model's (named_parameters): DeepSpeed's loader
//    copies the partitions back by position. A checkpoint that does not
//    record it is refused (ParamGroups in the .cc).
//
// Streaming: every partition is produced tensor by tensor, in bounded chunks,
// while the file is written (module tensors one whole tensor at a time).
//
// Frozen parameters (a LoRA run's base): stages 1/2 whole in `module` (and,
// at stage 2, in frozen_param_shapes / frozen_param_fragments whole, as
// DeepSpeed's engine writes them from stage 2 on); stage 3 an empty
// placeholder in `module`, the shapes, and each rank's ceil(numel / world)
// piece (the last rank padded with zeros) in frozen_param_fragments.
//
// Not written (refused with Unimplemented, naming why): stage 0, bf16 at
// stage 1 (DeepSpeed trains it with its BF16_Optimizer,
// another file format), fp16 with a dynamic loss scale, optimizers other
// than Adam/AdamW (deepspeed_optimizer.h).
#pragma once

#include <string>

#include "absl/status/status.h"
#include "ckpt/format/dtype.h"
#include "ckpt/zero_checkpoint.h"

namespace zt::ckpt {

// The DeepSpeed version whose format is written (ds_version in every file).
inline constexpr char kDeepSpeedFormatVersion[] = "0.14.5";

// Whether a checkpoint of this kind can be written in DeepSpeed's format:
// the refusals above (Unimplemented, naming why), checked on what a
// checkpoint records or, before training, on what a run will save. `where`
// names it at the start of the message.
absl::Status CheckDeepSpeedWritable(const std::string& where, int stage, DType model_dtype, bool dynamic_loss_scale);

// Writes every file of `checkpoint` in DeepSpeed's format for `world` ranks
// into `folder` (an existing, empty tag folder). Writes no `latest`: the
// caller publishes the folder (checkpoint_convert.h).
absl::Status WriteDeepSpeedFiles(const ZeroCheckpoint& checkpoint, const std::string& folder, int world);

// DeepSpeed's universal checkpoint (what its checkpoint/ds_to_universal.py
// writes, loaded with "checkpoint": {"load_universal": true} at any world
// size) into `folder` (an existing, empty tag folder):
//   <tag>/mp_rank_00_model_states.pt (stages 1/2) or every rank's
//     zero_pp_rank_<r>_mp_rank_00_model_states.pt (stage 3), as above;
//   <tag>/zero/optimizer_state.pt: rank 0's optimizer dict (stages 1/2
//     without partitions and slice mappings) with param_groups on top;
//   <tag>/zero/<parameter name>/fp32.pt, exp_avg.pt, exp_avg_sq.pt: stages
//     1/2 {'param': the whole tensor in its shape, 'cat_dim': 0}, stage 3 the
//     whole tensor flat; stages 1/2 also step.pt (a 0-dim float tensor).
// One file per parameter and state, streamed. The same refusals as above,
// and frozen parameters (not written in the universal format yet).
// The caller writes `latest_universal` (checkpoint_convert.h).
absl::Status WriteUniversalFiles(const ZeroCheckpoint& checkpoint, const std::string& folder);

}  // namespace zt::ckpt
