// Implementation of ckpt/checkpoint_convert.h.
#include "ckpt/checkpoint_convert.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "ckpt/deepspeed/writer.h"
#include "ckpt/reshard.h"
#include "util/file_io.h"
#include "util/publish_folder.h"
#include "util/status.h"

namespace zt::ckpt {
namespace {

namespace fs = std::filesystem;

// `dst` must be absent or an empty directory (any directory with
// `add_tag`); it exists afterwards.
absl::Status PrepareDestination(const std::string& dst, bool add_tag) {
  std::error_code ec;
  const fs::file_status st = fs::status(dst, ec);
  if (fs::exists(st)) {
    if (!fs::is_directory(st)) {
      return absl::InvalidArgumentError(absl::StrCat("destination '", dst, "' exists and is not a directory"));
    }
    if (!add_tag && (!fs::is_empty(dst, ec) || ec)) {
      return absl::InvalidArgumentError(absl::StrCat("destination '", dst,
                                                     "' exists and is not empty; converting never writes over a "
                                                     "checkpoint: choose a new or empty directory"));
    }
    return absl::OkStatus();
  }
  return MakeDirs(dst);
}

absl::Status CheckTag(const std::string& tag) {
  if (tag.empty() || tag == "." || tag == ".." || tag[0] == '.' || tag.find('/') != std::string::npos ||
      tag.find('\n') != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("--tag '", tag, "' is not a folder name (no '/', no newline, not starting with '.')"));
  }
  return absl::OkStatus();
}

// Writes the checkpoint's files for `tag` into `staging`; returns the folder holding them.
absl::StatusOr<std::string> WriteStaged(const ZeroCheckpoint& source, const std::string& staging,
                                        const ConvertOptions& options, int world) {
  if (options.to == CheckpointFormat::kZerotorch) {
    // Reshard writes <staging>/<source tag>/ and <staging>/latest (not published).
    ZT_RETURN_IF_ERROR(Reshard(source, staging, world));
    return JoinPath(staging, source.tag());
  }
  const std::string folder = JoinPath(staging, "files");
  ZT_RETURN_IF_ERROR(MakeDirs(folder));
  if (options.to == CheckpointFormat::kUniversal) {
    ZT_RETURN_IF_ERROR(WriteUniversalFiles(source, folder));
  } else {
    ZT_RETURN_IF_ERROR(WriteDeepSpeedFiles(source, folder, world));
  }
  return folder;
}

}  // namespace

absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(const std::string& name) {
  if (name == "zerotorch") return CheckpointFormat::kZerotorch;
  if (name == "deepspeed") return CheckpointFormat::kDeepSpeed;
  if (name == "universal") return CheckpointFormat::kUniversal;
  return absl::InvalidArgumentError(
      absl::StrCat("--to must be 'deepspeed', 'universal' or 'zerotorch', got '", name, "'"));
}

absl::Status ConvertCheckpoint(const ZeroCheckpoint& source, const std::string& dst, const ConvertOptions& options) {
  const int world = options.world_size == 0 ? source.layout().world_size : options.world_size;
  if (world < 1) {
    return absl::InvalidArgumentError(absl::StrCat("--world-size must be a positive integer, got ", world));
  }
  if (options.to == CheckpointFormat::kUniversal && options.world_size != 0) {
    return absl::InvalidArgumentError(
        "--world-size does not apply to --to universal: a universal checkpoint holds every parameter whole and "
        "loads at any world size");
  }
  const std::string tag = options.tag.empty() ? source.tag() : options.tag;
  ZT_RETURN_IF_ERROR(CheckTag(tag));
  // Not inside the source's tag folder: a copy nested there is deleted with
  // it the next time that tag is saved again. (Beside the tags, in the
  // save dir, is where --save-format deepspeed keeps its copy.)
  {
    std::error_code ec;
    const fs::path src = fs::weakly_canonical(fs::path(source.dir()) / source.tag(), ec);
    const fs::path to = fs::weakly_canonical(dst, ec);
    if (!ec) {
      const auto [s_end, t_at] = std::mismatch(src.begin(), src.end(), to.begin(), to.end());
      if (s_end == src.end() && t_at != to.end()) {
        return absl::InvalidArgumentError(absl::StrCat("destination '", dst, "' lies inside the source checkpoint '",
                                                       src.string(), "': choose a directory outside it"));
      }
    }
  }
  ZT_RETURN_IF_ERROR(PrepareDestination(dst, options.add_tag));

  // Hidden until complete: nothing under dst looks like a checkpoint before the rename.
  const std::string staging = JoinPath(dst, absl::StrCat(".zt-convert.", ::getpid()));
  ZT_RETURN_IF_ERROR(MakeDirs(staging));
  absl::Status st = [&]() -> absl::Status {
    ZT_ASSIGN_OR_RETURN(const std::string folder, WriteStaged(source, staging, options, world));
    // Every record the conversion read in pieces is checked before the files are published.
    ZT_RETURN_IF_ERROR(source.VerifyRead());
    // An earlier copy of the same tag (a resumed run saving the same step
    // again) steps aside into the staging folder, removed below with it.
    return PublishFolder(folder, JoinPath(dst, tag), JoinPath(staging, "replaced"));
  }();
  std::error_code ec;
  fs::remove_all(staging, ec);  // best effort: what is left of the staging folder
  if (!st.ok()) return st;
  const char* latest = options.to == CheckpointFormat::kUniversal ? "latest_universal" : "latest";
  return WriteFileAtomically(JoinPath(dst, latest), tag + "\n");
}

}  // namespace zt::ckpt
