// Event-file reader: TFRecord frames -> generic protobuf fields -> scalars.
#include "monitor/event_file_reader.h"

#include <errno.h>

#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "monitor/crc32c.h"
#include "monitor/file_util.h"
#include "util/status.h"

namespace zt::monitor {
namespace {

uint64_t LoadLE(const unsigned char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// One decoded protobuf field; `bytes` is set for length-delimited fields,
// `number` holds a varint or the raw bits of a fixed32/fixed64.
struct Field {
  uint32_t field = 0;
  uint32_t wire_type = 0;
  uint64_t number = 0;
  std::string bytes;
};

// Splits a message into fields; fails on malformed varints, lengths past the
// end, group wire types (3, 4) and unknown wire types.
absl::StatusOr<std::vector<Field>> ParseMessage(const std::string& msg, const std::string& what) {
  std::vector<Field> fields;
  size_t pos = 0;
  auto varint = [&](uint64_t* out) -> bool {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos >= msg.size()) return false;
      const unsigned char b = static_cast<unsigned char>(msg[pos++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) {
        *out = v;
        return true;
      }
    }
    return false;
  };
  while (pos < msg.size()) {
    const size_t at = pos;
    uint64_t key;
    if (!varint(&key)) return absl::DataLossError(absl::StrCat(what, ": bad field key at byte ", at));
    Field f;
    f.field = static_cast<uint32_t>(key >> 3);
    f.wire_type = static_cast<uint32_t>(key & 7);
    if (f.field == 0) return absl::DataLossError(absl::StrCat(what, ": field number 0 at byte ", at));
    switch (f.wire_type) {
      case 0:
        if (!varint(&f.number)) return absl::DataLossError(absl::StrCat(what, ": bad varint at byte ", pos));
        break;
      case 1:
      case 5: {
        const size_t n = f.wire_type == 1 ? 8 : 4;
        if (msg.size() - pos < n) {
          return absl::DataLossError(absl::StrCat(what, ": field ", f.field, " runs past the end"));
        }
        f.number = LoadLE(reinterpret_cast<const unsigned char*>(msg.data() + pos), static_cast<int>(n));
        pos += n;
        break;
      }
      case 2: {
        uint64_t len;
        if (!varint(&len) || len > msg.size() - pos) {
          return absl::DataLossError(absl::StrCat(what, ": field ", f.field, " has a bad length"));
        }
        f.bytes = msg.substr(pos, len);
        pos += len;
        break;
      }
      default:
        return absl::DataLossError(absl::StrCat(what, ": field ", f.field, " has unsupported wire type ", f.wire_type));
    }
    fields.push_back(std::move(f));
  }
  return fields;
}

absl::Status ExpectWire(const Field& f, uint32_t wire_type, const std::string& what, const char* name) {
  if (f.wire_type == wire_type) return absl::OkStatus();
  return absl::DataLossError(
      absl::StrCat(what, ": ", name, " (field ", f.field, ") has wire type ", f.wire_type, ", expected ", wire_type));
}

// Event -> its scalars (and file_version).
absl::Status DecodeEvent(const std::string& data, const std::string& what, int64_t record, EventFileContents* out) {
  ZT_ASSIGN_OR_RETURN(std::vector<Field> fields, ParseMessage(data, what));
  double wall_time = 0.0;
  int64_t step = 0;
  std::vector<std::pair<std::string, float>> values;
  for (const Field& f : fields) {
    if (f.field == 1) {
      ZT_RETURN_IF_ERROR(ExpectWire(f, 1, what, "Event.wall_time"));
      std::memcpy(&wall_time, &f.number, sizeof(wall_time));
    } else if (f.field == 2) {
      ZT_RETURN_IF_ERROR(ExpectWire(f, 0, what, "Event.step"));
      step = static_cast<int64_t>(f.number);
    } else if (f.field == 3) {
      ZT_RETURN_IF_ERROR(ExpectWire(f, 2, what, "Event.file_version"));
      if (out->file_version_record < 0) {
        out->file_version = f.bytes;
        out->file_version_record = record;
      }
    } else if (f.field == 5) {
      ZT_RETURN_IF_ERROR(ExpectWire(f, 2, what, "Event.summary"));
      ZT_ASSIGN_OR_RETURN(std::vector<Field> summary, ParseMessage(f.bytes, what + " summary"));
      for (const Field& v : summary) {
        if (v.field != 1) continue;
        ZT_RETURN_IF_ERROR(ExpectWire(v, 2, what, "Summary.value"));
        ZT_ASSIGN_OR_RETURN(std::vector<Field> value, ParseMessage(v.bytes, what + " summary value"));
        std::string tag;
        bool has_simple = false;
        float simple = 0.0f;
        for (const Field& x : value) {
          if (x.field == 1) {
            ZT_RETURN_IF_ERROR(ExpectWire(x, 2, what, "Value.tag"));
            tag = x.bytes;
          } else if (x.field == 2) {
            ZT_RETURN_IF_ERROR(ExpectWire(x, 5, what, "Value.simple_value"));
            const uint32_t bits = static_cast<uint32_t>(x.number);
            std::memcpy(&simple, &bits, sizeof(simple));
            has_simple = true;
          }
        }
        if (has_simple) values.emplace_back(std::move(tag), simple);
      }
    }
  }
  for (auto& [tag, value] : values) out->scalars.push_back({wall_time, step, std::move(tag), value});
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<EventFileContents> ReadEventFile(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot open event file ", path, ": ", std::strerror(errno)));
  }
  std::string bytes;
  char buf[1 << 16];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) bytes.append(buf, n);
  if (std::ferror(f.get())) {
    return absl::DataLossError(absl::StrCat("cannot read event file ", path, ": ", std::strerror(errno)));
  }

  EventFileContents out;
  size_t pos = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  for (int64_t record = 0; pos < bytes.size(); ++record) {
    const std::string what = absl::StrCat("event file ", path, ": record ", record, " at byte ", pos);
    if (bytes.size() - pos < 12) {
      return absl::DataLossError(
          absl::StrCat(what, ": truncated header (", bytes.size() - pos, " of 12 bytes); the file was cut short"));
    }
    const uint64_t len = LoadLE(p + pos, 8);
    const uint32_t len_crc = static_cast<uint32_t>(LoadLE(p + pos + 8, 4));
    const uint32_t want_len_crc = MaskCrc32c(Crc32c(0, p + pos, 8));
    if (len_crc != want_len_crc) {
      return absl::DataLossError(
          absl::StrFormat("%s: length CRC mismatch (stored 0x%08x, computed 0x%08x); the file "
                          "is corrupt",
                          what, len_crc, want_len_crc));
    }
    if (len > bytes.size() - pos - 12 || bytes.size() - pos - 12 - len < 4) {
      return absl::DataLossError(absl::StrCat(what, ": truncated record (", len, " data bytes announced, ",
                                              bytes.size() - pos - 12, " bytes left); the file was cut short"));
    }
    const std::string data = bytes.substr(pos + 12, len);
    const uint32_t data_crc = static_cast<uint32_t>(LoadLE(p + pos + 12 + len, 4));
    const uint32_t want_data_crc = MaskCrc32c(Crc32c(0, data.data(), data.size()));
    if (data_crc != want_data_crc) {
      return absl::DataLossError(
          absl::StrFormat("%s: data CRC mismatch (stored 0x%08x, computed 0x%08x); the file "
                          "is corrupt",
                          what, data_crc, want_data_crc));
    }
    ZT_RETURN_IF_ERROR(DecodeEvent(data, what, record, &out));
    pos += 12 + len + 4;
    out.num_records = record + 1;
  }
  return out;
}

}  // namespace zt::monitor
