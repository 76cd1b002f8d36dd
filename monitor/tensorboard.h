// TensorBoard monitor: writes an event file that TensorBoard reads directly,
// without TensorFlow or protobuf: TFRecord framing and the few protobuf
// messages involved (Event, Summary, Summary.Value with simple_value) are
// encoded by hand. Scalars only; values are stored as float32 (TensorBoard's
// simple_value), so they read back rounded to float.
//
// File: <output_path>/<job_name>/events.out.tfevents.<unix seconds>.<hostname>
// (".1", ".2"... appended if that name exists). Record 0 is the
// file_version "brain.Event:2" event; then one Event per step written.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "monitor/csv_monitor.h"  // MonitorOptions
#include "monitor/file_util.h"
#include "monitor/monitor.h"

namespace zt::monitor {

inline constexpr char kEventFileVersion[] = "brain.Event:2";

class TensorBoardMonitor : public Monitor {
 public:
  // Creates the directory and the file and writes the file_version record.
  static absl::StatusOr<std::unique_ptr<TensorBoardMonitor>> Create(const MonitorOptions& options);

  std::string name() const override { return "tensorboard"; }
  // Events with the same step become one Event record (in order of each
  // step's first appearance); buffered until Flush() or destruction.
  absl::Status Write(const std::vector<Event>& events) override;
  absl::Status Flush() override;

  const std::string& path() const { return path_; }

 private:
  TensorBoardMonitor(std::string path, FilePtr file) : path_(std::move(path)), file_(std::move(file)) {}
  absl::Status Append(const std::string& record_data);

  std::string path_;
  FilePtr file_;
};

// The encoding, exposed for tests and tools.
struct ScalarValue {
  std::string tag;
  float value = 0.0f;
};
// Event{wall_time = 1, file_version = 3}.
std::string EncodeFileVersionEvent(double wall_time, const std::string& version);
// Event{wall_time = 1, step = 2, summary = 5 {value = 1 {tag = 1, simple_value = 2}...}}.
std::string EncodeScalarEvent(double wall_time, int64_t step, const std::vector<ScalarValue>& values);
// TFRecord: uint64 length (LE), masked crc32c(length bytes), data, masked crc32c(data).
std::string FrameTfRecord(const std::string& data);

}  // namespace zt::monitor
