// NVMe swap bandwidth: the raw sequential O_DIRECT bandwidth of a directory
// (one thread, 8 MiB pwrite/pread calls; and, for reference, several threads
// at once) against IoEngine writing and reading
// a swap file there, with the default aio settings and a sweep of
// block_size x queue_depth x threads, for both backends. Ratios are against
// the raw numbers of the same run (target >= 0.9).
//
// The headline ratios are paired: every round times the raw loop and each
// default engine back to back (the order alternating between rounds, so
// neither side always goes first after the other has warmed or tired the
// disk), takes engine / raw within the round, and reports the median over
// rounds. A virtual disk swings by 2x between rounds (host caches, burst
// credits); a ratio of two "best of N" figures picks each side's luckiest
// round and mostly measures which side was lucky.
//
//   build/bin/zt_bench_nvme [--dir DIR] [--size-mib 1024] [--rounds 5] [--sweep-rounds 1]
//
// Without --dir a fresh folder under /tmp is used and removed afterwards.
// O_DIRECT bypasses the page cache, so nothing needs dropping; caches below
// the block layer (a virtual disk's host, the drive's own) are out of reach.
// Everything runs on one preallocated swap file, filled once before timing,
// so raw and engine numbers see the same extents in the same state.
#include <fcntl.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "benchmarks/median.h"
#include "cli/flags.h"
#include "offload/aligned_buffer.h"
#include "offload/io_engine.h"
#include "offload/swap_file.h"
#include "util/clock.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt {
namespace {

using Clock = std::chrono::steady_clock;
using offload::AlignedBuffer;
using offload::IoBackend;
using offload::IoEngine;
using offload::IoOptions;
using offload::SwapFile;

constexpr uint64_t kRawChunk = 8 << 20;

double GBps(uint64_t bytes, double seconds) { return static_cast<double>(bytes) / seconds / 1e9; }

std::string FsType(const std::string& dir) {
  struct statfs fs;
  if (::statfs(dir.c_str(), &fs) != 0) return "unknown filesystem";
  switch (static_cast<unsigned long>(fs.f_type)) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case 0x01021994: return "tmpfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x65735546: return "fuse";
    default: return absl::StrFormat("filesystem 0x%x", static_cast<unsigned long>(fs.f_type));
  }
}

// The raw loops move data between the file and the same host buffer the
// engine passes use, walking through it (file offset modulo the buffer), not
// one small chunk of it: on a virtual machine the speed of O_DIRECT into a
// given region of guest memory differs by up to 4x with how the host backs
// it (seen here: a raw loop reusing one 8 MiB chunk at 1.3 GB/s in one
// process and 6 GB/s in the next, while the engine's 256 MiB buffer did
// neither), so both sides must touch the same memory to be comparable.
struct HostRegion {
  char* data;
  uint64_t bytes;  // a multiple of kRawChunk
  char* At(uint64_t file_offset) const { return data + file_offset % bytes; }
};

// One thread, sequential kRawChunk pwrite/pread calls over the whole file.
absl::StatusOr<double> RawPass(const SwapFile& file, const HostRegion& host, bool write) {
  const auto start = Clock::now();
  for (uint64_t at = 0; at < file.size(); at += kRawChunk) {
    const size_t n = static_cast<size_t>(std::min(kRawChunk, file.size() - at));
    size_t done = 0;
    while (done < n) {
      char* p = host.At(at) + done;
      const off_t off = static_cast<off_t>(at + done);
      const ssize_t r = write ? ::pwrite(file.fd(), p, n - done, off) : ::pread(file.fd(), p, n - done, off);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        return absl::InternalError(absl::StrCat(write ? "pwrite" : "pread", " at ", at + done, " of '", file.path(),
                                                "': ", r < 0 ? std::strerror(errno) : "no progress"));
      }
      done += static_cast<size_t>(r);
    }
  }
  return GBps(file.size(), Seconds(start, Clock::now()));
}

// The same file split into `threads` contiguous ranges, each streamed by its
// own thread as in RawPass: the device's bandwidth with several requests in
// flight, which a single thread cannot reach on devices that need depth.
absl::StatusOr<double> RawParallelPass(const SwapFile& file, const HostRegion& host, int threads, bool write) {
  const uint64_t span = offload::AlignUp((file.size() + threads - 1) / threads, kRawChunk);
  std::vector<std::string> errors(static_cast<size_t>(threads));
  std::vector<std::thread> workers;
  const auto start = Clock::now();
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      const uint64_t end = std::min(file.size(), (t + 1) * span);
      for (uint64_t at = t * span; at < end; at += kRawChunk) {
        const size_t n = static_cast<size_t>(std::min(kRawChunk, end - at));
        char* p = host.At(at);
        const ssize_t r = write ? ::pwrite(file.fd(), p, n, static_cast<off_t>(at))
                                : ::pread(file.fd(), p, n, static_cast<off_t>(at));
        if (r != static_cast<ssize_t>(n)) {
          errors[static_cast<size_t>(t)] = absl::StrCat(write ? "pwrite" : "pread", " at ", at, ": ",
                                                        r < 0 ? std::strerror(errno) : "short transfer");
          return;
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  const double seconds = Seconds(start, Clock::now());
  for (const std::string& e : errors) {
    if (!e.empty()) return absl::InternalError(absl::StrCat(e, " of '", file.path(), "'"));
  }
  return GBps(file.size(), seconds);
}

// The whole file through the engine: requests of `buffer_bytes` each, all in
// flight at once (every request uses the same buffer: only bandwidth is
// measured here; the tests check contents), then WaitAll.
absl::StatusOr<double> EnginePass(IoEngine& io, const SwapFile& file, void* buffer, uint64_t buffer_bytes, bool write) {
  const uint64_t before = write ? io.bytes_written() : io.bytes_read();
  const auto start = Clock::now();
  for (uint64_t at = 0; at < file.size(); at += buffer_bytes) {
    const uint64_t n = std::min(buffer_bytes, file.size() - at);
    if (write) {
      io.Write(file, at, buffer, n);
    } else {
      io.Read(file, at, buffer, n);
    }
  }
  ZT_RETURN_IF_ERROR(io.WaitAll());
  const double seconds = Seconds(start, Clock::now());
  const uint64_t moved = (write ? io.bytes_written() : io.bytes_read()) - before;
  if (moved != file.size()) {
    return absl::InternalError(absl::StrCat("the engine moved ", moved, " bytes, expected ", file.size()));
  }
  return GBps(file.size(), seconds);
}

// GB/s per direction.
struct Rates {
  double write = 0;
  double read = 0;
};

// One figure per round, per direction.
struct Series {
  std::vector<double> write, read;
  void Add(bool is_write, double v) { (is_write ? write : read).push_back(v); }
};

using bench::Median;

Rates MedianOf(const Series& s) { return {Median(s.write), Median(s.read)}; }

std::string Spread(const std::vector<double>& v) {
  if (v.empty()) return "-";
  return absl::StrFormat("%.2f-%.2f", *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
}

// Median of `rounds` passes: write passes first, then read passes.
template <typename Pass>
absl::StatusOr<Rates> MedianPasses(int rounds, Pass pass) {
  Series s;
  for (bool write : {true, false}) {
    for (int r = 0; r < rounds; ++r) {
      ZT_ASSIGN_OR_RETURN(double v, pass(write));
      s.Add(write, v);
    }
  }
  return MedianOf(s);
}

std::string BlockName(int64_t b) {
  return b >= (1 << 20) ? absl::StrCat(b >> 20, " MiB") : absl::StrCat(b >> 10, " KiB");
}

struct Row {
  IoOptions options;
  Rates gbps;   // medians
  Rates ratio;  // against raw: paired medians for the default rows, else gbps / raw's median
  bool is_default = false;
};

// What the flags ask for, clamped to sensible minimums.
struct Settings {
  int rounds = 1;
  int sweep_rounds = 1;
  int raw_threads = 1;
  uint64_t buffer_bytes = 0;  // aligned for O_DIRECT
  uint64_t size = 0;          // of the swap file: a multiple of min(buffer_bytes, kRawChunk)
  bool sweep = true;
};

Settings SettingsFromFlags(const cli::Flags& flags) {
  Settings s;
  s.rounds = static_cast<int>(std::max<long long>(1, flags.GetInt("rounds")));
  s.sweep_rounds = static_cast<int>(std::max<long long>(1, flags.GetInt("sweep-rounds")));
  s.buffer_bytes = offload::AlignUp(static_cast<uint64_t>(std::max<long long>(1, flags.GetInt("buffer-mib"))) << 20);
  s.size = offload::AlignUp(static_cast<uint64_t>(std::max<long long>(1, flags.GetInt("size-mib"))) << 20,
                            std::min<uint64_t>(s.buffer_bytes, kRawChunk));
  s.raw_threads = static_cast<int>(std::max<long long>(1, flags.GetInt("raw-threads")));
  s.sweep = !flags.GetBool("no-sweep");
  return s;
}

// Removes a folder the benchmark made itself when it goes out of scope.
struct DirCleanup {
  std::string dir;
  bool remove;
  ~DirCleanup() {
    std::error_code ec;
    if (remove) std::filesystem::remove_all(dir, ec);
  }
};

// Incompressible data, in case the device or its host compresses.
void FillIncompressible(AlignedBuffer& buffer) {
  uint64_t x = 0x9E3779B97F4A7C15ull;
  auto* words = static_cast<uint64_t*>(buffer.data());
  for (size_t i = 0; i < buffer.size() / 8; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    words[i] = x;
  }
}

// An engine with the default aio settings for each backend this machine
// has; a missing one is said on stdout and skipped.
absl::StatusOr<std::vector<std::unique_ptr<IoEngine>>> DefaultEngines() {
  std::vector<std::unique_ptr<IoEngine>> defaults;
  for (IoBackend backend : {IoBackend::kUring, IoBackend::kThreads}) {
    IoOptions o;
    o.backend = backend;
    auto io = IoEngine::Create(o);
    if (!io.ok() && io.status().code() == absl::StatusCode::kUnavailable) {
      std::cout << IoBackendName(backend) << " unavailable: " << io.status().message() << std::endl;
      continue;
    }
    ZT_RETURN_IF_ERROR(io.status());
    defaults.push_back(std::move(io).value());
  }
  return defaults;
}

// The measurements over one filled swap file and host buffer, in the order
// Main runs them; each step prints its lines, the rows feed the summary.
class NvmeBench {
 public:
  NvmeBench(const Settings& settings, const SwapFile& file, const AlignedBuffer& buffer)
      : s_(settings),
        file_(file),
        buffer_(buffer),
        host_{static_cast<char*>(buffer.data()), offload::AlignUp(settings.buffer_bytes, kRawChunk)} {}

  const HostRegion& host() const { return host_; }
  absl::Status MeasureDefaults(std::vector<std::unique_ptr<IoEngine>> defaults);
  absl::Status Sweep();
  absl::Status CheckContents() const;
  absl::Status PrintSummary() const;

 private:
  absl::Status PairedRounds(const std::vector<std::unique_ptr<IoEngine>>& defaults, std::vector<Series>& default_s,
                            std::vector<Series>& ratio_s);
  void PrintRow(const Row& r) const;
  absl::Status Measure(IoOptions o, int n_rounds);

  const Settings& s_;
  const SwapFile& file_;
  const AlignedBuffer& buffer_;
  const HostRegion host_;
  Series raw_s_, raw_parallel_s_;
  Rates raw_, raw_parallel_;  // medians of the rounds above
  std::vector<Row> rows_;
};

// Headline numbers, paired: each round runs the raw loops and every
// default engine back to back, raw first in even rounds and last in odd
// ones, and keeps engine / raw of that round.
absl::Status NvmeBench::PairedRounds(const std::vector<std::unique_ptr<IoEngine>>& defaults,
                                     std::vector<Series>& default_s, std::vector<Series>& ratio_s) {
  for (bool write : {true, false}) {
    for (int r = 0; r < s_.rounds; ++r) {
      double one = 0;
      std::vector<double> engine(defaults.size());
      auto run_raw = [&]() -> absl::Status {
        ZT_ASSIGN_OR_RETURN(one, RawPass(file_, host_, write));
        ZT_ASSIGN_OR_RETURN(double many, RawParallelPass(file_, host_, s_.raw_threads, write));
        raw_s_.Add(write, one);
        raw_parallel_s_.Add(write, many);
        return absl::OkStatus();
      };
      auto run_engines = [&]() -> absl::Status {
        for (size_t i = 0; i < defaults.size(); ++i) {
          ZT_ASSIGN_OR_RETURN(engine[i], EnginePass(*defaults[i], file_, buffer_.data(), s_.buffer_bytes, write));
        }
        return absl::OkStatus();
      };
      if (r % 2 == 0) {
        ZT_RETURN_IF_ERROR(run_raw());
        ZT_RETURN_IF_ERROR(run_engines());
      } else {
        ZT_RETURN_IF_ERROR(run_engines());
        ZT_RETURN_IF_ERROR(run_raw());
      }
      for (size_t i = 0; i < defaults.size(); ++i) {
        default_s[i].Add(write, engine[i]);
        ratio_s[i].Add(write, engine[i] / one);
      }
    }
  }
  raw_ = MedianOf(raw_s_);
  raw_parallel_ = MedianOf(raw_parallel_s_);
  return absl::OkStatus();
}

// The paired rounds, the raw lines, the table header and a row per default
// engine. The engines are released at the end (the sweep makes its own).
absl::Status NvmeBench::MeasureDefaults(std::vector<std::unique_ptr<IoEngine>> defaults) {
  std::vector<Series> default_s(defaults.size()), ratio_s(defaults.size());
  ZT_RETURN_IF_ERROR(PairedRounds(defaults, default_s, ratio_s));
  std::cout << absl::StrFormat(
      "raw O_DIRECT, one thread, %s pwrite/pread: write %.3f GB/s (rounds %s), read %.3f GB/s (rounds %s)\n",
      HumanBytes(static_cast<double>(kRawChunk)), raw_.write, Spread(raw_s_.write), raw_.read, Spread(raw_s_.read));
  // Ratios are against the one-thread loop; this line says how far several
  // requests in flight get on the same disk.
  std::cout << absl::StrFormat("raw O_DIRECT, %d threads, %s pwrite/pread each: write %.3f GB/s, read %.3f GB/s\n",
                               s_.raw_threads, HumanBytes(static_cast<double>(kRawChunk)), raw_parallel_.write,
                               raw_parallel_.read);

  std::cout << "backend   threads   qd    block | write   read | w/raw r/raw" << std::endl;
  for (size_t i = 0; i < defaults.size(); ++i) {
    rows_.push_back({defaults[i]->options(), MedianOf(default_s[i]), MedianOf(ratio_s[i]), true});
    PrintRow(rows_.back());
    std::cout << absl::StrFormat("  %s engine / raw per round: write %s, read %s\n",
                                 IoBackendName(defaults[i]->options().backend), Spread(ratio_s[i].write),
                                 Spread(ratio_s[i].read));
  }
  return absl::OkStatus();
}

void NvmeBench::PrintRow(const Row& r) const {
  std::cout << absl::StrFormat("%-9s %7d %4d %8s | %6.3f %6.3f | %5.2f %5.2f%s", IoBackendName(r.options.backend),
                               r.options.threads, r.options.queue_depth, BlockName(r.options.block_size), r.gbps.write,
                               r.gbps.read, r.ratio.write, r.ratio.read,
                               r.is_default ? "   (default aio settings; paired ratios)" : "")
            << std::endl;
  std::cout << absl::StrFormat(
                   "RESULT backend=%s threads=%d queue_depth=%d block_size=%d default=%d write_gbs=%.4f "
                   "read_gbs=%.4f raw_write_gbs=%.4f raw_read_gbs=%.4f write_ratio=%.4f read_ratio=%.4f",
                   IoBackendName(r.options.backend), r.options.threads, r.options.queue_depth, r.options.block_size,
                   r.is_default ? 1 : 0, r.gbps.write, r.gbps.read, raw_.write, raw_.read, r.ratio.write, r.ratio.read)
            << std::endl;
}

// One sweep point: the median of `n_rounds` passes per direction, against
// the raw medians. A backend this machine lacks is skipped.
absl::Status NvmeBench::Measure(IoOptions o, int n_rounds) {
  auto io = IoEngine::Create(o);
  if (!io.ok() && io.status().code() == absl::StatusCode::kUnavailable) return absl::OkStatus();
  ZT_RETURN_IF_ERROR(io.status());
  ZT_ASSIGN_OR_RETURN(Rates median, MedianPasses(n_rounds, [&](bool w) {
                        return EnginePass(**io, file_, buffer_.data(), s_.buffer_bytes, w);
                      }));
  rows_.push_back({(*io)->options(), median, {median.write / raw_.write, median.read / raw_.read}, false});
  PrintRow(rows_.back());
  return absl::OkStatus();
}

absl::Status NvmeBench::Sweep() {
  if (!s_.sweep) return absl::OkStatus();
  for (IoBackend backend : {IoBackend::kUring, IoBackend::kThreads}) {
    for (int threads : {1, 2}) {
      for (int64_t block : {int64_t{128} << 10, int64_t{1} << 20, int64_t{8} << 20}) {
        for (int qd : {1, 4, 8, 32}) {
          IoOptions o;
          o.backend = backend;
          o.threads = threads;
          o.queue_depth = qd;
          o.block_size = block;
          ZT_RETURN_IF_ERROR(Measure(o, s_.sweep_rounds));
        }
      }
    }
  }
  return absl::OkStatus();
}

// Contents check once per run: the first and last requests' bytes.
absl::Status NvmeBench::CheckContents() const {
  IoOptions o;
  auto io = IoEngine::Create(o);
  ZT_RETURN_IF_ERROR(io.status());
  const uint64_t n = std::min(s_.buffer_bytes, s_.size);
  ZT_ASSIGN_OR_RETURN(AlignedBuffer check, AlignedBuffer::Allocate(s_.buffer_bytes));
  ZT_RETURN_IF_ERROR((*io)->WriteSync(file_, 0, buffer_.data(), n));
  ZT_RETURN_IF_ERROR((*io)->ReadSync(file_, 0, check.data(), n));
  if (std::memcmp(check.data(), buffer_.data(), n) != 0) {
    return absl::DataLossError("read back differs from what was written: the numbers above are not valid");
  }
  return absl::OkStatus();
}

// The SUMMARY line: raw, the io_uring default (else the first row) and the
// row with the best worse-direction ratio.
absl::Status NvmeBench::PrintSummary() const {
  const Row* def_uring = nullptr;
  const Row* best = nullptr;
  for (const Row& r : rows_) {
    if (r.is_default && r.options.backend == IoBackend::kUring) def_uring = &r;
    auto score = [](const Row& x) { return std::min(x.ratio.write, x.ratio.read); };
    if (best == nullptr || score(r) > score(*best)) best = &r;
  }
  if (best == nullptr) return absl::UnavailableError("no backend could run");
  const Row& d = def_uring ? *def_uring : rows_.front();
  auto describe = [](const Row& r) {
    return absl::StrFormat("%s threads=%d queue_depth=%d block_size=%s", IoBackendName(r.options.backend),
                           r.options.threads, r.options.queue_depth, BlockName(r.options.block_size));
  };
  std::cout << absl::StrFormat(
      "SUMMARY: raw write %.3f read %.3f GB/s (%d threads: %.3f / %.3f) | default (%s) write %.3f (%.2fx) read "
      "%.3f (%.2fx) | best (%s) write %.3f (%.2fx) read %.3f (%.2fx) | target >= 0.90x of the one-thread raw "
      "(defaults: medians of %d paired rounds)\n",
      raw_.write, raw_.read, s_.raw_threads, raw_parallel_.write, raw_parallel_.read, describe(d), d.gbps.write,
      d.ratio.write, d.gbps.read, d.ratio.read, describe(*best), best->gbps.write, best->ratio.write, best->gbps.read,
      best->ratio.read, s_.rounds);
  return absl::OkStatus();
}

absl::Status Main(int argc, char** argv) {
  cli::Flags flags("zt_bench_nvme");
  flags.String("dir", "", "directory to measure (default: a fresh folder under /tmp, removed afterwards)");
  flags.Int("size-mib", 1024, "swap file size in MiB (written and read whole by every pass)");
  flags.Int("buffer-mib", 256, "host buffer, and request size, in MiB");
  flags.Int("rounds", 5, "paired rounds per direction for raw and default settings (medians kept)");
  flags.Int("sweep-rounds", 1, "passes per direction for each sweep point (median kept)");
  flags.Int("raw-threads", 4, "threads of the parallel raw reference");
  flags.Bool("no-sweep", "only raw and the default aio settings");
  std::vector<std::string> args(argv + 1, argv + argc);
  ZT_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::cout << flags.Usage("[flags]");
    return absl::OkStatus();
  }
  const Settings settings = SettingsFromFlags(flags);

  std::string dir = flags.GetString("dir");
  bool remove_dir = false;
  if (dir.empty()) {
    std::string tmpl = "/tmp/zt_nvme_bench_XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
    dir = tmpl;
    remove_dir = true;
  }
  const DirCleanup cleanup{dir, remove_dir};

  std::cout << SystemInfoLine() << std::endl;
  ZT_ASSIGN_OR_RETURN(SwapFile file, SwapFile::Create(dir, "nvme_bench.swp", settings.size));
  ZT_ASSIGN_OR_RETURN(AlignedBuffer buffer,
                      AlignedBuffer::Allocate(offload::AlignUp(settings.buffer_bytes, kRawChunk)));
  NvmeBench bench(settings, file, buffer);
  FillIncompressible(buffer);
  std::cout << absl::StrFormat(
                   "nvme: %s swap file in %s (%s), requests of %s, medians of %d rounds (sweep: %d); GB/s = 1e9 B/s\n",
                   HumanBytes(static_cast<double>(settings.size)), dir, FsType(dir),
                   HumanBytes(static_cast<double>(settings.buffer_bytes)), settings.rounds, settings.sweep_rounds)
            << std::flush;

  // Untimed first fill: afterwards every pass writes allocated, written
  // extents (the steady state of a swap file), raw and engine alike.
  ZT_RETURN_IF_ERROR(RawPass(file, bench.host(), /*write=*/true).status());
  ZT_ASSIGN_OR_RETURN(std::vector<std::unique_ptr<IoEngine>> defaults, DefaultEngines());
  ZT_RETURN_IF_ERROR(bench.MeasureDefaults(std::move(defaults)));
  ZT_RETURN_IF_ERROR(bench.Sweep());
  ZT_RETURN_IF_ERROR(bench.CheckContents());
  return bench.PrintSummary();
}

}  // namespace
}  // namespace zt

int main(int argc, char** argv) {
  absl::Status st = zt::Main(argc, argv);
  if (!st.ok()) {
    std::cerr << "zt_bench_nvme: " << st.message() << "\n";
    return st.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
