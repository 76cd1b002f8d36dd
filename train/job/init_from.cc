// Implementation of train/job/init_from.h.
#include "train/job/init_from.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "ckpt/format/llama2c.h"
#include "train/job/job_check.h"
#include "util/file_io.h"
#include "util/status.h"
#include "util/system_info.h"

namespace zt::train {
namespace {

namespace fs = std::filesystem;

std::string ConvertedDir(const TrainOptions& o) { return ResolveOutputPaths(o).output_dir + "/init-from-llama2c"; }

// What identifies the source file: its absolute path, size and mtime.
absl::StatusOr<std::string> SourceStamp(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("--init-from ", path, " cannot be read"));
  }
  nlohmann::ordered_json j;
  std::error_code ec;
  j["source"] = fs::absolute(path, ec).lexically_normal().string();
  j["size"] = static_cast<long long>(st.st_size);
  j["mtime_ns"] = static_cast<long long>(st.st_mtim.tv_sec) * 1000000000LL + st.st_mtim.tv_nsec;
  return j.dump(2) + "\n";
}

bool StampMatches(const std::string& dir, const std::string& stamp) {
  absl::StatusOr<std::string> have = ReadSmallFile(dir + "/zt_source.json");
  return have.ok() && *have == stamp && fs::exists(dir + "/model.safetensors") && fs::exists(dir + "/config.json");
}

}  // namespace

bool InitFromIsLlama2c(const TrainOptions& o) { return !o.init_from.empty() && ckpt::LooksLikeLlama2c(o.init_from); }

std::string InitFromWeights(const TrainOptions& o) { return InitFromIsLlama2c(o) ? ConvertedDir(o) : o.init_from; }

absl::StatusOr<bool> PrepareInitFrom(const TrainOptions& o) {
  if (!InitFromIsLlama2c(o)) return false;
  const std::string dir = ConvertedDir(o);
  ZT_ASSIGN_OR_RETURN(const std::string stamp, SourceStamp(o.init_from));
  if (StampMatches(dir, stamp)) return false;
  ZT_ASSIGN_OR_RETURN(const ckpt::Llama2cModel m, ckpt::OpenLlama2c(o.init_from));
  const std::string tmp = absl::StrCat(dir, ".tmp-", HostName("host"), "-", ::getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  absl::Status st = ckpt::WriteLlama2cAsHf(m, tmp);
  if (st.ok()) st = WriteFileAtomically(tmp + "/zt_source.json", stamp);
  if (!st.ok()) {
    fs::remove_all(tmp, ec);
    return absl::Status(st.code(),
                        absl::StrCat("converting --init-from ", o.init_from, " into ", dir, ": ", st.message()));
  }
  // A stale folder goes first; a peer that renamed its own copy in the
  // meantime wins (rename onto a non-empty folder fails), and that copy is
  // the same conversion.
  if (fs::exists(dir, ec) && !StampMatches(dir, stamp)) fs::remove_all(dir, ec);
  fs::rename(tmp, dir, ec);
  if (ec) {
    fs::remove_all(tmp, ec);
    if (!StampMatches(dir, stamp)) {
      return absl::InternalError(absl::StrCat("converting --init-from ", o.init_from, ": cannot move the folder to ",
                                              dir, " (", ec.message(), ")"));
    }
  }
  return true;
}

}  // namespace zt::train
