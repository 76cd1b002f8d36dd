// zt_bench_multihost: `zt train` across 2 hosts (network namespaces joined by
// a rate-capped link, tests/multihost/netns_hosts.h), one `zt launch` per
// host, per layout: flat stage 2, flat stage 3, hierarchical sharding
// (mics_shard_size = ranks per host, FSDP2's HSDP) and ZeRO++ hpZ
// (zero_hpz_partition_size = ranks per host), the stage-3 layouts again with
// ZeRO++ qwZ (zero_quantized_weights: int8 gathers), and with qwZ + qgZ
// (zero_quantized_gradients: int8 reduce-scatter slices). For each: steps/s, the
// bytes each host sent across the link per step (the interface's counter)
// beside the estimate's formula (estimate/step_traffic.h) and the engine's
// own per-group counters, and the ranks' peak RSS. Beside them, PyTorch DDP
// (benchmarks/ddp_gpt2.py under Debian's python3-torch: the same model shape,
// micro-batch and AdamW step) in the same namespaces over the same link.
//
// Measured in the steady state: the benchmark polls host 0's log and the
// link counters while the job runs and takes the interval between the first
// logged step and the last (setup, the initial broadcast and the end are
// outside it). Needs root (network namespaces). This machine's 2 cores run
// every rank of both hosts: 2 x 2 ranks is oversubscribed 2x, so compute
// there is slower than on real hosts, and 2 x 1 is run beside it.
//
//   zt_bench_multihost [--ranks-per-host 1,2] [--steps 8] [--rate 1gbit] [--precisions fp32,bf16] [--regather 1]
#include <sys/types.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "benchmarks/results.h"
#include "estimate/step_traffic.h"
#include "tests/multihost/netns_hosts.h"
#include "util/strings.h"
#include "util/system_info.h"

namespace zt::bench {
namespace {

using Clock = std::chrono::steady_clock;
using testing::NetnsHosts;

// A GPT-2 of 25M parameters (4 layers of width 640, vocabulary 8192).
constexpr const char* kModel =
    "--model gpt2 --model-set n_layer=4 --model-set n_embd=640 --model-set n_head=10 --model-set vocab=8192 "
    "--model-set seq_len=256 --seq-len 256 --micro-batch 4";
constexpr int kPort = 29631;

struct Layout {
  std::string name;           // flat_stage2, flat_stage3, hsdp_stage3, hpz_stage3, ddp
  int stage = 3;              // 0 for ddp (its traffic is stage 0's all-reduce)
  bool hierarchical = false;  // mics_shard_size = ranks per host
  bool hpz = false;           // zero_hpz_partition_size = ranks per host
  bool qwz = false;           // zero_quantized_weights
  bool qgz = false;           // zero_quantized_gradients (int8)
};

struct Measured {
  bool ok = false;
  double steps_per_s = 0;
  double host_across_per_step = 0;  // bytes the busier host sent on its link per step
  int64_t numel = 0;                // the model's elements, from the engine's log
  std::string engine_sent;          // rank 0's "sent per step" as the engine logged it
  int64_t peak_rss = 0;             // the largest VmHWM of any process on the hosts
  std::string error;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The highest "step N |" host 0's log shows, or 0.
int LastStep(const std::string& log) {
  int last = 0;
  size_t pos = 0;
  while ((pos = log.find("] step ", pos)) != std::string::npos) {
    pos += 7;
    int n = 0;
    if (absl::SimpleAtoi(log.substr(pos, log.find(' ', pos) - pos), &n)) last = std::max(last, n);
  }
  return last;
}

int64_t PeakRss(const NetnsHosts& net) {
  int64_t peak = 0;
  for (int h = 0; h < net.size(); ++h) {
    for (pid_t pid : net.Pids(h)) {
      const std::string status = ReadFile(absl::StrCat("/proc/", pid, "/status"));
      const size_t at = status.find("VmHWM:");
      int64_t kb = 0;
      if (at != std::string::npos &&
          absl::SimpleAtoi(absl::StripAsciiWhitespace(status.substr(at + 6, status.find("kB", at) - at - 6)), &kb)) {
        peak = std::max(peak, kb * 1024);
      }
    }
  }
  return peak;
}

Measured RunLayout(NetnsHosts& net, const Layout& layout, int ranks_per_host, const std::string& precision, int steps,
                   bool regather, const std::string& dir) {
  Measured m;
  const bool ddp = layout.name == "ddp";
  const std::string train = absl::StrCat(
      "train ", kModel, " --precision ", precision, " --stage ", layout.stage, " --steps ", steps,
      " --lr 1e-3 --eval-interval -1 --report none --no-progress --save-dir none --export none --output-dir ", dir,
      " --set steps_per_print=1",
      layout.hierarchical ? absl::StrCat(" --set zero_optimization.mics_shard_size=", ranks_per_host) : "",
      layout.hpz ? absl::StrCat(" --set zero_optimization.zero_hpz_partition_size=", ranks_per_host) : "",
      layout.qwz ? " --set zero_optimization.zero_quantized_weights=true" : "",
      layout.qgz ? " --set zero_optimization.zero_quantized_gradients=true" : "",
      regather && layout.stage == 3 ? " --set zero_optimization.stage3_max_reuse_distance=0" : "");
  std::vector<testing::HostProcess> procs;
  for (int h = 0; h < net.size(); ++h) {
    // torch's Gloo takes the host name's address unless told the interface:
    // in a namespace that is not the link's.
    const std::string program =
        ddp ? absl::StrCat("/usr/bin/python3 ", ZT_SOURCE_DIR, "/benchmarks/ddp_gpt2.py --steps ", steps,
                           " --precision ", precision)
            : absl::StrCat(ZT_BINARY_DIR, "/bin/zt ", train);
    const std::string cmd =
        absl::StrCat("OMP_NUM_THREADS=1 ", ddp ? "GLOO_SOCKET_IFNAME=eth0 " : "", ZT_BINARY_DIR,
                     "/bin/zt launch --nproc-per-node ", ranks_per_host, " --nnodes ", net.size(), " --node-rank ", h,
                     " --master-addr ", net.Address(0), " --master-port ", kPort, " -- ", program);
    auto p = net.Start(h, cmd, absl::StrCat(dir, ".host", h, ".log"));
    if (!p.ok()) {
      m.error = std::string(p.status().message());
      return m;
    }
    procs.push_back(*p);
  }
  // Poll: the time and link bytes when host 0 first logs a step, and at the last.
  const std::string log0 = absl::StrCat(dir, ".host0.log");
  auto across = [&net] {
    int64_t most = 0;
    for (int h = 0; h < net.size(); ++h) most = std::max(most, net.TxBytes(h, 0));
    return most;
  };
  int first_step = 0, seen = 0;
  Clock::time_point t0, t1;
  int64_t b0 = 0, b1 = 0;
  const auto deadline = Clock::now() + std::chrono::minutes(10);
  while (Clock::now() < deadline && seen < steps) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int step = LastStep(ReadFile(log0));
    if (step > seen) {
      const auto now = Clock::now();
      const int64_t bytes = across();
      if (first_step == 0) {
        first_step = step;
        t0 = now;
        b0 = bytes;
      }
      seen = step;
      t1 = now;
      b1 = bytes;
      m.peak_rss = std::max(m.peak_rss, PeakRss(net));
    }
    if (testing::WaitExit(procs[0], std::chrono::milliseconds(0)) != -1 && seen < steps) break;
  }
  for (const testing::HostProcess& p : procs) {
    const int code = testing::WaitExit(p, std::chrono::minutes(2));
    if (code != 0 && m.error.empty()) m.error = absl::StrCat("a host exited with ", code, ": see ", p.log);
  }
  const std::string log = ReadFile(log0);
  // The model's elements: "(E elements" in the engine's start-up line
  // (after " parameters (" at stage 3, whose later lines say "elements"
  // too) or the DDP script's.
  size_t el = std::string::npos, from = 0;
  if (const size_t p = log.find(" parameters ("); p != std::string::npos) {
    from = p + std::string(" parameters (").size();
    el = log.find(" elements", from);
  } else if ((el = log.find(" elements")) != std::string::npos) {
    from = log.rfind('(', el) + 1;
  }
  if (el == std::string::npos || !absl::SimpleAtoi(log.substr(from, el - from), &m.numel) || m.numel <= 0) {
    // Without it every formula would read 0 B beside a real measurement.
    if (m.error.empty()) m.error = absl::StrCat("no model size (\"(N elements\") in host 0's log ", log0);
  }
  const size_t sent = log.rfind("sent per step");
  if (sent != std::string::npos) m.engine_sent = log.substr(sent, log.find('\n', sent) - sent);
  if (m.error.empty() && seen - first_step >= 2) {
    const double seconds = std::chrono::duration<double>(t1 - t0).count();
    m.steps_per_s = (seen - first_step) / seconds;
    // The link counter: the busier host, per step.
    m.host_across_per_step = static_cast<double>(b1 - b0) / (seen - first_step);
    m.ok = true;
  } else if (m.error.empty()) {
    m.error = absl::StrCat("only ", seen, " steps logged in ", log0);
  }
  return m;
}

int Main(int argc, char** argv) {
  std::vector<int> per_host = {1, 2};
  std::vector<std::string> precisions = {"fp32"};
  int steps = 8;
  bool regather = true;
  std::string rate = "1gbit";
  std::vector<std::string> only;  // --layouts: run just these (default: all)
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--ranks-per-host") {
      per_host.clear();
      for (absl::string_view v : absl::StrSplit(value, ',')) per_host.push_back(std::stoi(std::string(v)));
    } else if (flag == "--steps") {
      steps = std::stoi(value);
    } else if (flag == "--rate") {
      rate = value;
    } else if (flag == "--precisions") {
      precisions = absl::StrSplit(value, ',');
    } else if (flag == "--regather") {
      regather = value != "0";
    } else if (flag == "--layouts") {
      only = absl::StrSplit(value, ',');
    } else {
      std::fprintf(stderr, "zt_bench_multihost: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  ResultLog results("multihost", "", std::cout);
  results.Machine(SystemInfoLine());
  std::cout << SystemInfoLine() << "\n";
  testing::HostsOptions ho;
  ho.hosts = 2;
  ho.rate = rate;
  auto made = NetnsHosts::Create(ho);
  if (!made.ok()) {
    std::fprintf(stderr, "zt_bench_multihost: %s\n", std::string(made.status().message()).c_str());
    return 1;
  }
  NetnsHosts& net = **made;
  const std::string dir = absl::StrCat("/tmp/zt_bench_multihost_", ::getpid());
  std::printf("2 hosts, link %s each way (tc tbf; no delay: this kernel has no netem), %s, %d steps%s\n", rate.c_str(),
              "GPT-2 25M (4 x 640, vocab 8192, micro-batch 4 x 256)", steps,
              regather ? "; stage 3 with stage3_max_reuse_distance 0 (backward gathers again, as for a model too "
                         "large to keep gathered)"
                       : "");
  std::printf("%-9s %-5s %-19s %9s %16s %16s %10s  %s\n", "hosts", "dtype", "layout", "steps/s", "across/step",
              "formula", "peak RSS", "engine (rank 0)");
  std::string summary;
  for (const std::string& precision : precisions) {
    for (int l : per_host) {
      std::vector<Layout> layouts = {
          {"flat_stage2", 2, false, false}, {"flat_stage3", 3, false, false}, {"hsdp_stage3", 3, true, false}};
      if (l > 1) layouts.push_back({"hpz_stage3", 3, false, true});  // hpZ over one rank is off
      layouts.push_back({"flat_stage3_qwz", 3, false, false, true});
      layouts.push_back({"hsdp_stage3_qwz", 3, true, false, true});
      if (l > 1) layouts.push_back({"hpz_stage3_qwz", 3, false, true, true});
      layouts.push_back({"flat_stage3_qwz_qgz", 3, false, false, true, true});
      layouts.push_back({"hsdp_stage3_qwz_qgz", 3, true, false, true, true});
      if (l > 1) layouts.push_back({"hpz_stage3_qwz_qgz", 3, false, true, true, true});
      layouts.push_back({"ddp", 0, false, false});
      if (!only.empty()) {
        // flat_stage3 always runs: every ratio is against it.
        layouts.erase(std::remove_if(layouts.begin(), layouts.end(),
                                     [&](const Layout& x) {
                                       return x.name != "flat_stage3" &&
                                              std::find(only.begin(), only.end(), x.name) == only.end();
                                     }),
                      layouts.end());
      }
      double flat3 = 0, hsdp = 0, hpz = 0, ddp = 0, flat3_qwz = 0, flat3_bytes = 0, flat3_qwz_bytes = 0;
      double flat3_qq = 0, flat3_qq_bytes = 0, hpz_qq = 0;
      for (const Layout& layout : layouts) {
        const Measured m = RunLayout(net, layout, l, precision, steps, regather,
                                     absl::StrCat(dir, "_", precision, "_", l, "_", layout.name));
        if (!m.ok) {
          std::fprintf(stderr, "zt_bench_multihost: 2 x %d %s %s: %s\n", l, precision.c_str(), layout.name.c_str(),
                       m.error.c_str());
          return 1;
        }
        estimate::TrafficOptions t;
        t.stage = layout.stage;
        t.world_size = 2 * l;
        t.ranks_per_host = l;
        t.mics_shard_size = layout.hierarchical ? l : -1;
        t.hpz_partition_size = layout.hpz ? l : 1;
        t.quantized_weights = layout.qwz;
        t.quantized_gradient_bits = layout.qgz ? 8 : 0;
        // DDP's gradients are fp32 under bf16 autocast too.
        t.element_bytes = precision == "fp32" || layout.name == "ddp" ? 4 : 2;
        absl::StatusOr<estimate::StepTraffic> f = estimate::EstimateStepTraffic(m.numel, 0, t);
        if (layout.name == "ddp" && f.ok()) {
          // torch's Gloo all-reduces in a ring over the ranks in order: each
          // host has one link out of it, carrying 2(N-1)/N of the gradients.
          const int n = 2 * l;
          f->host_across = 2 * (n - 1) * m.numel * 4 / n;
        }
        // Stage 3's formula counts a forward and a backward gather; the
        // coordinator may keep a chunk gathered in between: the lower bound
        // is stage 2's traffic.
        // With qwZ that one gather is quantized: stage 3 flat sends
        // 2 AG + RS and stage 2 AG + RS, so the bound is stage 2's less the
        // fp32 gather (s3 - s2) plus the quantized one ((s3q - RS) / 2).
        // With qgZ the reduce-scatter is quantized too: it shrinks by what
        // qgZ saves on the flat layout (s3q - s3qg).
        t.hpz_partition_size = 1;
        t.quantized_weights = false;
        t.quantized_gradient_bits = 0;
        const absl::StatusOr<estimate::StepTraffic> flat_f = estimate::EstimateStepTraffic(m.numel, 0, t);
        t.quantized_weights = layout.qwz;
        const absl::StatusOr<estimate::StepTraffic> flat_q = estimate::EstimateStepTraffic(m.numel, 0, t);
        t.quantized_gradient_bits = layout.qgz ? 8 : 0;
        const absl::StatusOr<estimate::StepTraffic> flat_qg = estimate::EstimateStepTraffic(m.numel, 0, t);
        t.stage = layout.stage == 3 ? 2 : layout.stage;
        absl::StatusOr<estimate::StepTraffic> least = estimate::EstimateStepTraffic(m.numel, 0, t);
        if (layout.qwz && least.ok() && flat_f.ok() && flat_q.ok() && flat_qg.ok()) {
          const int64_t gather = flat_f->host_across - least->host_across;
          const int64_t reduce = least->host_across - gather - (flat_q->host_across - flat_qg->host_across);
          least->host_across = reduce + (flat_qg->host_across - reduce) / 2;
        }
        const std::string formula = f.ok() && least.ok()
                                        ? (layout.stage == 3 && least->host_across != f->host_across
                                               ? absl::StrCat(HumanBytes(static_cast<double>(least->host_across)), "-",
                                                              HumanBytes(static_cast<double>(f->host_across)))
                                               : HumanBytes(static_cast<double>(f->host_across)))
                                        : "?";
        std::printf("%-9s %-5s %-19s %9.3f %16s %16s %10s  %s\n", absl::StrCat("2 x ", l).c_str(), precision.c_str(),
                    layout.name.c_str(), m.steps_per_s, HumanBytes(m.host_across_per_step).c_str(), formula.c_str(),
                    HumanBytes(static_cast<double>(m.peak_rss)).c_str(),
                    m.engine_sent.empty() ? "-" : m.engine_sent.c_str());
        ResultRow row;
        row.Set("hosts", 2)
            .Set("ranks_per_host", l)
            .Set("dtype", precision)
            .Set("layout", layout.name)
            .Set("steps_per_s", m.steps_per_s)
            .Set("host_across_bytes", m.host_across_per_step)
            .Set("formula_bytes", f.ok() ? static_cast<double>(f->host_across) : 0.0)
            .Set("formula_lower_bytes", least.ok() ? static_cast<double>(least->host_across) : 0.0)
            .Set("peak_rss", m.peak_rss);
        results.Add(row);
        if (layout.name == "flat_stage3") {
          flat3 = m.steps_per_s;
          flat3_bytes = m.host_across_per_step;
        }
        if (layout.name == "flat_stage3_qwz") {
          flat3_qwz = m.steps_per_s;
          flat3_qwz_bytes = m.host_across_per_step;
        }
        if (layout.name == "flat_stage3_qwz_qgz") {
          flat3_qq = m.steps_per_s;
          flat3_qq_bytes = m.host_across_per_step;
        }
        if (layout.name == "hpz_stage3_qwz_qgz") hpz_qq = m.steps_per_s;
        if (layout.name == "hsdp_stage3") hsdp = m.steps_per_s;
        if (layout.name == "hpz_stage3") hpz = m.steps_per_s;
        if (layout.name == "ddp") ddp = m.steps_per_s;
      }
      absl::StrAppend(
          &summary, summary.empty() ? "" : "; ",
          absl::StrFormat("2 x %d %s at %s: HSDP %.2fx flat stage 3's steps/s", l, precision, rate, hsdp / flat3),
          hpz > 0 ? absl::StrFormat(", hpZ %.2fx", hpz / flat3) : "",
          absl::StrFormat(", qwZ %.2fx (%.2fx the bytes across)", flat3_qwz / flat3, flat3_qwz_bytes / flat3_bytes),
          absl::StrFormat(", qwZ + qgZ %.2fx (%.2fx the bytes across)", flat3_qq / flat3, flat3_qq_bytes / flat3_bytes),
          hpz_qq > 0 ? absl::StrFormat(", hpZ + qwZ + qgZ %.2fx", hpz_qq / flat3) : "",
          absl::StrFormat(", DDP %.2fx", ddp / flat3));
    }
  }
  std::system(absl::StrCat("rm -rf ", dir, "_*").c_str());
  return results.Finish(summary).ok() ? 0 : 1;
}

}  // namespace
}  // namespace zt::bench

int main(int argc, char** argv) { return zt::bench::Main(argc, argv); }
