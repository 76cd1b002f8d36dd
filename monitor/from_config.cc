// Implementation of monitor/from_config.h.
#include "monitor/from_config.h"

#include "monitor/csv_monitor.h"
#include "monitor/tensorboard.h"
#include "util/log.h"
#include "util/status.h"

namespace zt::monitor {

absl::StatusOr<std::unique_ptr<MonitorSet>> MonitorsFromConfig(const Config& config, const std::string& default_dir,
                                                               const std::string& default_job) {
  auto set = std::make_unique<MonitorSet>();
  auto options = [&](const MonitorConfig& m) {
    MonitorOptions o;
    o.output_path = m.output_path.empty() ? default_dir : m.output_path;
    o.job_name = m.job_name == "DeepSpeedJobName" && !default_job.empty() ? default_job : m.job_name;
    return o;
  };
  if (config.csv_monitor.enabled) {
    ZT_ASSIGN_OR_RETURN(auto csv, CsvMonitor::Create(options(config.csv_monitor)));
    ZT_LOG(INFO) << "csv_monitor: " << csv->dir();
    set->Add(std::move(csv));
  }
  if (config.tensorboard.enabled) {
    ZT_ASSIGN_OR_RETURN(auto tb, TensorBoardMonitor::Create(options(config.tensorboard)));
    ZT_LOG(INFO) << "tensorboard: " << tb->path();
    set->Add(std::move(tb));
  }
  return set;
}

}  // namespace zt::monitor
