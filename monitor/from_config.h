// The monitors a config asks for (`csv_monitor`, `tensorboard`), one place
// for both users: the engine (what DeepSpeed's engine writes for any
// program) and `zt train` (which writes more events into the same sinks).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "config/config.h"
#include "monitor/monitor.h"

namespace zt::monitor {

// Every enabled monitor, each under <output_path>/<job_name>/. An empty
// output_path in the config means `default_dir`; DeepSpeed's default job
// name ("DeepSpeedJobName") means `default_job` when that is not empty.
// Creates the directories; errors name the config key. The set is empty
// when no monitor is enabled.
absl::StatusOr<std::unique_ptr<MonitorSet>> MonitorsFromConfig(const Config& config, const std::string& default_dir,
                                                               const std::string& default_job = "");

}  // namespace zt::monitor
