// Reads TensorBoard event files (any writer's, scalars only): checks both
// CRCs of every TFRecord and decodes Event/Summary/Value protobuf generically
// (unknown fields skipped, wire types checked). Written apart from the
// writer in tensorboard.cc so the tests can catch the writer's mistakes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace zt::monitor {

// One Summary.Value with a simple_value.
struct ScalarRecord {
  double wall_time = 0.0;
  int64_t step = 0;
  std::string tag;
  float value = 0.0f;
};

struct EventFileContents {
  std::string file_version;          // e.g. "brain.Event:2"; "" if none
  int64_t file_version_record = -1;  // index of the record that carried it
  int64_t num_records = 0;
  std::vector<ScalarRecord> scalars;  // in file order
};

// Errors name the file, the record index and its byte offset, e.g.
// "event file /r/events.out...: record 3 at byte 210: data CRC mismatch ...".
// A truncated last record is an error too (a file still being written may
// end in one; read again after the writer flushes).
absl::StatusOr<EventFileContents> ReadEventFile(const std::string& path);

}  // namespace zt::monitor
