// What a ZeRO checkpoint's files hold and where, so any parameter's values
// can be found at any world size: the flat buffers ("groups") the engine
// trained with, each parameter's place in them, and the rule that split each
// group among the ranks that saved it. Every model-states file carries it
// under "zt_layout" (next to DeepSpeed's own keys, which say less).
//
// Pure data and arithmetic, no LibTorch: `zt ckpt` tools use it too.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "ckpt/format/dtype.h"
#include "ckpt/format/value.h"

namespace zt::ckpt {

struct SavedParam {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // first element in the group's flat buffer
  int64_t numel = 0;
};

struct SavedGroup {
  std::vector<SavedParam> params;  // ascending offsets
  int64_t numel = 0;               // sum of the parameters
  int64_t padded_numel = 0;        // the flat buffer's length as trained
};

// How a group's padded buffer was split among the saving ranks:
//  kEven: padded_numel is a multiple of 2N and rank r saved
//         [r * padded/N, (r+1) * padded/N) (stages 1-3, and how we re-pad for M ranks);
//  kCeil: rank r saved [ceil(P/N) * r, min(ceil(P/N) * (r+1), P)) of P = padded_numel
//         (stage 0, whose buffers are not sharded while training).
enum class PartitionRule { kEven, kCeil };

struct SavedLayout {
  int stage = 0;
  int world_size = 1;
  DType model_dtype = DType::kFloat32;
  PartitionRule rule = PartitionRule::kEven;
  std::vector<SavedGroup> groups;             // trainable: fp32 master + optimizer state in the optim files
  std::vector<SavedGroup> frozen;             // stage 3 frozen chunks: fragments in the model-states files
  std::map<std::string, std::string> shared;  // tied: alias name -> the name it is stored under
  // The optimizer's param groups, each its trainable parameters' names in the
  // model's parameter order: what DeepSpeed's param_shapes record, and what a
  // DeepSpeed checkpoint must be written in (deepspeed_writer.h). Filled when
  // reading DeepSpeed's files and kept through conversions ("optimizer_groups"
  // in zt_layout, written only when set); empty in checkpoints zerotorch's
  // engine writes (one param group, whose order the writer derives).
  std::vector<std::vector<std::string>> optimizer_groups;
  // The hyper-parameters each of optimizer_groups was trained with, where a
  // checkpoint records them per group (DeepSpeed's files: the base
  // optimizer's param_groups, which need not agree with each other or with
  // ds_config; kept through conversions as "optimizer_group_settings").
  // Empty when not recorded: then the checkpoint's ds_config holds them.
  struct GroupSettings {
    double lr = 0.0;
    double weight_decay = 0.0;
    double eps = 0.0;
    std::vector<double> betas;  // empty for optimizers without betas
    bool operator==(const GroupSettings& o) const {
      return lr == o.lr && weight_decay == o.weight_decay && eps == o.eps && betas == o.betas;
    }
  };
  std::vector<GroupSettings> optimizer_group_settings;

  // Element range [begin, end) of group buffer `padded_numel` that `rank`
  // saved under this layout's rule and world size.
  std::pair<int64_t, int64_t> Range(int64_t padded_numel, int rank) const;

  // Where a trainable (frozen) parameter is: (group, index in it), or nullopt.
  std::optional<std::pair<size_t, size_t>> FindTrainable(const std::string& name) const;
  std::optional<std::pair<size_t, size_t>> FindFrozen(const std::string& name) const;

  int64_t trainable_numel() const;
  int64_t frozen_numel() const;

  Value ToValue() const;
  // Errors name the key that is missing or malformed.
  static absl::StatusOr<SavedLayout> FromValue(const Value& v);
};

}  // namespace zt::ckpt
