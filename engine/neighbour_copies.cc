// Implementation of engine/neighbour_copies.h.
#include "engine/neighbour_copies.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/unique_fd.h"

namespace zt {
namespace {

constexpr int64_t kChunkBytes = 64ll << 20;  // one broadcast's payload at most
constexpr int64_t kMaxFiles = 4096;
constexpr int64_t kMaxNameBytes = 1 << 20;

absl::Status Broadcast(comm::ProcessGroup& group, const at::Tensor& t, int root_in_group) {
  return group.Broadcast(t, root_in_group)->Wait();
}

int GroupRankOf(const comm::ProcessGroup& group, int world_rank) {
  const std::vector<int> ranks = group.world_ranks();
  return static_cast<int>(std::find(ranks.begin(), ranks.end(), world_rank) - ranks.begin());
}

}  // namespace

NeighbourCopies::NeighbourCopies(comm::ProcessGroup& world, int local_world, ckpt::MemoryCopies memory)
    : world_(world), local_world_(std::max(1, local_world)), memory_(std::move(memory)) {}

std::vector<int> NeighbourCopies::NodeRanks() const {
  const int node = world_.rank() / local_world_;
  std::vector<int> ranks;
  for (int r = node * local_world_; r < (node + 1) * local_world_; ++r) ranks.push_back(r);
  return ranks;
}

bool NeighbourCopies::several_nodes() const {
  return world_.size() > local_world_ && world_.size() % local_world_ == 0;
}

absl::Status NeighbourCopies::MakePairs() {
  if (broken_) return absl::FailedPreconditionError("memory copies are off: their pair groups could not be made");
  if (pairs_made_) return absl::OkStatus();
  // Every rank makes every pair's group, in the same order (NewSubGroup's
  // contract: the calls number the groups), even after one failed here, so
  // the numbering stays in step; a rank keeps the (at most two) it is in.
  const int me = world_.rank();
  absl::Status made;
  for (int r = 0; r < world_.size(); ++r) {
    const std::pair<int, int> key(std::min(r, Next(r)), std::max(r, Next(r)));
    if (pairs_.count(key) > 0) continue;
    absl::StatusOr<std::shared_ptr<comm::ProcessGroup>> g = world_.NewSubGroup({key.first, key.second});
    if (!g.ok()) {
      if (made.ok()) made = g.status();
      pairs_[key] = nullptr;
      continue;
    }
    if (me != key.first && me != key.second) g->reset();
    pairs_[key] = *std::move(g);
  }
  pairs_made_ = true;
  // Whether every rank has its pairs, agreed: where one has not, copies
  // stay off on every rank for the rest of the run (one decision for all,
  // so no rank waits in a transfer its pair will never start).
  at::Tensor failed = at::full({1}, made.ok() ? 0 : 1, at::kLong);
  absl::Status agreed = world_.AllReduce(failed, comm::ReduceOp::kMax)->Wait();
  if (!agreed.ok() || failed.item<int64_t>() != 0) {
    broken_ = true;
    return absl::FailedPreconditionError(
        absl::StrCat("memory copies are off for this run: the pair groups could not be made",
                     made.ok() ? (agreed.ok() ? " on another rank" : absl::StrCat(" (", agreed.message(), ")"))
                               : absl::StrCat(" (", made.message(), ")")));
  }
  return absl::OkStatus();
}

absl::StatusOr<comm::ProcessGroup*> NeighbourCopies::PairOf(int s) {
  const auto it = pairs_.find({std::min(s, Next(s)), std::max(s, Next(s))});
  if (it == pairs_.end() || it->second == nullptr) {
    return absl::InternalError(
        absl::StrCat("rank ", world_.rank(), " is not in the pair of ranks ", s, " and ", Next(s)));
  }
  return it->second.get();
}

absl::Status NeighbourCopies::Send(comm::ProcessGroup& group, int root,
                                   const std::vector<std::pair<std::string, std::string>>& files) {
  const int g_root = GroupRankOf(group, root);
  // What can be sent is settled before the header: files that cannot be
  // opened are left out (the receiver's copy then lacks them).
  std::vector<UniqueFd> fds;
  std::vector<int64_t> sizes;
  std::string names;
  absl::Status problem;
  for (const auto& [name, path] : files) {
    if (!ckpt::IsCopyFileName(name)) {
      problem = absl::InvalidArgumentError(absl::StrCat("memory copies: '", name, "' is not a plain file name"));
      fds.clear();
      sizes.clear();
      names.clear();
      break;
    }
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    struct stat st {};
    if (!fd.valid() || ::fstat(fd.get(), &st) != 0) {
      problem = ErrnoError(
          errno, absl::StrCat("memory copies: open '", path, "' to send it to rank ", group.world_ranks()[1 - g_root]));
      fds.clear();
      sizes.clear();
      names.clear();
      break;
    }
    fds.push_back(std::move(fd));
    sizes.push_back(st.st_size);
    absl::StrAppend(&names, name, "\n");
  }
  at::Tensor header = at::tensor({static_cast<int64_t>(sizes.size()), static_cast<int64_t>(names.size())}, at::kLong);
  ZT_RETURN_IF_ERROR(Broadcast(group, header, g_root));
  if (!sizes.empty()) {
    at::Tensor s = at::tensor(sizes, at::kLong);
    at::Tensor n = at::empty({static_cast<int64_t>(names.size())}, at::kByte);
    std::memcpy(n.data_ptr(), names.data(), names.size());
    ZT_RETURN_IF_ERROR(Broadcast(group, s, g_root));
    ZT_RETURN_IF_ERROR(Broadcast(group, n, g_root));
  }
  at::Tensor buffer;
  for (size_t i = 0; i < fds.size(); ++i) {
    for (int64_t off = 0; off < sizes[i]; off += kChunkBytes) {
      const int64_t len = std::min(kChunkBytes, sizes[i] - off);
      if (!buffer.defined()) buffer = at::empty({kChunkBytes}, at::kByte);
      at::Tensor chunk = buffer.narrow(0, 0, len);
      char* p = static_cast<char*>(chunk.data_ptr());
      int64_t got = 0;
      while (problem.ok() && got < len) {
        const ssize_t n = ::pread(fds[i].get(), p + got, static_cast<size_t>(len - got), off + got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          problem = n < 0 ? ErrnoError(errno, absl::StrCat("memory copies: read '", files[i].second, "'"))
                          : absl::DataLossError(
                                absl::StrCat("memory copies: '", files[i].second, "' shrank while it was sent"));
          break;
        }
        got += n;
      }
      // The receiver expects every chunk: a failed read still sends one
      // (the trailer tells it to drop the copy).
      ZT_RETURN_IF_ERROR(Broadcast(group, chunk, g_root));
    }
  }
  at::Tensor trailer = at::tensor({static_cast<int64_t>(problem.ok() ? 1 : 0)}, at::kLong);
  ZT_RETURN_IF_ERROR(Broadcast(group, trailer, g_root));
  return problem;
}

absl::StatusOr<std::vector<std::string>> NeighbourCopies::Receive(comm::ProcessGroup& group, int root) {
  const int g_root = GroupRankOf(group, root);
  at::Tensor header = at::zeros({2}, at::kLong);
  ZT_RETURN_IF_ERROR(Broadcast(group, header, g_root));
  const int64_t count = header[0].item<int64_t>(), name_bytes = header[1].item<int64_t>();
  if (count < 0 || count > kMaxFiles || name_bytes < 0 || name_bytes > kMaxNameBytes) {
    return absl::DataLossError(absl::StrCat("memory copies: rank ", root, " announced ", count, " files with ",
                                            name_bytes, " bytes of names; the transfer is out of step"));
  }
  std::vector<std::string> names;
  std::vector<int64_t> sizes;
  if (count > 0) {
    at::Tensor s = at::zeros({count}, at::kLong);
    at::Tensor n = at::zeros({name_bytes}, at::kByte);
    ZT_RETURN_IF_ERROR(Broadcast(group, s, g_root));
    ZT_RETURN_IF_ERROR(Broadcast(group, n, g_root));
    sizes.assign(s.data_ptr<int64_t>(), s.data_ptr<int64_t>() + count);
    const std::string text(static_cast<const char*>(n.data_ptr()), static_cast<size_t>(name_bytes));
    names = absl::StrSplit(text, '\n', absl::SkipEmpty());
  }
  absl::Status problem;
  if (static_cast<int64_t>(names.size()) != count) {
    // The sizes still say what follows: received, then dropped.
    problem = absl::DataLossError(
        absl::StrCat("memory copies: rank ", root, " sent ", names.size(), " names for ", count, " files"));
    names.assign(static_cast<size_t>(count), std::string());
  }
  for (int64_t size : sizes) {
    if (size < 0) {
      return absl::DataLossError(absl::StrCat("memory copies: rank ", root,
                                              " sent a negative size; the transfer is "
                                              "out of step"));
    }
  }
  at::Tensor buffer;
  for (int64_t i = 0; i < count; ++i) {
    const std::string& name = names[static_cast<size_t>(i)];
    const std::string path = memory_.Incoming(name);
    UniqueFd out;
    if (problem.ok() && !ckpt::IsCopyFileName(name)) {
      problem = absl::DataLossError(
          absl::StrCat("memory copies: rank ", root, " sent a file named '", name, "', not a plain file name"));
    }
    if (problem.ok()) {
      out.Reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
      if (!out.valid()) problem = ErrnoError(errno, absl::StrCat("memory copies: create '", path, "'"));
    }
    const int64_t size = sizes[static_cast<size_t>(i)];
    for (int64_t off = 0; off < size; off += kChunkBytes) {
      const int64_t len = std::min(kChunkBytes, size - off);
      if (!buffer.defined()) buffer = at::empty({kChunkBytes}, at::kByte);
      at::Tensor chunk = buffer.narrow(0, 0, len);
      ZT_RETURN_IF_ERROR(Broadcast(group, chunk, g_root));
      const char* p = static_cast<const char*>(chunk.data_ptr());
      int64_t put = 0;
      while (problem.ok() && put < len) {
        const ssize_t n = ::pwrite(out.get(), p + put, static_cast<size_t>(len - put), off + put);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          problem = ErrnoError(n < 0 ? errno : ENOSPC, absl::StrCat("memory copies: write '", path, "'"));
          break;
        }
        put += n;
      }
    }
    if (out.valid() && ::close(out.Release()) != 0 && problem.ok()) {
      problem = ErrnoError(errno, absl::StrCat("memory copies: close '", path, "'"));
    }
  }
  at::Tensor trailer = at::zeros({1}, at::kLong);
  ZT_RETURN_IF_ERROR(Broadcast(group, trailer, g_root));
  if (problem.ok() && trailer[0].item<int64_t>() != 1) {
    problem = absl::DataLossError(absl::StrCat("memory copies: rank ", root, " could not read all it sent"));
  }
  if (!problem.ok()) return problem;
  return names;
}

NeighbourCopies::~NeighbourCopies() { Wait().IgnoreError(); }

absl::Status NeighbourCopies::Wait() {
  if (!worker_.joinable()) return absl::OkStatus();
  worker_.join();
  return std::exchange(worker_status_, absl::OkStatus());
}

void NeighbourCopies::BeforeSave(const std::string& tag) {
  Wait().IgnoreError();  // reported by the worker itself
  memory_.Forget(tag);
  if (world_.rank() % local_world_ == 0) {
    // Copies of `tag` in folders no rank of this node writes now would
    // outlive this save as an older save of the same tag: dropped too.
    memory_.ForgetOthers(tag, NodeRanks());
  }
}

absl::Status NeighbourCopies::KeepSaved(const std::string& folder, const std::string& dir, const std::string& tag,
                                        const std::vector<std::string>& own) {
  Wait().IgnoreError();
  // The pairs' groups need every rank (the world group), so they are made
  // here; the copy and the exchange then use only this rank's folder and
  // its pair groups, off the training thread.
  if (several_nodes()) ZT_RETURN_IF_ERROR(MakePairs());
  if (world_.rank() % local_world_ == 0) {
    // Folders no rank of this node writes now (another numbering, before an
    // elastic restart) hold tags `latest` has moved past.
    memory_.RemoveRanksExcept(NodeRanks());
  }
  worker_ = std::thread([this, folder, dir, tag, own] {
    const auto started = std::chrono::steady_clock::now();
    try {
      worker_status_ = KeepSavedNow(folder, dir, tag, own);
    } catch (const std::exception& e) {  // an allocation, say: never std::terminate for a copy
      worker_status_ = absl::InternalError(absl::StrCat("memory copies: ", e.what()));
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (!worker_status_.ok()) {
      ZT_LOG(WARNING) << "checkpoint '" << folder << "' is saved, but this rank keeps no complete memory copy of it ("
                      << worker_status_.message() << "); a restart reads what is missing from the disk";
    } else if (world_.rank() == 0) {
      ZT_LOG(INFO) << "memory copies of checkpoint '" << folder << "' kept in " << absl::StrFormat("%.3f", seconds)
                   << " s" << (several_nodes() ? " (this node's files, and the previous node's)" : "");
    }
  });
  return absl::OkStatus();
}

absl::Status NeighbourCopies::KeepSavedNow(const std::string& folder, const std::string& dir, const std::string& tag,
                                           const std::vector<std::string>& own) {
  const int me = world_.rank();
  ckpt::HeldCopy held;
  held.dir = dir;
  held.tag = tag;
  held.world_size = world_.size();
  held.local_world_size = local_world_;
  absl::Status local = memory_.Begin();
  for (const std::string& name : own) {
    if (!local.ok()) break;
    local = ckpt::CopyWholeFile(JoinPath(folder, name), memory_.Incoming(name));
  }
  if (local.ok()) held.own = own;
  if (several_nodes()) {
    std::vector<std::pair<std::string, std::string>> mine;
    for (const std::string& name : held.own) mine.emplace_back(name, memory_.Incoming(name));
    // This rank sends as sender `me` and receives as the pair of sender
    // Prev(me): in the order of the sender, the same order on every rank.
    const int prev = Prev(me);
    for (const int sender : me < prev ? std::vector<int>{me, prev} : std::vector<int>{prev, me}) {
      ZT_ASSIGN_OR_RETURN(comm::ProcessGroup * pair, PairOf(sender));
      if (sender == me) {
        absl::Status sent = Send(*pair, me, mine);
        if (local.ok()) local = sent;
      } else {
        absl::StatusOr<std::vector<std::string>> got = Receive(*pair, prev);
        if (got.ok()) {
          held.neighbour = prev;
          held.neighbour_files = *std::move(got);
        } else if (local.ok()) {
          local = got.status();
        }
      }
    }
  }
  // Without its own files the copy is not made at all: a copy that claims
  // the tag must hold them (FetchMissing trusts it).
  if (held.own.size() != own.size()) return local;
  absl::Status promoted = memory_.Promote(held);
  return local.ok() ? promoted : local;
}

absl::StatusOr<int> NeighbourCopies::FetchMissing(const std::string& dir, const std::string& tag) {
  Wait().IgnoreError();  // a copy still being made is part of what this load finds
  if (!several_nodes() || broken_) return 0;
  const int world = world_.size(), me = world_.rank();
  // Facts of every rank: [r] its own copy of `tag` is here; [world + r] it
  // holds Prev(r)'s files of `tag` for this same world layout.
  std::optional<ckpt::HeldCopy> held = memory_.Held();
  const bool of_tag = held && !tag.empty() && held->tag == tag && held->dir == dir;
  at::Tensor facts = at::zeros({2 * world}, at::kLong);
  facts[me] = of_tag ? 1 : 0;
  facts[world + me] = of_tag && held->world_size == world && held->local_world_size == local_world_ &&
                              held->neighbour == Prev(me) && !held->neighbour_files.empty()
                          ? 1
                          : 0;
  ZT_RETURN_IF_ERROR(world_.AllReduce(facts, comm::ReduceOp::kSum)->Wait());
  const int64_t* f = facts.data_ptr<int64_t>();
  bool any = false;
  for (int s = 0; s < world; ++s) any = any || (f[s] == 0 && f[world + Next(s)] != 0);
  if (!any) return 0;
  ZT_RETURN_IF_ERROR(MakePairs());  // every rank, before any transfer
  int received = 0;
  absl::Status local;
  for (int s = 0; s < world; ++s) {
    if (f[s] != 0 || f[world + Next(s)] == 0) continue;  // has its own, or nobody holds it
    if (me != s && me != Next(s)) continue;
    ZT_ASSIGN_OR_RETURN(comm::ProcessGroup * pair, PairOf(s));
    if (me == Next(s)) {
      // s's files, then this rank's own: on two nodes the replaced node
      // then holds every file again, and the restart reads no disk.
      for (const std::vector<std::string>* names : {&held->neighbour_files, &held->own}) {
        std::vector<std::pair<std::string, std::string>> files;
        for (const std::string& name : *names) files.emplace_back(name, JoinPath(held->folder, name));
        absl::Status sent = Send(*pair, me, files);
        if (local.ok()) local = sent;
      }
    } else {
      // A failed Begin still receives (into nothing): the sender sends anyway.
      absl::Status begun = memory_.Begin();
      absl::StatusOr<std::vector<std::string>> got = Receive(*pair, Next(s));
      absl::StatusOr<std::vector<std::string>> theirs = Receive(*pair, Next(s));
      if (got.ok() && !begun.ok()) got = begun;
      if (!got.ok()) {
        if (local.ok()) local = got.status();
        continue;
      }
      ckpt::HeldCopy mine;
      mine.dir = dir;
      mine.tag = tag;
      mine.world_size = world;
      mine.local_world_size = local_world_;
      mine.own = *got;
      if (theirs.ok()) {
        mine.neighbour = Next(s);
        mine.neighbour_files = *std::move(theirs);
      }
      // (A rank without its own copy holds none of the tag, so it is never
      // also the sender of another transfer here.)
      absl::Status promoted = memory_.Promote(mine);
      if (promoted.ok()) {
        received = static_cast<int>(mine.own.size() + mine.neighbour_files.size());
      } else if (local.ok()) {
        local = promoted;
      }
    }
  }
  // The ranks of a node read each other's copies: none looks before every
  // fetched copy is in place.
  ZT_RETURN_IF_ERROR(world_.Barrier()->Wait());
  if (!local.ok()) return local;
  return received;
}

}  // namespace zt
