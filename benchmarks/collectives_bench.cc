// Collectives sweep: our Gloo all-gather, reduce-scatter (both algorithms)
// and all-reduce against c10d's ProcessGroupGloo all-reduce, and the same
// three over the shared-memory transport (ranks of one host), measured in
// the same run over the same store, fp32, message sizes 1 KiB .. 256 MiB.
// Prints time, algBw and busBw with the nccl-tests formulas, the ratio of
// reduce-scatter to all-reduce bus bandwidth, and the bytes each all-reduce
// puts on this rank's TCP sockets. A rank program: start it with
//   zt launch --nproc-per-node 4 -- build/bin/zt_bench_collectives
// or with RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT set by any launcher.
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/flags.h"
#include "comm/cpu_group.h"
#include "comm/gloo_device.h"
#include "comm/init.h"
#include "comm/rendezvous.h"
#include "comm/socket_counters.h"
#include "launch/rank_env.h"
#include "ops/kernels.h"
#include "ops/quantize.h"
#include "util/log.h"
#include "util/status.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace {

using Clock = std::chrono::steady_clock;
using zt::comm::ProcessGroup;
using zt::comm::ReduceOp;

struct Result {
  double seconds = 0;  // per iteration, slowest rank
  double alg_bw = 0;   // GB/s
  double bus_bw = 0;   // GB/s
};

// Times `iters` calls of `op` after `warmup` calls, between barriers; the
// time is the slowest rank's (max over ranks).
absl::StatusOr<double> TimeOp(ProcessGroup& sync, int warmup, int iters, const std::function<absl::Status()>& op) {
  for (int i = 0; i < warmup; ++i) ZT_RETURN_IF_ERROR(op());
  ZT_RETURN_IF_ERROR(sync.Barrier()->Wait());
  const auto start = Clock::now();
  for (int i = 0; i < iters; ++i) ZT_RETURN_IF_ERROR(op());
  double local = std::chrono::duration<double>(Clock::now() - start).count() / iters;
  at::Tensor t = at::tensor({local}, at::kDouble);
  ZT_RETURN_IF_ERROR(sync.AllReduce(t, ReduceOp::kMax)->Wait());
  return t.item<double>();
}

Result Bandwidth(double seconds, int64_t bytes, double bus_factor) {
  Result r;
  r.seconds = seconds;
  r.alg_bw = static_cast<double>(bytes) / seconds / 1e9;
  r.bus_bw = r.alg_bw * bus_factor;
  return r;
}

// Bytes this rank's sockets sent during `op` (one call).
absl::StatusOr<int64_t> WireBytesSent(ProcessGroup& sync, const std::function<absl::Status()>& op) {
  ZT_RETURN_IF_ERROR(sync.Barrier()->Wait());
  ZT_ASSIGN_OR_RETURN(zt::comm::SocketBytes before, zt::comm::ReadSocketBytes());
  ZT_RETURN_IF_ERROR(op());
  ZT_RETURN_IF_ERROR(sync.Barrier()->Wait());
  ZT_ASSIGN_OR_RETURN(zt::comm::SocketBytes after, zt::comm::ReadSocketBytes());
  return after.sent - before.sent;
}

absl::Status Check(const at::Tensor& t, double want, const char* what) {
  if (t.numel() == 0 || (t == want).all().item<bool>()) return absl::OkStatus();
  return absl::InternalError(absl::StrFormat("%s produced a wrong result (want all %g)", what, want));
}

// The sweep's flags.
struct Settings {
  int64_t min_bytes = 0, max_bytes = 0;
  int iters = 0;  // per round; 0: about 128 MiB of traffic per size
  int rounds = 1;
  int warmup = 0;
};

// This rank's groups over one store: ours (alltoall and ring reduce-scatter)
// and c10d's ProcessGroupGloo, the baseline.
struct Groups {
  zt::comm::RankEnv env;
  zt::comm::StoreHandle store;
  std::shared_ptr<zt::comm::CpuGroup> ours, ring, shm;
  zt::comm::GlooDevice device;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> baseline;
};

absl::StatusOr<Groups> Connect(int64_t segment_bytes) {
  Groups g;
  ZT_ASSIGN_OR_RETURN(g.env, zt::comm::ReadRankEnv());
  zt::comm::GroupOptions options;
  ZT_RETURN_IF_ERROR(zt::comm::ApplyEnvOverrides(options));
  zt::SetLogRank(g.env.rank);
  ZT_ASSIGN_OR_RETURN(g.store, zt::comm::Rendezvous(g.env, options.rendezvous_timeout, "zt"));
  options.backend = zt::comm::BackendChoice::kGloo;
  if (segment_bytes > 0) options.segment_bytes = segment_bytes;
  options.store_prefix = "zt";
  options.reduce_scatter_algorithm = zt::comm::ReduceScatterAlgorithm::kAllToAll;
  ZT_ASSIGN_OR_RETURN(g.ours, zt::comm::CpuGroup::Create(g.store, options));
  options.store_prefix = "zt_ring";
  options.reduce_scatter_algorithm = zt::comm::ReduceScatterAlgorithm::kRing;
  ZT_ASSIGN_OR_RETURN(g.ring, zt::comm::CpuGroup::Create(g.store, options));
  options.store_prefix = "zt_shm";
  options.reduce_scatter_algorithm = zt::comm::ReduceScatterAlgorithm::kAllToAll;
  options.backend = zt::comm::BackendChoice::kShm;
  ZT_ASSIGN_OR_RETURN(g.shm, zt::comm::CpuGroup::Create(g.store, options));

  // c10d's own Gloo process group, the baseline, under its own key prefix.
  ZT_ASSIGN_OR_RETURN(g.device, zt::comm::CreateGlooDevice(g.env));
  auto c10d_options = c10d::ProcessGroupGloo::Options::create(options.timeout);
  c10d_options->devices = {g.device.device};
  auto c10d_store = c10::make_intrusive<c10d::PrefixStore>("c10d", g.store.store);
  g.baseline = c10::make_intrusive<c10d::ProcessGroupGloo>(c10d_store, g.env.rank, g.env.world_size, c10d_options);
  return g;
}

// Rank 0's lines before the table, and the table's two header lines.
void PrintHeader(const Groups& g, int rounds) {
  std::printf("%s\n", zt::SystemInfoLine().c_str());
  std::printf(
      "world %d, fp32, intra-op threads %d, gloo on %s; time = slowest rank, best of %d rounds, GB/s = 1e9 B/s\n",
      g.env.world_size, at::get_num_threads(), g.ours->device_description().c_str(), rounds);
  std::printf("busBw (nccl-tests): all-reduce algBw*2(n-1)/n; all-gather, reduce-scatter algBw*(n-1)/n\n");
  std::printf("%10s | %21s | %21s | %21s | %21s | %21s | %7s %7s | %6s %6s | %21s | %21s | %21s\n", "", "all-gather",
              "reduce-scatter a2a", "reduce-scatter ring", "all-reduce (ours)", "all-reduce (c10d)", "RS/AR", "RS/AR",
              "wire/S", "wire/S", "all-gather shm", "reduce-scatter shm", "all-reduce shm");
  std::printf(
      "%10s | %8s %6s %6s | %8s %6s %6s | %8s %6s %6s | %8s %6s %6s | %8s %6s %6s | %7s %7s | %6s %6s | %8s %6s %6s | "
      "%8s %6s %6s | %8s %6s %6s\n",
      "bytes", "us", "algBw", "busBw", "us", "algBw", "busBw", "us", "algBw", "busBw", "us", "algBw", "busBw", "us",
      "algBw", "busBw", "ours", "c10d", "ours", "c10d", "us", "algBw", "busBw", "us", "algBw", "busBw", "us", "algBw",
      "busBw");
  std::fflush(stdout);
}

// Seconds per call of each op at one size (slowest rank, best round), and
// the bytes one all-reduce put on this rank's sockets.
struct SizeResult {
  double ag = 1e30, rs = 1e30, rs_ring = 1e30, ar = 1e30, c10d = 1e30;
  double ag_shm = 1e30, rs_shm = 1e30, ar_shm = 1e30;  // the shared-memory transport
  int64_t wire_ours = 0, wire_c10d = 0;
};

// The five ops on fp32 buffers of `numel` elements, checked after timing.
class SizeRun {
 public:
  SizeRun(Groups& g, int64_t numel)
      : g_(g),
        n_(g.env.world_size),
        b_(zt::comm::ShardBegin(numel, n_, g.env.rank)),
        len_(zt::comm::ShardEnd(numel, n_, g.env.rank) - b_),
        gathered_(at::ones({numel})),
        flat_(at::ones({numel})),
        shard_(at::empty({len_})),
        reduced_(at::ones({numel})),
        baseline_vec_({at::zeros({numel})}) {}  // sum of zeros stays finite

  absl::StatusOr<SizeResult> Measure(int warmup, int iters, int rounds);

 private:
  absl::Status Ag() { return g_.ours->AllGather(gathered_.narrow(0, b_, len_), gathered_)->Wait(); }
  absl::Status Rs() { return g_.ours->ReduceScatter(flat_, shard_, ReduceOp::kSum)->Wait(); }
  absl::Status RsRing() { return g_.ring->ReduceScatter(flat_, shard_, ReduceOp::kSum)->Wait(); }
  absl::Status Ar() { return g_.ours->AllReduce(reduced_, ReduceOp::kAvg)->Wait(); }
  absl::Status AgShm() { return g_.shm->AllGather(gathered_.narrow(0, b_, len_), gathered_)->Wait(); }
  absl::Status RsShm() { return g_.shm->ReduceScatter(flat_, shard_, ReduceOp::kSum)->Wait(); }
  absl::Status ArShm() { return g_.shm->AllReduce(reduced_, ReduceOp::kAvg)->Wait(); }
  absl::Status C10dAr() {
    try {
      g_.baseline->allreduce(baseline_vec_)->wait();
    } catch (const std::exception& e) {
      return absl::UnavailableError(std::string("c10d allreduce: ") + e.what());
    }
    return absl::OkStatus();
  }

  Groups& g_;
  const int n_;
  const int64_t b_, len_;  // this rank's shard
  at::Tensor gathered_, flat_, shard_, reduced_;
  std::vector<at::Tensor> baseline_vec_;
};

absl::StatusOr<SizeResult> SizeRun::Measure(int warmup, int iters, int rounds) {
  ProcessGroup& ours = *g_.ours;
  const std::function<absl::Status()> ag = [this] { return Ag(); }, rs = [this] { return Rs(); },
                                      rs_ring = [this] { return RsRing(); }, ar = [this] { return Ar(); },
                                      c10d_ar = [this] { return C10dAr(); }, ag_shm = [this] { return AgShm(); },
                                      rs_shm = [this] { return RsShm(); }, ar_shm = [this] { return ArShm(); };
  // The machine may be shared: interleave the ops over several rounds and
  // keep each op's best round, so a burst of load hits all ops alike.
  SizeResult t;
  for (int round = 0; round < rounds; ++round) {
    const int w = round == 0 ? warmup : 0;
    ZT_ASSIGN_OR_RETURN(double a, TimeOp(ours, w, iters, ag));
    shard_.zero_();
    ZT_ASSIGN_OR_RETURN(double b2, TimeOp(ours, w, iters, rs));
    ZT_RETURN_IF_ERROR(Check(shard_, n_, "reduce-scatter (alltoall)"));
    shard_.zero_();
    ZT_ASSIGN_OR_RETURN(double c, TimeOp(ours, w, iters, rs_ring));
    ZT_RETURN_IF_ERROR(Check(shard_, n_, "reduce-scatter (ring)"));
    ZT_ASSIGN_OR_RETURN(double d, TimeOp(ours, w, iters, ar));
    ZT_ASSIGN_OR_RETURN(double e, TimeOp(ours, w, iters, c10d_ar));
    ZT_ASSIGN_OR_RETURN(double f, TimeOp(ours, w, iters, ag_shm));
    shard_.zero_();
    ZT_ASSIGN_OR_RETURN(double g2, TimeOp(ours, w, iters, rs_shm));
    ZT_RETURN_IF_ERROR(Check(shard_, n_, "reduce-scatter (shared memory)"));
    ZT_ASSIGN_OR_RETURN(double h, TimeOp(ours, w, iters, ar_shm));
    t.ag_shm = std::min(t.ag_shm, f);
    t.rs_shm = std::min(t.rs_shm, g2);
    t.ar_shm = std::min(t.ar_shm, h);
    t.ag = std::min(t.ag, a);
    t.rs = std::min(t.rs, b2);
    t.rs_ring = std::min(t.rs_ring, c);
    t.ar = std::min(t.ar, d);
    t.c10d = std::min(t.c10d, e);
  }
  ZT_RETURN_IF_ERROR(Check(gathered_, 1, "all-gather"));
  ZT_RETURN_IF_ERROR(Check(reduced_, 1, "all-reduce avg"));

  ZT_ASSIGN_OR_RETURN(t.wire_ours, WireBytesSent(ours, ar));
  ZT_ASSIGN_OR_RETURN(t.wire_c10d, WireBytesSent(ours, c10d_ar));
  return t;
}

// Rank 0's table row and RESULT line for a message of S bytes on n ranks;
// returns the size's summary (the last size's becomes the SUMMARY line).
std::string PrintSize(int64_t S, int n, const SizeResult& t) {
  const double ag_factor = static_cast<double>(n - 1) / n;
  const double ar_factor = 2.0 * (n - 1) / n;
  const Result rag = Bandwidth(t.ag, S, ag_factor);
  const Result rrs = Bandwidth(t.rs, S, ag_factor);
  const Result rring = Bandwidth(t.rs_ring, S, ag_factor);
  const Result rar = Bandwidth(t.ar, S, ar_factor);
  const Result rc = Bandwidth(t.c10d, S, ar_factor);
  const Result sag = Bandwidth(t.ag_shm, S, ag_factor);
  const Result srs = Bandwidth(t.rs_shm, S, ag_factor);
  const Result sar = Bandwidth(t.ar_shm, S, ar_factor);
  const double wire_ours = static_cast<double>(t.wire_ours) / S, wire_c10d = static_cast<double>(t.wire_c10d) / S;
  auto cell = [](const Result& x) { return absl::StrFormat("%8.1f %6.3f %6.3f", x.seconds * 1e6, x.alg_bw, x.bus_bw); };
  std::printf("%10s | %s | %s | %s | %s | %s | %7.2f %7.2f | %6.2f %6.2f | %s | %s | %s\n",
              zt::HumanBytes(static_cast<double>(S)).c_str(), cell(rag).c_str(), cell(rrs).c_str(), cell(rring).c_str(),
              cell(rar).c_str(), cell(rc).c_str(), rrs.bus_bw / rar.bus_bw, rrs.bus_bw / rc.bus_bw, wire_ours,
              wire_c10d, cell(sag).c_str(), cell(srs).c_str(), cell(sar).c_str());
  std::printf(
      "RESULT bytes=%lld world=%d ag_us=%.1f ag_busbw=%.4f rs_us=%.1f rs_busbw=%.4f rs_ring_us=%.1f "
      "rs_ring_busbw=%.4f ar_us=%.1f ar_busbw=%.4f c10d_ar_us=%.1f c10d_ar_busbw=%.4f wire_ours=%.4f "
      "wire_c10d=%.4f shm_ag_us=%.1f shm_ag_busbw=%.4f shm_rs_us=%.1f shm_rs_busbw=%.4f shm_ar_us=%.1f "
      "shm_ar_busbw=%.4f\n",
      static_cast<long long>(S), n, rag.seconds * 1e6, rag.bus_bw, rrs.seconds * 1e6, rrs.bus_bw, rring.seconds * 1e6,
      rring.bus_bw, rar.seconds * 1e6, rar.bus_bw, rc.seconds * 1e6, rc.bus_bw, wire_ours, wire_c10d, sag.seconds * 1e6,
      sag.bus_bw, srs.seconds * 1e6, srs.bus_bw, sar.seconds * 1e6, sar.bus_bw);
  std::fflush(stdout);
  // The largest message decides the bandwidth a training step sees.
  return absl::StrFormat(
      "at %s on %d ranks: all-gather %.2f GB/s, reduce-scatter %.2f GB/s busBw = %.2fx our all-reduce, "
      "%.2fx c10d's; an all-reduce sends %.2fx the buffer (optimum %.2f); shared memory: all-gather %.2f GB/s "
      "(%.1fx Gloo), reduce-scatter %.2f (%.1fx), all-reduce %.2f (%.1fx)",
      zt::HumanBytes(static_cast<double>(S)), n, rag.bus_bw, rrs.bus_bw, rrs.bus_bw / rar.bus_bw,
      rrs.bus_bw / rc.bus_bw, wire_ours, ar_factor, sag.bus_bw, sag.bus_bw / rag.bus_bw, srs.bus_bw,
      srs.bus_bw / rrs.bus_bw, sar.bus_bw, sar.bus_bw / rar.bus_bw);
}

// Rank 0: block quantization (ops/quantize.h, the active ISA's kernels) of
// `bytes` of fp32 against memcpy of the same bytes: quantize + dequantize
// must keep up with at least half of memcpy's bandwidth, so that at 1-10
// Gbit/s the wire, not the CPU, bounds a quantized collective. Best of 5.
std::string QuantThroughput(int64_t bytes) {
  const int64_t n = bytes / 4;
  at::Tensor x = at::randn({n}, at::kFloat), y = at::empty({n}, at::kFloat), copy = at::empty({n}, at::kFloat);
  const zt::ops::kernels::KernelTable& k = zt::ops::kernels::ActiveKernels();
  auto best = [](const std::function<void()>& f) {
    double t = 1e30;
    for (int i = 0; i < 5; ++i) {
      const auto t0 = Clock::now();
      f();
      t = std::min(t, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    return t;
  };
  const float* src = x.data_ptr<float>();
  const double t_copy = best([&] { std::memcpy(copy.data_ptr<float>(), src, static_cast<size_t>(n) * 4); });
  std::string summary =
      absl::StrFormat("block quantization of %s fp32 (%s kernels):", zt::HumanBytes(static_cast<double>(bytes)),
                      zt::ops::kernels::IsaName(k.isa));
  std::printf("\nblock quantization, %s of fp32, %s kernels, best of 5 (GB/s of fp32 input):\n",
              zt::HumanBytes(static_cast<double>(bytes)).c_str(), zt::ops::kernels::IsaName(k.isa));
  std::printf("  memcpy %.2f GB/s\n", bytes / t_copy / 1e9);
  for (int bits : {8, 4}) {
    const zt::ops::QuantFormat f{bits, 2048};
    std::vector<float> scales(static_cast<size_t>(zt::ops::QuantScales(n, f)));
    std::vector<uint8_t> q(static_cast<size_t>(zt::ops::QuantPayloadBytes(n, f)));
    const double t_q = best([&] { k.quantize(src, n, f, scales.data(), q.data()); });
    const double t_dq = best([&] { k.dequantize(q.data(), scales.data(), n, f, y.data_ptr<float>(), false); });
    const double ratio = t_copy / (t_q + t_dq);
    std::printf(
        "  int%d, block 2048: quantize %.2f GB/s, dequantize %.2f GB/s, both %.2f GB/s = %.2fx memcpy; wire "
        "%.3fx of fp32\n",
        bits, bytes / t_q / 1e9, bytes / t_dq / 1e9, bytes / (t_q + t_dq) / 1e9, ratio,
        static_cast<double>(zt::ops::QuantWireBytes(n, f)) / static_cast<double>(bytes));
    std::printf(
        "RESULT quant_bits=%d quant_block=2048 bytes=%lld memcpy_gbs=%.4f quantize_gbs=%.4f dequantize_gbs=%.4f "
        "quant_roundtrip_vs_memcpy=%.4f\n",
        bits, static_cast<long long>(bytes), bytes / t_copy / 1e9, bytes / t_q / 1e9, bytes / t_dq / 1e9, ratio);
    absl::StrAppend(&summary, absl::StrFormat(" int%d quantize+dequantize %.2fx memcpy", bits, ratio));
  }
  std::fflush(stdout);
  return summary;
}

absl::Status Run(const std::vector<std::string>& args) {
  zt::cli::Flags flags("zt_bench_collectives");
  flags.Int("min-bytes", 1024, "smallest message (bytes, fp32 elements = bytes / 4)");
  flags.Int("max-bytes", 256LL << 20, "largest message; sizes double from --min-bytes");
  flags.Int("iters", 0, "timed iterations per round (0: about 128 MiB of traffic, 3..100)");
  flags.Int("rounds", 3, "rounds per size, the ops interleaved; each op reports its best round");
  flags.Int("warmup", 2, "untimed iterations per size");
  flags.Int("segment-bytes", 0, "reduce-scatter pipeline segment per peer (0: the group default)");
  ZT_RETURN_IF_ERROR(flags.Parse(args));
  if (flags.help_requested()) {
    std::printf("%s", flags.Usage("zt launch --nproc-per-node N -- zt_bench_collectives [flags]").c_str());
    return absl::OkStatus();
  }
  Settings s;
  s.min_bytes = flags.GetInt("min-bytes");
  s.max_bytes = flags.GetInt("max-bytes");
  s.iters = static_cast<int>(flags.GetInt("iters"));
  s.rounds = std::max<int>(1, static_cast<int>(flags.GetInt("rounds")));
  s.warmup = static_cast<int>(flags.GetInt("warmup"));

  ZT_ASSIGN_OR_RETURN(Groups g, Connect(flags.GetInt("segment-bytes")));
  const int n = g.env.world_size;
  const bool print = g.env.rank == 0;
  // The header names the rounds as given, before clamping.
  if (print) PrintHeader(g, static_cast<int>(flags.GetInt("rounds")));

  std::string summary;
  for (int64_t bytes = s.min_bytes; bytes <= s.max_bytes; bytes *= 2) {
    const int64_t numel = bytes / 4;
    const int64_t S = numel * 4;
    const int iters = s.iters > 0 ? s.iters : static_cast<int>(std::clamp<int64_t>((128LL << 20) / S, 3, 100));
    SizeRun run(g, numel);
    ZT_ASSIGN_OR_RETURN(const SizeResult t, run.Measure(s.warmup, iters, s.rounds));
    if (print) summary = PrintSize(S, n, t);
  }
  if (print) {
    std::printf(
        "RS/AR: reduce-scatter (alltoall) busBw / all-reduce busBw (ours, c10d). wire/S: bytes rank 0's\n"
        "sockets sent during one all-reduce, over the buffer size (optimum 2(n-1)/n = %.2f).\n",
        2.0 * (n - 1) / n);
    const std::string quant = QuantThroughput(std::min<int64_t>(s.max_bytes, 64LL << 20));
    std::printf("SUMMARY: %s; %s\n", summary.c_str(), quant.c_str());
  }
  return g.ours->Barrier()->Wait();
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::Status status = Run(args);
  if (!status.ok()) {
    std::fprintf(stderr, "zt_bench_collectives: %s\n", std::string(status.message()).c_str());
    return status.code() == absl::StatusCode::kInvalidArgument ? 2 : 1;
  }
  return 0;
}
