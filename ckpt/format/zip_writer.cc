// ZipWriter: streams STORED records into an AtomicFile. Sizes are known
// before a record starts, so only the CRC-32 is patched afterwards (no data
// descriptors, which some readers handle poorly).
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "ckpt/format/crc32.h"
#include "ckpt/format/zip.h"
#include "util/read_ahead.h"
#include "util/status.h"

namespace zt::ckpt {

using zip_internal::kCentralHeaderSig;
using zip_internal::kEndSig;
using zip_internal::kLocalHeaderSig;
using zip_internal::kLocalHeaderSize;
using zip_internal::kPaddingExtraId;
using zip_internal::kZip64EndSig;
using zip_internal::kZip64EndSize;
using zip_internal::kZip64ExtraId;
using zip_internal::kZip64LocatorSig;
using zip_internal::Put16;
using zip_internal::Put32;
using zip_internal::Put64;

namespace {
constexpr uint16_t kVersionDefault = 20;  // 2.0: stored records, folders
constexpr uint16_t kVersionZip64 = 45;    // 4.5: ZIP64 extensions
constexpr uint16_t kDosTime = 0;
constexpr uint16_t kDosDate = (1 << 5) | 1;  // 1980-01-01: a valid date (0 is not)
}  // namespace

ZipWriter::ZipWriter(AtomicFile* file, ZipWriterOptions options) : file_(file), options_(options) {
  ZT_CHECK(options_.alignment > 0 && options_.chunk_bytes > 0);
}

absl::Status ZipWriter::AddRecord(const std::string& name, const void* data, uint64_t n) {
  return AddRecordImpl(name, n, data, nullptr);
}

absl::Status ZipWriter::AddRecordFrom(const std::string& name, uint64_t n, const Source& source) {
  return AddRecordImpl(name, n, nullptr, &source);
}

absl::StatusOr<uint64_t> ZipWriter::WriteLocalHeader(const std::string& name, uint64_t n, uint32_t crc) {
  ZT_CHECK_MSG(name.size() < 0xFFFF, "zip record name too long: %zu bytes", name.size());
  const uint64_t header_offset = file_->size();
  const bool zip64 = Big(n);
  const size_t zip64_extra = zip64 ? 4 + 16 : 0;
  const uint64_t unpadded = header_offset + kLocalHeaderSize + name.size() + zip64_extra + 4;
  const size_t pad = static_cast<size_t>((options_.alignment - unpadded % options_.alignment) % options_.alignment);
  const size_t extra_len = zip64_extra + 4 + pad;
  ZT_CHECK(extra_len <= 0xFFFF);

  std::string h;
  h.reserve(kLocalHeaderSize + name.size() + extra_len);
  Put32(h, kLocalHeaderSig);
  Put16(h, zip64 ? kVersionZip64 : kVersionDefault);
  Put16(h, 0);  // flags
  Put16(h, 0);  // method: stored
  Put16(h, kDosTime);
  Put16(h, kDosDate);
  Put32(h, crc);
  Put32(h, zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(n));  // compressed size
  Put32(h, zip64 ? 0xFFFFFFFFu : static_cast<uint32_t>(n));  // uncompressed size
  Put16(h, static_cast<uint16_t>(name.size()));
  Put16(h, static_cast<uint16_t>(extra_len));
  h += name;
  if (zip64) {
    Put16(h, kZip64ExtraId);
    Put16(h, 16);
    Put64(h, n);  // uncompressed
    Put64(h, n);  // compressed
  }
  Put16(h, kPaddingExtraId);
  Put16(h, static_cast<uint16_t>(pad));
  h.append(pad, 'Z');  // PyTorch pads with 'Z' too
  ZT_RETURN_IF_ERROR(file_->Append(h.data(), h.size()));
  return header_offset;
}

absl::Status ZipWriter::PatchCrc(uint64_t header_offset, uint32_t crc) {
  std::string c;
  Put32(c, crc);
  return file_->PWrite(c.data(), c.size(), header_offset + 14);
}

absl::Status ZipWriter::AddRecordImpl(const std::string& name, uint64_t n, const void* data, const Source* source) {
  if (source != nullptr && options_.read_ahead && n > options_.chunk_bytes) {
    return AddRecordsFrom({SourcedRecord{name, n, *source}});
  }
  // Small records get their CRC up front and no patch.
  const auto* bytes = static_cast<const unsigned char*>(data);
  const bool crc_first = source == nullptr && n <= options_.chunk_bytes;
  uint32_t crc = crc_first ? Crc32(0, bytes, static_cast<size_t>(n)) : 0;
  ZT_ASSIGN_OR_RETURN(const uint64_t header_offset, WriteLocalHeader(name, n, crc));

  std::vector<unsigned char> scratch;
  if (source != nullptr && n > 0) scratch.resize(static_cast<size_t>(std::min<uint64_t>(n, options_.chunk_bytes)));
  for (uint64_t done = 0; done < n;) {
    size_t chunk = static_cast<size_t>(std::min<uint64_t>(n - done, options_.chunk_bytes));
    const unsigned char* p = bytes + done;
    if (source != nullptr) {
      ZT_RETURN_IF_ERROR((*source)(done, scratch.data(), chunk));
      p = scratch.data();
    }
    if (!crc_first) crc = Crc32(crc, p, chunk);
    ZT_RETURN_IF_ERROR(file_->Append(p, chunk));
    done += chunk;
  }
  if (!crc_first) ZT_RETURN_IF_ERROR(PatchCrc(header_offset, crc));
  entries_.push_back(Entry{name, header_offset, n, crc});
  return absl::OkStatus();
}

absl::Status ZipWriter::AddRecordsFrom(const std::vector<SourcedRecord>& records) {
  if (!options_.read_ahead) {
    for (const SourcedRecord& r : records) ZT_RETURN_IF_ERROR(AddRecordFrom(r.name, r.n, r.source));
    return absl::OkStatus();
  }
  // Every record's chunks, in order, read ahead across record boundaries:
  // a boundary is where a per-record read-ahead would leave the writer
  // waiting for a whole chunk.
  const size_t cap = options_.chunk_bytes;
  std::vector<ReadAhead::Piece> pieces;
  for (const SourcedRecord& r : records) {
    for (uint64_t at = 0; at < r.n; at += cap) {
      const size_t size = static_cast<size_t>(std::min<uint64_t>(r.n - at, cap));
      pieces.push_back({size, [&source = r.source, at, size](char* dst) { return source(at, dst, size); }});
    }
  }
  ReadAhead stream(std::move(pieces), kLeadChunks * cap);
  for (const SourcedRecord& r : records) {
    ZT_ASSIGN_OR_RETURN(const uint64_t header_offset, WriteLocalHeader(r.name, r.n, 0));
    uint32_t crc = 0;
    for (uint64_t at = 0; at < r.n; at += cap) {
      ZT_ASSIGN_OR_RETURN(absl::Span<const char> bytes, stream.Next());
      crc = Crc32(crc, bytes.data(), bytes.size());
      ZT_RETURN_IF_ERROR(file_->Append(bytes.data(), bytes.size()));
    }
    ZT_RETURN_IF_ERROR(PatchCrc(header_offset, crc));
    entries_.push_back(Entry{r.name, header_offset, r.n, crc});
  }
  return absl::OkStatus();
}

absl::Status ZipWriter::Finish() {
  const uint64_t cd_offset = file_->size();
  std::string cd;
  for (const Entry& e : entries_) {
    const bool big_size = Big(e.size);
    const bool big_offset = Big(e.header_offset);
    std::string extra;
    if (big_size || big_offset) {
      Put16(extra, kZip64ExtraId);
      Put16(extra, static_cast<uint16_t>((big_size ? 16 : 0) + (big_offset ? 8 : 0)));
      if (big_size) {
        Put64(extra, e.size);  // uncompressed
        Put64(extra, e.size);  // compressed
      }
      if (big_offset) Put64(extra, e.header_offset);
    }
    const uint16_t version = extra.empty() ? kVersionDefault : kVersionZip64;
    Put32(cd, kCentralHeaderSig);
    Put16(cd, version);  // made by (MS-DOS host, like PyTorch's writer)
    Put16(cd, version);  // needed
    Put16(cd, 0);        // flags
    Put16(cd, 0);        // stored
    Put16(cd, kDosTime);
    Put16(cd, kDosDate);
    Put32(cd, e.crc32);
    Put32(cd, big_size ? 0xFFFFFFFFu : static_cast<uint32_t>(e.size));
    Put32(cd, big_size ? 0xFFFFFFFFu : static_cast<uint32_t>(e.size));
    Put16(cd, static_cast<uint16_t>(e.name.size()));
    Put16(cd, static_cast<uint16_t>(extra.size()));
    Put16(cd, 0);  // comment
    Put16(cd, 0);  // disk
    Put16(cd, 0);  // internal attributes
    Put32(cd, 0);  // external attributes
    Put32(cd, big_offset ? 0xFFFFFFFFu : static_cast<uint32_t>(e.header_offset));
    cd += e.name;
    cd += extra;
  }
  const uint64_t cd_size = cd.size();
  const uint64_t count = entries_.size();
  const bool big_count = count >= 0xFFFF || Big(count);
  const bool zip64_end = big_count || Big(cd_offset) || Big(cd_size) || Big(cd_offset + cd_size);
  std::string end;
  if (zip64_end) {
    const uint64_t zip64_end_offset = cd_offset + cd_size;
    Put32(end, kZip64EndSig);
    Put64(end, kZip64EndSize - 12);  // size of the rest of this record
    Put16(end, kVersionZip64);
    Put16(end, kVersionZip64);
    Put32(end, 0);  // this disk
    Put32(end, 0);  // disk with the central directory
    Put64(end, count);
    Put64(end, count);
    Put64(end, cd_size);
    Put64(end, cd_offset);
    Put32(end, kZip64LocatorSig);
    Put32(end, 0);
    Put64(end, zip64_end_offset);
    Put32(end, 1);  // total disks
  }
  Put32(end, kEndSig);
  Put16(end, 0);
  Put16(end, 0);
  Put16(end, big_count ? 0xFFFF : static_cast<uint16_t>(count));
  Put16(end, big_count ? 0xFFFF : static_cast<uint16_t>(count));
  Put32(end, Big(cd_size) ? 0xFFFFFFFFu : static_cast<uint32_t>(cd_size));
  Put32(end, Big(cd_offset) ? 0xFFFFFFFFu : static_cast<uint32_t>(cd_offset));
  Put16(end, 0);  // comment length
  cd += end;
  return file_->Append(cd.data(), cd.size());
}

}  // namespace zt::ckpt
