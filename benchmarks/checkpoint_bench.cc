// Checkpoint throughput against the disk: save, load and consolidate a model
// of --params parameters (default 256M: a 1 GiB fp32 model, ~4 GiB of
// checkpoint with Adam's state), and the same directory's raw write and read
// bandwidth measured in the same run on a file of the same size (and an
// overlapped raw copy: the reference for a tool that reads and writes
// every byte once). Reads start
// cold: every file is dropped from the page cache first (posix_fadvise).
// Consolidation and conversion run `zt ckpt consolidate|convert` as child
// processes; their bandwidth uses the seconds each command reports for its
// work (open to last fsync; the whole command's wall time, start-up
// included, is printed apart), and
// consolidation's peak RSS is set against the model's size (target < 25%
// for 1 GB+ models).
//
//   build/bin/zt_bench_checkpoint [--dir /tmp/zt_ckpt_bench] [--params 268435456] [--rounds 1]
//
// One process, one rank (stage 1 on the single-rank group).
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <future>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/zero_checkpoint.h"
#include "cli/flags.h"
#include "comm/single_group.h"
#include "engine/engine.h"
#include "util/clock.h"
#include "util/direct_io.h"
#include "util/error.h"
#include "util/file_io.h"
#include "util/log.h"
#include "util/status.h"
#include "util/system_info.h"
#include "util/unique_fd.h"

namespace zt {
namespace {

using Clock = std::chrono::steady_clock;

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t width, int64_t depth) {
    for (int64_t i = 0; i < depth; ++i)
      layers.push_back(register_module(absl::StrCat("fc", i), torch::nn::Linear(width, width)));
  }
  torch::Tensor forward(torch::Tensor x) {
    for (auto& l : layers) x = torch::tanh(l(x));
    return x;
  }
  std::vector<torch::nn::Linear> layers;
};
TORCH_MODULE(Mlp);

// Drops a file's pages from the page cache, so the next read comes from disk.
void DropCache(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY));
  if (fd.valid()) {
    ::fdatasync(fd.get());
    ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
  }
}

uint64_t FileSize(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
}

// Raw bandwidth of the directory: write `bytes` in 8 MiB pieces + fsync,
// then read them back cold, once through the page cache and once with
// O_DIRECT; the disk's figure is the better of the two (the checkpoint
// tools use O_DIRECT for their large transfers, util/direct_io.h, and the
// page cache is the better path on other machines). The buffered writes
// start the disk on every 32 MiB behind the end as they go
// (sync_file_range), as zerotorch's buffered writer does: a plain
// write-then-fsync of gigabytes runs into the kernel's dirty-page
// throttling and would understate the disk several times over.
struct RawFigures {
  double write_buffered = 0, write_direct = 0, read_buffered = 0, read_direct = 0;
  // A copy that reads one file and writes another of the same size at the
  // same time (O_DIRECT both ways, the writer never waiting for the reader):
  // bytes copied / seconds until both are done. The pace to expect of a
  // tool that reads and writes every byte once on this disk.
  double copy_overlapped = 0;
  double write() const { return std::max(write_buffered, write_direct); }
  double read() const { return std::max(read_buffered, read_direct); }
};

absl::Status RawPass(const std::string& path, uint64_t bytes, bool direct, double* write_gbs, double* read_gbs,
                     bool keep_file = false) {
  AlignedBlock buf(8 << 20);
  std::memset(buf.data(), 1, buf.size());
  {
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | (direct ? O_DIRECT : 0), 0644));
    if (!fd.valid()) return absl::UnavailableError(absl::StrCat("cannot create '", path, "': ", std::strerror(errno)));
    const auto t0 = Clock::now();
    constexpr uint64_t kWindow = 32ull << 20;
    uint64_t started = 0;
    for (uint64_t done = 0; done < bytes;) {
      const ssize_t w = ::write(fd.get(), buf.data(), buf.size());
      if (w <= 0) return absl::UnavailableError(absl::StrCat("writing '", path, "': ", std::strerror(errno)));
      done += static_cast<uint64_t>(w);
      for (; !direct && done - started >= kWindow; started += kWindow) {
        ::sync_file_range(fd.get(), static_cast<off_t>(started), static_cast<off_t>(kWindow), SYNC_FILE_RANGE_WRITE);
      }
    }
    ::fsync(fd.get());
    *write_gbs = static_cast<double>(bytes) / 1e9 / Seconds(t0, Clock::now());
  }
  DropCache(path);
  {
    UniqueFd fd(::open(path.c_str(), O_RDONLY | (direct ? O_DIRECT : 0)));
    const auto t0 = Clock::now();
    uint64_t done = 0;
    if (direct) {
      // Several requests in flight, as the page cache's readahead keeps them
      // (DirectPRead: plain preads on kDirectReadStreams threads).
      for (; done < bytes; done += buf.size()) {
        if (DirectPRead(fd.get(), buf.data(), buf.size(), done) != 0) {
          return absl::UnavailableError(absl::StrCat("reading '", path, "' with O_DIRECT failed"));
        }
      }
    } else {
      for (ssize_t r; (r = ::read(fd.get(), buf.data(), buf.size())) > 0;) done += static_cast<uint64_t>(r);
    }
    *read_gbs = static_cast<double>(done) / 1e9 / Seconds(t0, Clock::now());
  }
  if (!keep_file) ::unlink(path.c_str());
  return absl::OkStatus();
}

// The overlapped copy of RawFigures: reads `path` (`bytes` long, dropped
// from the page cache first) with O_DIRECT as the raw read does, while a
// second thread writes as many bytes to a new file with O_DIRECT + fsync.
absl::Status OverlappedCopy(const std::string& path, uint64_t bytes, double* copy_gbs) {
  DropCache(path);
  const std::string out = path + ".copy";
  UniqueFd in(::open(path.c_str(), O_RDONLY | O_DIRECT));
  UniqueFd dst(::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644));
  if (!in.valid() || !dst.valid()) {
    return absl::UnavailableError(absl::StrCat("cannot open '", path, "' or '", out, "': ", std::strerror(errno)));
  }
  AlignedBlock rbuf(8 << 20), wbuf(8 << 20);
  std::memset(wbuf.data(), 1, wbuf.size());
  const auto t0 = Clock::now();
  std::future<bool> writer = std::async(std::launch::async, [&] {
    for (uint64_t done = 0; done < bytes; done += wbuf.size()) {
      if (::write(dst.get(), wbuf.data(), wbuf.size()) != static_cast<ssize_t>(wbuf.size())) return false;
    }
    return ::fsync(dst.get()) == 0;
  });
  bool read_ok = true;
  for (uint64_t done = 0; read_ok && done < bytes; done += rbuf.size()) {
    read_ok = DirectPRead(in.get(), rbuf.data(), rbuf.size(), done) == 0;
  }
  const bool write_ok = writer.get();
  *copy_gbs = static_cast<double>(bytes) / 1e9 / Seconds(t0, Clock::now());
  ::unlink(out.c_str());
  if (!read_ok || !write_ok) return absl::UnavailableError(absl::StrCat("the overlapped copy of '", path, "' failed"));
  return absl::OkStatus();
}

absl::Status RawBandwidth(const std::string& dir, uint64_t bytes, RawFigures* raw) {
  const std::string path = dir + "/raw.bin";
  bytes = AlignUp(bytes);
  // The buffered pass last, as the measured operations come next: the page
  // cache it frees is what the save and the load's reads reuse, as before
  // O_DIRECT was measured too.
  ZT_RETURN_IF_ERROR(RawPass(path, bytes, /*direct=*/true, &raw->write_direct, &raw->read_direct, /*keep_file=*/true));
  absl::Status copied = OverlappedCopy(path, bytes, &raw->copy_overlapped);
  ::unlink(path.c_str());
  ZT_RETURN_IF_ERROR(copied);
  return RawPass(path, bytes, /*direct=*/false, &raw->write_buffered, &raw->read_buffered);
}

// What one `zt ckpt` command took.
struct ZtRun {
  double wall = 0;  // the whole command, program start-up included
  double work = 0;  // what it reports for its own work (open to last fsync)
  double rss = -1;  // its peak resident bytes as it reports them (VmHWM of
                    // its own program: getrusage would count what this
                    // process had when it forked); -1 when not reported
};

// The seconds in "<...> in <seconds> s" on the line starting with `prefix`.
double ReportedSeconds(const std::string& output, const std::string& prefix) {
  const size_t line = output.find(prefix);
  if (line == std::string::npos) return -1;
  const size_t end = output.find('\n', line);
  const size_t in = output.rfind(" in ", end);
  double s = -1;
  if (in != std::string::npos && in > line) std::sscanf(output.c_str() + in, " in %lf s", &s);
  return s;
}

// Runs `zt ARGS`; `prefix` starts the line that reports the work's seconds.
absl::StatusOr<ZtRun> RunZt(const std::string& zt, const std::string& args, const std::string& prefix) {
  const std::string cmd = absl::StrCat("'", zt, "' ", args, " 2>&1");
  const auto t0 = Clock::now();
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return absl::InternalError(absl::StrCat("cannot run ", cmd));
  std::string output;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof(buf), p)) output.append(buf, n);
  const int status = ::pclose(p);
  const double seconds = Seconds(t0, Clock::now());
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return absl::InternalError(absl::StrCat(cmd, " failed: ", output));
  const size_t at = output.find("peak resident memory: ");
  double mib = -1;
  if (at != std::string::npos) std::sscanf(output.c_str() + at, "peak resident memory: %lf", &mib);
  ZtRun run;
  run.wall = seconds;
  run.work = ReportedSeconds(output, prefix);
  run.rss = mib < 0 ? -1.0 : mib * (1 << 20);
  if (run.work <= 0 || run.rss < 0) {
    return absl::InternalError(absl::StrCat(cmd, " did not report its time and peak memory: ", output));
  }
  return run;
}

// One rank, stage 1, AdamW: the engine whose checkpoints are measured.
Config BenchConfig() {
  Config c;
  c.batch.train_micro_batch_size_per_gpu = 4;
  c.batch.gradient_accumulation_steps = 1;
  c.steps_per_print = 0;
  c.optimizer.present = true;
  c.optimizer.type = OptimizerType::kAdamW;
  c.zero.stage = 1;
  return c;
}

// Drops the files of checkpoint `ck` (tag "bench") from the page cache and
// returns their total size.
absl::StatusOr<uint64_t> DropCheckpointCache(const std::string& ck) {
  ZT_ASSIGN_OR_RETURN(auto opened, ckpt::ZeroCheckpoint::Open(ck, "bench"));
  uint64_t bytes = 0;
  for (const std::string& f : opened->files()) {
    bytes += FileSize(f);
    DropCache(f);
  }
  return bytes;
}

// Every round's figures (medians reported) and the checkpoint's size.
struct Rounds {
  std::vector<double> save_gbs, load_gbs, cons_gbs, conv_gbs, raw_w, raw_r, raw_copy, rss;
  std::vector<double> cons_wall, conv_wall;  // the commands' wall seconds, start-up included
  std::vector<RawFigures> raw_detail;
  uint64_t ckpt_bytes = 0;
};

// Round r: the disk's raw bandwidth, then save, a cold load and a
// consolidation of the engine's checkpoint in `dir`, removed afterwards
// unless `keep`.
absl::Status MeasureRound(Engine& engine, const std::string& zt, const std::string& dir, int r, double model_bytes,
                          bool keep, Rounds& s) {
  const std::string ck = absl::StrCat(dir, "/ck", r);
  std::system(absl::StrCat("rm -rf '", ck, "' '", dir, "/out.safetensors'").c_str());
  // The disk first, on a file the size of the checkpoint (16 bytes per
  // parameter plus the module's 4, as AdamW at stage 1 writes).
  RawFigures raw;
  ZT_RETURN_IF_ERROR(RawBandwidth(dir, static_cast<uint64_t>(model_bytes * 5), &raw));
  auto t0 = Clock::now();
  ZT_RETURN_IF_ERROR(engine.SaveCheckpoint(ck, "bench"));
  const double save_s = Seconds(t0, Clock::now());
  ZT_ASSIGN_OR_RETURN(s.ckpt_bytes, DropCheckpointCache(ck));
  t0 = Clock::now();
  ZT_RETURN_IF_ERROR(engine.LoadCheckpoint(ck, "bench").status());
  const double load_s = Seconds(t0, Clock::now());
  ZT_RETURN_IF_ERROR(DropCheckpointCache(ck).status());
  ZT_ASSIGN_OR_RETURN(const ZtRun cons,
                      RunZt(zt, absl::StrCat("ckpt consolidate '", ck, "' '", dir, "/out.safetensors'"), "wrote "));
  // Conversion to DeepSpeed's files reads the whole checkpoint and writes
  // it again (fsynced): checkpoint bytes / time.
  ZT_RETURN_IF_ERROR(DropCheckpointCache(ck).status());
  const std::string ds = absl::StrCat(dir, "/ds", r);
  ZT_ASSIGN_OR_RETURN(const ZtRun conv,
                      RunZt(zt, absl::StrCat("ckpt convert '", ck, "' '", ds, "' --to deepspeed"), "converted "));
  std::system(absl::StrCat("rm -rf '", ds, "'").c_str());
  s.conv_gbs.push_back(static_cast<double>(s.ckpt_bytes) / 1e9 / conv.work);
  s.conv_wall.push_back(conv.wall);
  s.cons_wall.push_back(cons.wall);
  s.save_gbs.push_back(static_cast<double>(s.ckpt_bytes) / 1e9 / save_s);
  s.load_gbs.push_back(static_cast<double>(s.ckpt_bytes) / 1e9 / load_s);
  // Consolidation reads the fp32 masters (a quarter of an Adam checkpoint
  // beyond the module copy) and writes the model once.
  s.cons_gbs.push_back(model_bytes / 1e9 / cons.work);
  s.rss.push_back(cons.rss);
  s.raw_w.push_back(raw.write());
  s.raw_r.push_back(raw.read());
  s.raw_copy.push_back(raw.copy_overlapped);
  s.raw_detail.push_back(raw);
  if (!keep) std::system(absl::StrCat("rm -rf '", ck, "' '", dir, "/out.safetensors'").c_str());
  return absl::OkStatus();
}

// The table, the RESULT line and the SUMMARY line, from the rounds' medians.
void PrintReport(const Rounds& s, const std::string& dir, double model_bytes) {
  auto med = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  std::cout << absl::StrFormat("checkpoint: %.2f GiB in %s\n", static_cast<double>(s.ckpt_bytes) / (1 << 30), dir);
  for (size_t r = 0; r < s.raw_detail.size(); ++r) {
    const RawFigures& f = s.raw_detail[r];
    std::cout << absl::StrFormat(
        "round %d raw disk GB/s: write %.2f buffered, %.2f O_DIRECT; read %.2f buffered, %.2f O_DIRECT; "
        "overlapped copy %.2f\n",
        r, f.write_buffered, f.write_direct, f.read_buffered, f.read_direct, f.copy_overlapped);
  }
  std::cout << "(the disk's figure below is the better of buffered and O_DIRECT, per round)\n";
  std::cout << absl::StrFormat("%-12s %9s %10s %8s\n", "operation", "GB/s", "disk GB/s", "ratio");
  std::cout << absl::StrFormat("%-12s %9.2f %10.2f %8.2f\n", "save", med(s.save_gbs), med(s.raw_w),
                               med(s.save_gbs) / med(s.raw_w));
  std::cout << absl::StrFormat("%-12s %9.2f %10.2f %8.2f\n", "load", med(s.load_gbs), med(s.raw_r),
                               med(s.load_gbs) / med(s.raw_r));
  std::cout << absl::StrFormat("%-12s %9.2f %10.2f %8.2f   (model bytes / time; reads the masters, writes the model)\n",
                               "consolidate", med(s.cons_gbs), med(s.raw_r), med(s.cons_gbs) / med(s.raw_r));
  std::cout << absl::StrFormat("%-12s %9.2f %10.2f %8.2f   (checkpoint bytes / time; reads it all, writes it all)\n",
                               "convert", med(s.conv_gbs), med(s.raw_r), med(s.conv_gbs) / med(s.raw_r));
  // Consolidation and conversion read and write the same bytes: against a
  // plain copy of them (raw read then raw write) as well.
  const double copy = 1.0 / (1.0 / med(s.raw_r) + 1.0 / med(s.raw_w));
  std::cout << absl::StrFormat("against a raw copy (%.2f GB/s): consolidate %.2fx, convert %.2fx\n", copy,
                               med(s.cons_gbs) / copy, med(s.conv_gbs) / copy);
  // The reference for a tool that must read and write every byte: where
  // reads and writes share the disk's bandwidth, it sits well below the raw
  // read, and so do consolidation and conversion.
  std::cout << absl::StrFormat(
      "against an overlapped raw copy (%.2f GB/s = %.2fx the raw read): consolidate %.2fx, convert %.2fx\n",
      med(s.raw_copy), med(s.raw_copy) / med(s.raw_r), med(s.cons_gbs) / med(s.raw_copy),
      med(s.conv_gbs) / med(s.raw_copy));
  std::cout << absl::StrFormat(
      "the commands' wall time, start-up of the zt program included: consolidate %.2f s, "
      "convert %.2f s\n",
      med(s.cons_wall), med(s.conv_wall));
  std::cout << absl::StrFormat("consolidate peak RSS: %.1f MiB = %.1f%% of the %.2f GiB model (target < 25%%)\n",
                               med(s.rss) / (1 << 20), 100.0 * med(s.rss) / model_bytes, model_bytes / (1 << 30));
  std::cout << absl::StrFormat(
      "RESULT ckpt_gib=%.3f save_gbs=%.3f load_gbs=%.3f consolidate_gbs=%.3f convert_gbs=%.3f raw_write_gbs=%.3f "
      "raw_read_gbs=%.3f raw_copy_overlapped_gbs=%.3f consolidate_rss_mib=%.1f rss_fraction=%.4f\n",
      static_cast<double>(s.ckpt_bytes) / (1 << 30), med(s.save_gbs), med(s.load_gbs), med(s.cons_gbs), med(s.conv_gbs),
      med(s.raw_w), med(s.raw_r), med(s.raw_copy), med(s.rss) / (1 << 20), med(s.rss) / model_bytes);
  std::cout << absl::StrFormat(
      "SUMMARY: save %.2fx, load %.2fx, consolidate %.2fx, convert %.2fx of the raw disk bandwidth; consolidation "
      "peak RSS %.1f%% of the model\n",
      med(s.save_gbs) / med(s.raw_w), med(s.load_gbs) / med(s.raw_r), med(s.cons_gbs) / med(s.raw_r),
      med(s.conv_gbs) / med(s.raw_r), 100.0 * med(s.rss) / model_bytes);
}

absl::Status Main(int argc, char** argv) {
  cli::Flags flags("zt_bench_checkpoint");
  flags.String("dir", "/tmp/zt_ckpt_bench", "scratch directory (about 5x the model size is written)");
  flags.Int("params", 268435456, "model parameters (fp32; 4096-wide Linear layers)");
  flags.Int("rounds", 1, "repetitions (medians reported)");
  flags.Bool("keep", "keep the last checkpoint and export (for a look with zt ckpt inspect)");
  std::vector<std::string> args(argv + 1, argv + argc);
  ZT_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::cout << flags.Usage("[flags]");
    return absl::OkStatus();
  }
  const std::string dir = flags.GetString("dir");
  const int64_t width = 4096;
  const int64_t depth = std::max<int64_t>(1, flags.GetInt("params") / (width * width + width));
  const int rounds = static_cast<int>(std::max<long long>(1, flags.GetInt("rounds")));
  SetMinLogLevel(LogLevel::kWarning);
  ZT_RETURN_IF_ERROR(MakeDirs(dir));
  std::string zt = argv[0];
  zt = zt.substr(0, zt.find_last_of('/') + 1) + "zt";

  std::cout << SystemInfoLine() << "\n";
  Mlp model(width, depth);
  ZT_ASSIGN_OR_RETURN(auto engine, Engine::Create(model, BenchConfig(), std::make_shared<comm::SingleGroup>()));
  engine->Backward(model->forward(torch::randn({4, width})).pow(2).mean());
  engine->Step();
  const double model_bytes = 4.0 * static_cast<double>(depth * (width * width + width));
  std::cout << absl::StrFormat("model: %d x Linear(%d, %d), %.0f M parameters, %.2f GiB fp32; AdamW, stage 1, 1 rank\n",
                               depth, width, width, model_bytes / 4e6, model_bytes / (1 << 30));

  Rounds s;
  for (int r = 0; r < rounds; ++r) {
    const bool keep = flags.GetBool("keep") && r + 1 == rounds;
    ZT_RETURN_IF_ERROR(MeasureRound(*engine, zt, dir, r, model_bytes, keep, s));
  }
  PrintReport(s, dir, model_bytes);
  return absl::OkStatus();
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  try {
    absl::Status st = zt::Main(argc, argv);
    if (!st.ok()) {
      std::cerr << "zt_bench_checkpoint: " << st.message() << "\n";
      return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "zt_bench_checkpoint: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
