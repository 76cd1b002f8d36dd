// zt_bench_local_comm: what talking costs between the ranks of one host.
// `zt train` on a 25M-parameter GPT-2 (fp32, micro-batch 4 x 256, one thread
// per rank), 2 ranks, stages 0, 2 and 3, over each transport (Gloo's TCP
// loopback and shared memory), against the roofline: two single-rank runs of
// the same per-rank work side by side, with no communication (the same two
// cores busy, the same memory traffic, nothing exchanged). A single run
// alone is printed too.
//
// Step time: the median of each run's csv_monitor step times after the
// first `--warmup` steps (rank 0's; start-up, the initial broadcast and
// the end are outside it). Configurations alternate within each round, and
// the ratios are taken per round against that round's roofline, so slow
// drift in the machine's load cancels; the table gives the median over
// rounds.
//
//   zt_bench_local_comm [--steps 10] [--warmup 3] [--rounds 2] [--stages 0,2,3] [--transports gloo,shm]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "benchmarks/median.h"
#include "benchmarks/results.h"
#include "util/system_info.h"

namespace zt::bench {
namespace {

constexpr char kModel[] =
    "--model gpt2 --model-set n_layer=4 --model-set n_embd=640 --model-set n_head=10 --model-set vocab=8192 "
    "--model-set seq_len=256 --seq-len 256 --micro-batch 4";

struct Run {
  std::string name;       // "solo", "pair", "gloo_stage2", ...
  std::string transport;  // "", "gloo", "shm"
  int stage = 0;
  int ranks = 1;
  bool pair = false;  // two single-rank processes side by side
};

std::string Train(const std::string& dir, const Run& run, int steps) {
  return absl::StrCat(ZT_BINARY_DIR, "/bin/zt train ", kModel, " --stage ", run.stage, " --nproc ", run.ranks,
                      " --threads 1", " --steps ", steps,
                      " --lr 1e-3 --eval-interval -1 --report none --no-progress --save-dir none --export none "
                      "--output-dir ",
                      dir, " --set steps_per_print=1 --set csv_monitor.enabled=true --set 'csv_monitor.output_path=\"",
                      dir, "/csv\"' --set 'csv_monitor.job_name=\"job\"'");
}

// Step times (seconds) from a run's csv_monitor file, after `warmup` steps.
std::vector<double> StepTimes(const std::string& dir, int warmup) {
  std::ifstream in(dir + "/csv/job/Train_Samples_step_time_sec.csv");
  std::vector<double> out;
  std::string line;
  int i = 0;
  while (std::getline(in, line)) {
    std::vector<std::string> f = absl::StrSplit(line, ',');
    double v = 0;
    if (f.size() < 2 || !absl::SimpleAtod(f.back(), &v)) continue;
    if (i++ >= warmup) out.push_back(v);
  }
  return out;
}

// Runs one configuration; returns its median step time, or a negative value
// (and prints why) on failure.
double Measure(const Run& run, int steps, int warmup, const std::string& root) {
  const std::string dir = absl::StrCat(root, "/", run.name);
  std::string cmd = absl::StrCat("rm -rf ", dir, " && mkdir -p ", dir, " && ");
  const std::string env =
      absl::StrCat("OMP_NUM_THREADS=1 ", run.transport.empty() ? "" : "ZT_COMM_BACKEND=", run.transport, " ");
  if (run.pair) {
    absl::StrAppend(&cmd, "(", env, Train(dir + "/a", run, steps), " > ", dir, "/a.log 2>&1 & ", env,
                    Train(dir + "/b", run, steps), " > ", dir, "/b.log 2>&1 & wait)");
  } else {
    absl::StrAppend(&cmd, env, Train(dir, run, steps), " > ", dir, "/train.log 2>&1");
  }
  if (std::system(cmd.c_str()) != 0) {
    std::fprintf(stderr, "zt_bench_local_comm: %s failed; see the logs in %s\n", run.name.c_str(), dir.c_str());
    return -1;
  }
  std::vector<double> times;
  for (const std::string& sub : run.pair ? std::vector<std::string>{"/a", "/b"} : std::vector<std::string>{""}) {
    std::vector<double> t = StepTimes(dir + sub, warmup);
    times.insert(times.end(), t.begin(), t.end());
  }
  if (times.empty()) {
    std::fprintf(stderr, "zt_bench_local_comm: %s logged no step times after %d warm-up steps in %s\n",
                 run.name.c_str(), warmup, dir.c_str());
    return -1;
  }
  return Median(times);
}

int Main(int argc, char** argv) {
  int steps = 10, warmup = 3, rounds = 2;
  std::vector<int> stages = {0, 2, 3};
  std::vector<std::string> transports = {"gloo", "shm"};
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--steps") {
      steps = std::stoi(value);
    } else if (flag == "--warmup") {
      warmup = std::stoi(value);
    } else if (flag == "--rounds") {
      rounds = std::stoi(value);
    } else if (flag == "--stages") {
      stages.clear();
      for (absl::string_view v : absl::StrSplit(value, ',')) stages.push_back(std::stoi(std::string(v)));
    } else if (flag == "--transports") {
      transports = absl::StrSplit(value, ',');
    } else {
      std::fprintf(stderr, "zt_bench_local_comm: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  if (steps <= warmup + 1) {
    std::fprintf(stderr, "zt_bench_local_comm: --steps must exceed --warmup by at least 2\n");
    return 2;
  }
  ResultLog results("local_comm", "", std::cout);
  results.Machine(SystemInfoLine());
  std::cout << SystemInfoLine() << "\n";
  std::vector<Run> runs = {{"solo", "", 0, 1, false}, {"pair", "", 0, 1, true}};
  for (int s : stages) {
    for (const std::string& t : transports) runs.push_back({absl::StrCat(t, "_stage", s), t, s, 2, false});
  }
  const std::string root = absl::StrCat("/tmp/zt_bench_local_comm_", ::getpid());
  std::map<std::string, std::vector<double>> seconds, ratio;
  for (int round = 1; round <= rounds; ++round) {
    // Alternate the order between rounds.
    std::vector<Run> order = runs;
    if (round % 2 == 0) std::reverse(order.begin(), order.end());
    std::map<std::string, double> t;
    for (const Run& run : order) {
      t[run.name] = Measure(run, steps, warmup, root);
      if (t[run.name] < 0) return 1;
    }
    for (const Run& run : runs) {
      seconds[run.name].push_back(t[run.name]);
      ratio[run.name].push_back(t[run.name] / t["pair"]);
      ResultRow row;
      row.Set("round", round).Set("run", run.name).Set("transport", run.transport.empty() ? "none" : run.transport);
      row.Set("stage", run.stage).Set("ranks", run.ranks).Set("step_s", t[run.name]);
      row.Set("vs_roofline", t[run.name] / t["pair"]);
      results.Add(row);
    }
  }
  std::printf(
      "\nGPT-2 25M (4 x 640, vocab 8192), fp32, micro-batch 4 x 256 per rank, 1 thread per rank, %d steps "
      "(median after %d), %d rounds\n",
      steps, warmup, rounds);
  std::printf("roofline = two single-rank runs side by side, no communication\n");
  std::printf("%-14s %-9s %6s %6s %12s %14s\n", "run", "transport", "stage", "ranks", "step s", "vs roofline");
  for (const Run& run : runs) {
    std::printf("%-14s %-9s %6d %6d %12.3f %14.3f\n", run.name.c_str(),
                run.transport.empty() ? "-" : run.transport.c_str(), run.stage, run.ranks, Median(seconds[run.name]),
                Median(ratio[run.name]));
  }
  std::string summary = absl::StrFormat("2 ranks on one host, step time over the no-communication roofline (%.3f s):",
                                        Median(seconds["pair"]));
  for (const std::string& tr : transports) {
    absl::StrAppend(&summary, " ", tr);
    for (int s : stages) {
      absl::StrAppend(&summary, absl::StrFormat(" st%d %.2fx", s, Median(ratio[absl::StrCat(tr, "_stage", s)])));
    }
    absl::StrAppend(&summary, ";");
  }
  absl::StrAppend(&summary, " target <= 1.05x on shared memory");
  std::system(absl::StrCat("rm -rf ", root).c_str());
  return results.Finish(summary).ok() ? 0 : 1;
}

}  // namespace
}  // namespace zt::bench

int main(int argc, char** argv) { return zt::bench::Main(argc, argv); }
