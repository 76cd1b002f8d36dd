// CSV monitor, like DeepSpeed's csvMonitor: one file per tag under
// <output_path>/<job_name>/, named after the tag with '/' and ' ' replaced by
// '_' ("Train_Samples_train_loss.csv"), header "step,<last tag component>",
// one "step,value" row per event. Rows are appended (a resumed run continues
// the same files; the header is written only into an empty file).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "monitor/file_util.h"
#include "monitor/monitor.h"

namespace zt::monitor {

// The "tensorboard" / "csv_monitor" config sections share these fields.
struct MonitorOptions {
  std::string output_path;  // "": the current directory
  std::string job_name = "DeepSpeedJobName";
};

class CsvMonitor : public Monitor {
 public:
  // Creates <output_path>/<job_name>/ (errors name it and the config key).
  static absl::StatusOr<std::unique_ptr<CsvMonitor>> Create(const MonitorOptions& options);

  std::string name() const override { return "csv_monitor"; }
  // Buffers rows in the open files; Flush() (or destruction) writes them out.
  absl::Status Write(const std::vector<Event>& events) override;
  absl::Status Flush() override;

  const std::string& dir() const { return dir_; }
  // The file a tag goes to: FileNameForTag("Train/Samples/lr") == "Train_Samples_lr.csv".
  static std::string FileNameForTag(const std::string& tag);
  // A value as the row shows it, as Python's repr(float) (so rows match
  // DeepSpeed's): "2.31", "0.0003", "65536.0", "1e-05", "nan".
  static std::string FormatValue(double value);

 private:
  explicit CsvMonitor(std::string dir) : dir_(std::move(dir)) {}
  absl::StatusOr<std::FILE*> FileFor(const std::string& tag);

  std::string dir_;
  std::map<std::string, FilePtr> files_;  // by file name
};

}  // namespace zt::monitor
