// TensorBoard event-file writer: hand-encoded protobuf in TFRecord frames.
#include "monitor/tensorboard.h"

#include <errno.h>
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "monitor/crc32c.h"
#include "util/file_io.h"
#include "util/status.h"

namespace zt::monitor {
namespace {

// Protobuf wire types.
constexpr uint32_t kVarint = 0, kFixed64 = 1, kLengthDelimited = 2, kFixed32 = 5;

void PutVarint(std::string* out, uint64_t v) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void PutKey(std::string* out, uint32_t field, uint32_t wire_type) { PutVarint(out, (field << 3) | wire_type); }

void PutFixedLE(std::string* out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

void PutDouble(std::string* out, uint32_t field, double v) {
  uint64_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutKey(out, field, kFixed64);
  PutFixedLE(out, bits, 8);
}

void PutFloat(std::string* out, uint32_t field, float v) {
  uint32_t bits;
  std::memcpy(&bits, &v, sizeof(bits));
  PutKey(out, field, kFixed32);
  PutFixedLE(out, bits, 4);
}

void PutBytes(std::string* out, uint32_t field, const std::string& bytes) {
  PutKey(out, field, kLengthDelimited);
  PutVarint(out, bytes.size());
  out->append(bytes);
}

double WallTimeNow() {
  struct timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

std::string HostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string host(buf);
  for (char& c : host) {
    if (c == '/') c = '_';
  }
  return host;
}

}  // namespace

std::string EncodeFileVersionEvent(double wall_time, const std::string& version) {
  std::string out;
  PutDouble(&out, 1, wall_time);
  PutBytes(&out, 3, version);
  return out;
}

std::string EncodeScalarEvent(double wall_time, int64_t step, const std::vector<ScalarValue>& values) {
  std::string summary;
  for (const ScalarValue& v : values) {
    std::string value;
    PutBytes(&value, 1, v.tag);
    PutFloat(&value, 2, v.value);
    PutBytes(&summary, 1, value);
  }
  std::string out;
  PutDouble(&out, 1, wall_time);
  PutKey(&out, 2, kVarint);
  PutVarint(&out, static_cast<uint64_t>(step));  // int64: negative steps take 10 bytes
  PutBytes(&out, 5, summary);
  return out;
}

std::string FrameTfRecord(const std::string& data) {
  std::string out;
  PutFixedLE(&out, data.size(), 8);
  const uint32_t len_crc = MaskCrc32c(Crc32c(0, out.data(), 8));
  PutFixedLE(&out, len_crc, 4);
  out.append(data);
  PutFixedLE(&out, MaskCrc32c(Crc32c(0, data.data(), data.size())), 4);
  return out;
}

absl::StatusOr<std::unique_ptr<TensorBoardMonitor>> TensorBoardMonitor::Create(const MonitorOptions& options) {
  std::string dir = JoinPath(options.output_path, options.job_name);
  if (dir.empty()) dir = ".";
  ZT_RETURN_IF_ERROR(MakeDirs(dir, "tensorboard.output_path"));
  const double now = WallTimeNow();
  const std::string base =
      JoinPath(dir, absl::StrCat("events.out.tfevents.", static_cast<int64_t>(now), ".", HostName()));
  std::string path = base;
  int fd = -1;
  for (int suffix = 1; suffix < 1000; ++suffix) {
    fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) break;
    path = absl::StrCat(base, ".", suffix);
  }
  if (fd < 0) {
    return absl::PermissionDeniedError(absl::StrCat("cannot create ", path, ": ", std::strerror(errno),
                                                    "; set tensorboard.output_path to a writable directory"));
  }
  FilePtr file(::fdopen(fd, "wb"));
  if (file == nullptr) {
    ::close(fd);
    return absl::InternalError(absl::StrCat("fdopen ", path, ": ", std::strerror(errno)));
  }
  std::unique_ptr<TensorBoardMonitor> m(new TensorBoardMonitor(path, std::move(file)));
  ZT_RETURN_IF_ERROR(m->Append(EncodeFileVersionEvent(now, kEventFileVersion)));
  ZT_RETURN_IF_ERROR(m->Flush());
  return m;
}

absl::Status TensorBoardMonitor::Append(const std::string& record_data) {
  const std::string record = FrameTfRecord(record_data);
  if (std::fwrite(record.data(), 1, record.size(), file_.get()) != record.size()) {
    return absl::DataLossError(absl::StrCat("cannot write to ", path_, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TensorBoardMonitor::Write(const std::vector<Event>& events) {
  std::vector<std::pair<int64_t, std::vector<ScalarValue>>> by_step;
  std::map<int64_t, size_t> index;
  for (const Event& e : events) {
    auto [it, inserted] = index.emplace(e.step, by_step.size());
    if (inserted) by_step.emplace_back(e.step, std::vector<ScalarValue>{});
    by_step[it->second].second.push_back({e.tag, static_cast<float>(e.value)});
  }
  const double now = WallTimeNow();
  for (const auto& [step, values] : by_step) ZT_RETURN_IF_ERROR(Append(EncodeScalarEvent(now, step, values)));
  return absl::OkStatus();
}

absl::Status TensorBoardMonitor::Flush() {
  if (std::fflush(file_.get()) != 0) {
    return absl::DataLossError(absl::StrCat("cannot write ", path_, ": ", std::strerror(errno),
                                            "; free disk space or set tensorboard.output_path elsewhere"));
  }
  return absl::OkStatus();
}

}  // namespace zt::monitor
