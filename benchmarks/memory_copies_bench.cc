// What in-memory checkpoint copies (`--memory-copies`, ckpt/memory_copies.h)
// cost a save and save a restart's load, on a model whose checkpoint is
// >= 1 GiB: the save's stall with and without the copies, and a load
// (what a restarted rank does first) from the save directory with a cold
// page cache, with a warm one, and from the memory copies.
//
//   build/bin/zt_bench_memory_copies [--dir /tmp/zt_memory_copies_bench] [--params 75497472] [--loads 3]
//
// One process, one rank (stage 1 on the single-rank group), AdamW: 16 bytes
// of checkpoint per parameter. Two engines, one with copies, take turns.
// The copy is made in the background after the save: its time from the
// save's return to its manifest is printed, and the loads from memory run
// once it is there. A cold cache is made by dropping the
// checkpoint files' pages (posix_fadvise DONTNEED, after the save's fsync),
// so the load reads the disk as a restarted rank on a fresh node would. One
// node only: the neighbour exchange between nodes (a broadcast of the
// files over the link) is not in this number; the two-host test logs it
// (`memory copies of checkpoint ... kept in`).
#include <fcntl.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/median.h"
#include "benchmarks/results.h"
#include "benchmarks/save_bench_model.h"
#include "ckpt/memory_copies.h"
#include "cli/flags.h"
#include "comm/single_group.h"
#include "engine/engine.h"
#include "util/clock.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt {
namespace {

using Mlp = bench::SaveBenchMlp;

// Drops the page cache's copy of every file under `dir` (they are fsynced).
uint64_t DropCachedPages(const std::string& dir) {
  uint64_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator f(dir, ec), end; !ec && f != end; f.increment(ec)) {
    std::error_code e;
    if (!f->is_regular_file(e)) continue;
    const int fd = ::open(f->path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
    bytes += f->file_size(e);
  }
  return bytes;
}

struct Measured {
  std::vector<double> stall, cold, warm, memory, memory_again;
  std::vector<double> copy_done;  // from the save's return to its memory copy's manifest
  uint64_t checkpoint_bytes = 0;
};

// One engine of the comparison; `copies`: with memory copies.
struct Trainee {
  Mlp model{nullptr};
  std::unique_ptr<Engine> engine;
  torch::Tensor x;
  bool copies = false;
  Measured m;
  void Step() {
    engine->Backward(model->forward(x).pow(2).mean());
    engine->Step();
  }
};

absl::StatusOr<std::unique_ptr<Trainee>> MakeTrainee(int64_t width, int64_t depth, bool copies) {
  auto t = std::make_unique<Trainee>();
  torch::manual_seed(1);
  t->model = Mlp(width, depth);
  ZT_ASSIGN_OR_RETURN(t->engine,
                      Engine::Create(t->model, bench::SaveBenchConfig(), std::make_shared<comm::SingleGroup>()));
  t->x = torch::randn({32, width});
  t->copies = copies;
  for (int i = 0; i < 2; ++i) t->Step();
  return t;
}

// One save and the loads a restart would do after it.
absl::Status SaveAndLoad(Trainee& t, const std::string& dir, const std::string& copies_root, int round) {
  const std::string tag = absl::StrCat(t.copies ? "copies" : "plain", round);
  const auto t0 = SteadyClock::now();
  ZT_RETURN_IF_ERROR(t.engine->SaveCheckpoint(dir, tag));
  t.m.stall.push_back(Seconds(t0, SteadyClock::now()));
  t.m.checkpoint_bytes = DropCachedPages(dir + "/" + tag);
  auto timed_load = [&](std::vector<double>* into) -> absl::Status {
    const auto l0 = SteadyClock::now();
    ZT_RETURN_IF_ERROR(t.engine->LoadCheckpoint(dir).status());
    into->push_back(Seconds(l0, SteadyClock::now()));
    return absl::OkStatus();
  };
  if (t.copies) {
    // The copy is made in the background after the save; the restart
    // measured here comes once it is there (its manifest is written last).
    const std::string manifest = copies_root + "/rank0/current/manifest";
    while (ReadSmallFile(manifest).value_or("").find("tag " + tag + "\n") == std::string::npos) {
      if (Seconds(t0, SteadyClock::now()) > 600) return absl::DeadlineExceededError("no memory copy after 600 s");
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    t.m.copy_done.push_back(Seconds(t0, SteadyClock::now()) - t.m.stall.back());
    ZT_RETURN_IF_ERROR(timed_load(&t.m.memory));
    ZT_RETURN_IF_ERROR(timed_load(&t.m.memory_again));
  } else {
    ZT_RETURN_IF_ERROR(timed_load(&t.m.cold));  // the disk, nothing cached
    ZT_RETURN_IF_ERROR(timed_load(&t.m.warm));  // the same files, now in the page cache
  }
  std::error_code ec;
  std::filesystem::remove_all(dir + "/" + tag, ec);  // one checkpoint on disk at a time
  t.Step();
  return absl::OkStatus();
}

// Both engines exist side by side and take turns (the order alternating
// round by round), so drift in the machine's speed over the run falls on
// both. An engine reads ZT_MEMORY_COPIES_DIR at its first save.
absl::Status Run(const std::string& copies, int64_t width, int64_t depth, int loads, const std::string& dir,
                 Measured* plain, Measured* with_copies) {
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Trainee> a, MakeTrainee(width, depth, false));
  ZT_ASSIGN_OR_RETURN(std::unique_ptr<Trainee> b, MakeTrainee(width, depth, true));
  for (int round = 0; round < loads; ++round) {
    const std::vector<Trainee*> order =
        round % 2 == 0 ? std::vector<Trainee*>{a.get(), b.get()} : std::vector<Trainee*>{b.get(), a.get()};
    for (Trainee* t : order) {
      if (t->copies) {
        ::setenv(ckpt::kMemoryCopiesEnv, copies.c_str(), 1);
      } else {
        ::unsetenv(ckpt::kMemoryCopiesEnv);
      }
      ZT_RETURN_IF_ERROR(SaveAndLoad(*t, dir, copies, round));
    }
  }
  ::unsetenv(ckpt::kMemoryCopiesEnv);
  *plain = a->m;
  *with_copies = b->m;
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  cli::Flags flags("zt_bench_memory_copies");
  flags.String("dir", "/tmp/zt_memory_copies_bench", "scratch directory for the checkpoints (removed afterwards)");
  flags.Int("params", 72 << 20, "model parameters (16 bytes of checkpoint each; the default: a 1.06 GiB checkpoint)");
  flags.Int("loads", 3, "saves and loads per mode");
  flags.Int("threads", 2, "intra-op threads");
  std::vector<std::string> args(argv + 1, argv + argc);
  if (std::optional<int> done = flags.ParseCommandLine(args, "[flags]", "")) {
    return *done == 0 ? absl::OkStatus() : absl::InvalidArgumentError("bad flags");
  }
  const int64_t width = 2048;
  const int64_t depth = std::max<int64_t>(1, flags.GetInt("params") / (width * width + width));
  const int loads = static_cast<int>(std::max<long long>(1, flags.GetInt("loads")));
  const std::string dir = flags.GetString("dir");
  const std::string copies = absl::StrCat("/dev/shm/zt_bench_memory_copies_", ::getpid());
  at::set_num_threads(static_cast<int>(flags.GetInt("threads")));
  SetMinLogLevel(LogLevel::kWarning);
  ZT_RETURN_IF_ERROR(MakeDirs(dir));
  bench::ResultLog results("memory_copies", "", std::cout);
  results.Machine(SystemInfoLine());
  std::cout << SystemInfoLine() << "\n";
  std::cout << absl::StrFormat(
      "model: %d x Linear(%d, %d), %.1f M parameters; AdamW, stage 1, 1 rank, %d threads; two engines, one with "
      "memory copies, taking turns\n",
      depth, width, width, static_cast<double>(depth * (width * width + width)) / 1e6, at::get_num_threads());
  Measured disk, memory;
  absl::Status st = Run(copies, width, depth, loads, dir, &disk, &memory);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::remove_all(copies, ec);
  ZT_RETURN_IF_ERROR(st);

  const double stall = bench::Median(disk.stall), stall_copies = bench::Median(memory.stall);
  const double cold = bench::Median(disk.cold), warm = bench::Median(disk.warm);
  const double mem = bench::Median(memory.memory), mem_again = bench::Median(memory.memory_again);
  const double copy_done = bench::Median(memory.copy_done);
  std::cout << absl::StrFormat("checkpoint: %s per save\n", HumanBytes(static_cast<double>(disk.checkpoint_bytes)));
  auto list = [](const std::vector<double>& v) {
    std::string out;
    for (double x : v) absl::StrAppend(&out, out.empty() ? "" : " ", absl::StrFormat("%.2f", x));
    return out;
  };
  std::cout << "each save, in turn order: without copies " << list(disk.stall) << "; with copies " << list(memory.stall)
            << "\n";
  std::cout << absl::StrFormat(
      "save: %.3f s without memory copies, %.3f s with them (medians of %d); the copy done in the background "
      "%.3f s after the save returned\n",
      stall, stall_copies, loads, copy_done);
  std::cout << absl::StrFormat(
      "load: %.3f s from the disk with a cold page cache, %.3f s with a warm one; %.3f s from the memory copies, "
      "%.3f s the second time\n",
      cold, warm, mem, mem_again);
  bench::ResultRow row;
  row.Set("checkpoint_bytes", static_cast<int64_t>(disk.checkpoint_bytes))
      .Set("save_sec", stall)
      .Set("save_with_copies_sec", stall_copies)
      .Set("copy_in_background_sec", copy_done)
      .Set("load_cold_disk_sec", cold)
      .Set("load_warm_disk_sec", warm)
      .Set("load_memory_sec", mem)
      .Set("load_memory_again_sec", mem_again);
  results.Add(row);
  const std::string summary = absl::StrFormat(
      "a restart's load from memory copies %.2fx the load from a cold disk (%.2fx a warm page cache's); a save "
      "with copies %.2fx one without (the copy in the background: %.2f s); %s checkpoint",
      mem / cold, mem / warm, stall_copies / stall, copy_done, HumanBytes(static_cast<double>(disk.checkpoint_bytes)));
  return results.Finish(summary);
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  const absl::Status st = zt::Main(argc, argv);
  if (!st.ok()) {
    std::fprintf(stderr, "zt_bench_memory_copies: %s\n", std::string(st.message()).c_str());
    return 1;
  }
  return 0;
}
