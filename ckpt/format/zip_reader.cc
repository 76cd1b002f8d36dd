// ReadZipDirectory: finds the end-of-central-directory record (and its ZIP64
// twin), walks the central directory and each local header, and checks that
// every record lies inside the file, so later reads can trust the offsets.
#include <algorithm>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckpt/format/zip.h"
#include "util/status.h"

namespace zt::ckpt {

using zip_internal::Get16;
using zip_internal::Get32;
using zip_internal::Get64;
using zip_internal::kCentralHeaderSig;
using zip_internal::kCentralHeaderSize;
using zip_internal::kEndSig;
using zip_internal::kEndSize;
using zip_internal::kLocalHeaderSig;
using zip_internal::kLocalHeaderSize;
using zip_internal::kZip64EndSig;
using zip_internal::kZip64EndSize;
using zip_internal::kZip64ExtraId;
using zip_internal::kZip64LocatorSig;
using zip_internal::kZip64LocatorSize;

namespace {

std::string Prefix(const ReadFile& file) { return absl::StrCat("checkpoint file '", file.path(), "': "); }

absl::Status NotZip(const ReadFile& file, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(Prefix(file), "not a zip file or truncated (", why,
                                          "); was it written completely? a .pt file from torch.save is a zip "
                                          "archive (torch >= 1.6)"));
}

absl::Status Corrupt(const ReadFile& file, absl::string_view why) {
  return absl::DataLossError(absl::StrCat(Prefix(file), "corrupted zip structure: ", why));
}

// Where the central directory is, from the end record (or its ZIP64 twin).
struct DirectoryBounds {
  uint64_t count = 0;   // records
  uint64_t size = 0;    // bytes
  uint64_t offset = 0;  // of its first byte; also where the data area ends
};

// Scans the file's tail for the end-of-central-directory record, follows a
// ZIP64 locator, and checks that the directory lies before the end record
// and can hold its record count.
absl::StatusOr<DirectoryBounds> FindDirectory(const ReadFile& file) {
  const uint64_t size = file.size();
  if (size < kEndSize) return NotZip(file, absl::StrCat("only ", size, " bytes"));

  // The end record sits in the last 22 + 65535 (comment) bytes; scan backwards.
  const uint64_t tail_len = std::min<uint64_t>(size, kEndSize + 0xFFFF + kZip64LocatorSize);
  std::string tail(tail_len, '\0');
  ZT_RETURN_IF_ERROR(file.PRead(tail.data(), tail.size(), size - tail_len));
  int64_t end_at = -1;
  for (int64_t i = static_cast<int64_t>(tail_len - kEndSize); i >= 0; --i) {
    if (Get32(&tail[i]) == kEndSig && i + kEndSize + Get16(&tail[i + 20]) <= tail_len) {
      end_at = i;
      break;
    }
  }
  if (end_at < 0) return NotZip(file, "no end-of-central-directory record");
  const char* end = &tail[end_at];
  const uint64_t end_offset = size - tail_len + static_cast<uint64_t>(end_at);
  DirectoryBounds cd;
  cd.count = Get16(end + 10);
  cd.size = Get32(end + 12);
  cd.offset = Get32(end + 16);
  uint64_t cd_limit = end_offset;  // the directory ends before this

  // ZIP64: a locator right before the end record points at the ZIP64 end record.
  if (end_at >= static_cast<int64_t>(kZip64LocatorSize) && Get32(end - kZip64LocatorSize) == kZip64LocatorSig) {
    const uint64_t z64_offset = Get64(end - kZip64LocatorSize + 8);
    if (z64_offset > end_offset - kZip64LocatorSize || end_offset - kZip64LocatorSize - z64_offset < kZip64EndSize) {
      return Corrupt(file, absl::StrCat("ZIP64 end record offset ", z64_offset, " is out of range"));
    }
    char z64[kZip64EndSize];
    ZT_RETURN_IF_ERROR(file.PRead(z64, sizeof(z64), z64_offset));
    if (Get32(z64) != kZip64EndSig) {
      return Corrupt(file, absl::StrCat("no ZIP64 end record at offset ", z64_offset));
    }
    cd.count = Get64(z64 + 32);
    cd.size = Get64(z64 + 40);
    cd.offset = Get64(z64 + 48);
    cd_limit = z64_offset;
  } else if (cd.count == 0xFFFF || cd.size == 0xFFFFFFFFu || cd.offset == 0xFFFFFFFFu) {
    return NotZip(file, "ZIP64 end record missing");
  }
  if (cd.offset > cd_limit || cd.size > cd_limit - cd.offset) {
    return NotZip(file, absl::StrCat("central directory [", cd.offset, ", +", cd.size,
                                     ") lies beyond the end record at ", cd_limit));
  }
  if (cd.count > cd.size / kCentralHeaderSize) {
    return Corrupt(file, absl::StrCat(cd.count, " records cannot fit in a ", cd.size, "-byte central directory"));
  }
  return cd;
}

// ZIP64 extra: the 64-bit values of whichever fields are 0xFFFFFFFF, in
// order. `x` holds the record's `extra_len` bytes of extra fields.
absl::Status ReadZip64Extra(const ReadFile& file, const char* x, size_t extra_len, const std::string& name,
                            uint64_t& usize, uint64_t& csize, uint64_t& header_offset) {
  for (size_t xa = 0; xa + 4 <= extra_len;) {
    const uint16_t id = Get16(x + xa);
    const size_t len = Get16(x + xa + 2);
    if (xa + 4 + len > extra_len) return Corrupt(file, absl::StrCat("record '", name, "': bad extra field"));
    if (id == kZip64ExtraId) {
      size_t f = xa + 4;
      auto take = [&](uint64_t& v) -> bool {
        if (v != 0xFFFFFFFFu) return true;
        if (f + 8 > xa + 4 + len) return false;
        v = Get64(x + f);
        f += 8;
        return true;
      };
      if (!take(usize) || !take(csize) || !take(header_offset)) {
        return Corrupt(file, absl::StrCat("record '", name, "': ZIP64 extra field too short"));
      }
    }
    xa += 4 + len;
  }
  return absl::OkStatus();
}

// Parses central directory entry `i`, which starts at cd[*at], and advances
// *at past it. Fills name, crc32, size and header_offset; only stored,
// unencrypted records pass.
absl::StatusOr<ZipEntry> ParseDirectoryEntry(const ReadFile& file, const std::string& cd, uint64_t cd_offset,
                                             uint64_t i, size_t* at) {
  if (cd.size() - *at < kCentralHeaderSize || Get32(&cd[*at]) != kCentralHeaderSig) {
    return Corrupt(
        file, absl::StrCat("central directory entry ", i, " at offset ", cd_offset + *at, " has no valid signature"));
  }
  const char* h = &cd[*at];
  const uint16_t flags = Get16(h + 8);
  const uint16_t method = Get16(h + 10);
  ZipEntry e;
  e.crc32 = Get32(h + 16);
  uint64_t csize = Get32(h + 20);
  uint64_t usize = Get32(h + 24);
  const size_t name_len = Get16(h + 28);
  const size_t extra_len = Get16(h + 30);
  const size_t comment_len = Get16(h + 32);
  e.header_offset = Get32(h + 42);
  if (cd.size() - *at - kCentralHeaderSize < name_len + extra_len + comment_len) {
    return Corrupt(file, absl::StrCat("central directory entry ", i, " runs past the directory"));
  }
  e.name.assign(h + kCentralHeaderSize, name_len);
  ZT_RETURN_IF_ERROR(
      ReadZip64Extra(file, h + kCentralHeaderSize + name_len, extra_len, e.name, usize, csize, e.header_offset));
  if (flags & 1) {
    return absl::UnimplementedError(absl::StrCat(Prefix(file), "record '", e.name, "' is encrypted"));
  }
  if (method != 0 || csize != usize) {
    return absl::UnimplementedError(absl::StrCat(Prefix(file), "record '", e.name, "' is compressed (method ", method,
                                                 "); only stored records are supported, as torch.save "
                                                 "writes them"));
  }
  e.size = usize;
  *at += kCentralHeaderSize + name_len + extra_len + comment_len;
  return e;
}

// Reads e's local header, which repeats the name and may carry a different
// extra field, to find e.data_offset; the data must end before the
// directory at `cd_offset`.
absl::Status LocateData(const ReadFile& file, uint64_t cd_offset, ZipEntry& e) {
  const size_t name_len = e.name.size();
  if (e.header_offset > cd_offset || cd_offset - e.header_offset < kLocalHeaderSize + name_len) {
    return Corrupt(file, absl::StrCat("record '", e.name, "': local header offset ", e.header_offset,
                                      " is outside the data area"));
  }
  std::string local(kLocalHeaderSize + name_len, '\0');
  ZT_RETURN_IF_ERROR(file.PRead(local.data(), local.size(), e.header_offset));
  if (Get32(local.data()) != kLocalHeaderSig || std::string_view(local).substr(kLocalHeaderSize) != e.name) {
    return Corrupt(file, absl::StrCat("record '", e.name, "': no matching local header at offset ", e.header_offset));
  }
  e.data_offset = e.header_offset + kLocalHeaderSize + Get16(&local[26]) + Get16(&local[28]);
  if (e.data_offset > cd_offset || e.size > cd_offset - e.data_offset) {
    return absl::DataLossError(absl::StrCat(Prefix(file), "record '", e.name, "' is truncated: expected ", e.size,
                                            " bytes at offset ", e.data_offset, ", but its data area ends at ",
                                            cd_offset));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<ZipEntry>> ReadZipDirectory(const ReadFile& file) {
  ZT_ASSIGN_OR_RETURN(const DirectoryBounds bounds, FindDirectory(file));
  std::string cd(bounds.size, '\0');
  ZT_RETURN_IF_ERROR(file.PRead(cd.data(), cd.size(), bounds.offset));
  std::vector<ZipEntry> entries;
  entries.reserve(bounds.count);
  size_t at = 0;
  for (uint64_t i = 0; i < bounds.count; ++i) {
    ZT_ASSIGN_OR_RETURN(ZipEntry e, ParseDirectoryEntry(file, cd, bounds.offset, i, &at));
    ZT_RETURN_IF_ERROR(LocateData(file, bounds.offset, e));
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace zt::ckpt
