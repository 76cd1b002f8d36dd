// WritePtFile and PtReader: the zip container and the pickle glued together.
// Writing streams every storage from memory into an AtomicFile; reading keeps
// only the directory and the Value tree in memory and preads tensor bytes.
#include "ckpt/format/pt_file.h"

#include <algorithm>
#include <map>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ckpt/format/crc32.h"
#include "ckpt/format/pickle.h"
#include "ckpt/format/pt_file_internal.h"
#include "ckpt/format/zip.h"
#include "util/status.h"
#include "util/strings.h"

namespace zt::ckpt {
namespace {

constexpr size_t kVerifyChunk = 8u << 20;        // CRC checks read at most this much at a time
constexpr uint64_t kSplitReadMin = 64ull << 20;  // whole-record reads at least this big use several threads
constexpr unsigned kMaxReadThreads = 4;
constexpr uint64_t kMaxPickleBytes = 1ull << 31;  // data.pkl is metadata; more means a broken file

// Elements laid out in row-major order from storage_offset (any offset; a
// size-1 dimension may carry any stride, as in PyTorch).
bool RowMajor(const TensorRef& t) {
  if (t.stride.empty() || t.numel() == 0) return true;
  if (t.stride.size() != t.shape.size()) return false;
  int64_t expected = 1;
  for (size_t i = t.shape.size(); i-- > 0;) {
    if (t.shape[i] != 1 && t.stride[i] != expected) return false;
    expected *= t.shape[i];
  }
  return true;
}

}  // namespace

// ------------------------------------------------------------------- writing

absl::Status WritePtFileWithZipOptions(const std::string& path, const Value& root, const PtWriteOptions& options,
                                       const ZipWriterOptions& zip_options) {
  if (options.archive.empty() || absl::StrContains(options.archive, '/')) {
    return absl::InvalidArgumentError(absl::StrCat("writing '", path, "': archive name '", options.archive,
                                                   "' must be a non-empty name without '/'"));
  }
  struct Storage {
    std::string key;
    const void* data;
    uint64_t nbytes;
    const TensorRef* ref;  // for its source, when data is null
  };
  std::vector<Storage> storages;
  std::map<std::tuple<const void*, DType, std::vector<int64_t>>, size_t> shared;
  StorageKeyFn storage_key = [&](const TensorRef& t) -> absl::StatusOr<std::string> {
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat("negative size in shape ", ShapeText(t.shape)));
      if (d > 0 && numel > INT64_MAX / d / 8) {
        return absl::InvalidArgumentError(absl::StrCat("shape ", ShapeText(t.shape), " is too large"));
      }
      numel *= d;
    }
    if (numel > 0 && t.data == nullptr && !t.source) {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(DTypeName(t.dtype)), " ", ShapeText(t.shape),
                       " has neither data nor a source (TensorRef::data must point at its "
                       "contiguous bytes while writing)"));
    }
    // Same memory, type and shape: one storage, as torch.save shares it.
    if (t.data != nullptr) {
      auto [it, inserted] = shared.try_emplace(std::make_tuple(t.data, t.dtype, t.shape), storages.size());
      if (!inserted) return storages[it->second].key;
    }
    storages.push_back(Storage{absl::StrCat(storages.size()), t.data, t.nbytes(), &t});
    return storages.back().key;
  };
  ZT_ASSIGN_OR_RETURN(std::string pickle, PickleValue(root, storage_key));

  ZT_ASSIGN_OR_RETURN(AtomicFile file,
                      AtomicFile::Create(path, AtomicFileOptions{options.direct_io ? kStreamingDirectAfter : 0}));
  ZipWriter zip(&file, zip_options);
  const std::string& a = options.archive;
  // data.pkl first: torch's reader takes the archive name from the first record.
  ZT_RETURN_IF_ERROR(zip.AddRecord(a + "/data.pkl", pickle.data(), pickle.size()));
  static constexpr char kByteOrder[] = "little";
  ZT_RETURN_IF_ERROR(zip.AddRecord(a + "/byteorder", kByteOrder, sizeof(kByteOrder) - 1));
  // Runs of storages pulled from sources go together, so that reading ahead
  // carries on across their record boundaries.
  std::vector<ZipWriter::SourcedRecord> run;
  auto flush_run = [&] {
    absl::Status st = zip.AddRecordsFrom(run);
    run.clear();
    return st;
  };
  for (const Storage& s : storages) {
    if (s.data == nullptr && s.nbytes > 0) {
      run.push_back({absl::StrCat(a, "/data/", s.key), s.nbytes, s.ref->source});
    } else {
      ZT_RETURN_IF_ERROR(flush_run());
      ZT_RETURN_IF_ERROR(zip.AddRecord(absl::StrCat(a, "/data/", s.key), s.data, s.nbytes));
    }
  }
  ZT_RETURN_IF_ERROR(flush_run());
  static constexpr char kVersion[] = "3\n";
  ZT_RETURN_IF_ERROR(zip.AddRecord(a + "/version", kVersion, sizeof(kVersion) - 1));
  ZT_RETURN_IF_ERROR(zip.Finish());
  return file.Commit();
}

absl::Status WritePtFile(const std::string& path, const Value& root, const PtWriteOptions& options) {
  ZipWriterOptions zip_options;
  zip_options.read_ahead = options.read_ahead;
  // Read-ahead streams pull from checkpoint files read with O_DIRECT:
  // chunks that one DirectPRead reads in all its streams (util/direct_io.h).
  if (options.read_ahead) zip_options.chunk_bytes = kDirectReadStreams * kDirectReadPiece;
  return WritePtFileWithZipOptions(path, root, options, zip_options);
}

// ------------------------------------------------------------------- reading

struct PtReader::Records {
  std::vector<ZipEntry> entries;
  std::unordered_map<std::string, size_t> by_name;

  const ZipEntry* Find(const std::string& name) const {
    auto it = by_name.find(name);
    return it == by_name.end() ? nullptr : &entries[it->second];
  }
};

namespace {

std::string Where(const ReadFile& f) { return absl::StrCat("checkpoint file '", f.path(), "'"); }

absl::Status CrcMismatch(const ReadFile& f, const ZipEntry& e, uint32_t got) {
  return absl::DataLossError(
      absl::StrFormat("%s: record '%s' CRC-32 mismatch (file corrupted?): the directory "
                      "says %08x, the %d bytes at offset %d hash to %08x",
                      Where(f), e.name, e.crc32, e.size, e.data_offset, got));
}

// Streams the record's bytes from `from` on through CRC-32 in bounded
// chunks, continuing `crc` (the CRC of its bytes before `from`).
absl::Status CheckRecordCrc(const ReadFile& f, const ZipEntry& e, uint64_t from = 0, uint32_t crc = 0) {
  if (from > e.size) {
    return absl::OutOfRangeError(absl::StrCat(Where(f), ": record '", e.name, "' has ", e.size, " bytes, not ", from));
  }
  std::vector<char> buf(static_cast<size_t>(std::min<uint64_t>(e.size - from, kVerifyChunk)));
  for (uint64_t done = from; done < e.size;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(e.size - done, buf.size()));
    ZT_RETURN_IF_ERROR(f.PRead(buf.data(), n, e.data_offset + done));
    crc = Crc32(crc, buf.data(), n);
    done += n;
  }
  if (crc != e.crc32) return CrcMismatch(f, e, crc);
  return absl::OkStatus();
}

// Copies record bytes [from, from + len) into out and returns their CRC-32,
// in bounded chunks.
absl::Status CopyAndHash(const ReadFile& f, const ZipEntry& e, uint64_t from, uint64_t len, char* out, uint32_t* crc) {
  uint32_t c = 0;
  for (uint64_t done = 0; done < len;) {
    size_t n = static_cast<size_t>(std::min<uint64_t>(len - done, kVerifyChunk));
    ZT_RETURN_IF_ERROR(f.PRead(out + done, n, e.data_offset + from + done));
    c = Crc32(c, out + done, n);
    done += n;
  }
  *crc = c;
  return absl::OkStatus();
}

// A whole record into out, its CRC checked. Large records are split into
// one slice per thread: the read is bound by the kernel copying page-cache
// pages into fresh memory on one core (page faults included), so slices
// copied by two cores finish sooner; their CRCs combine into the record's.
absl::Status ReadWholeRecord(const ReadFile& f, const ZipEntry& e, char* out) {
  const unsigned threads =
      e.size < kSplitReadMin ? 1u : std::max(1u, std::min(kMaxReadThreads, std::thread::hardware_concurrency()));
  // Slices on 4 KiB boundaries of the record, the last one taking the rest.
  const uint64_t slice = (e.size / threads) & ~uint64_t{4095};
  std::vector<uint32_t> crcs(threads, 0);
  std::vector<absl::Status> results(threads);
  std::vector<std::thread> workers;
  for (unsigned k = 1; k < threads; ++k) {
    const uint64_t from = slice * k, len = k + 1 == threads ? e.size - from : slice;
    workers.emplace_back([&, k, from, len] { results[k] = CopyAndHash(f, e, from, len, out + from, &crcs[k]); });
  }
  results[0] = CopyAndHash(f, e, 0, threads == 1 ? e.size : slice, out, &crcs[0]);
  for (std::thread& w : workers) w.join();
  uint32_t crc = crcs[0];
  for (unsigned k = 0; k < threads; ++k) {
    ZT_RETURN_IF_ERROR(results[k]);
    if (k > 0) crc = Crc32Combine(crc, crcs[k], k + 1 == threads ? e.size - slice * k : slice);
  }
  if (crc != e.crc32) return CrcMismatch(f, e, crc);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PtReader>> PtReader::Open(const std::string& path, const ReadFileOptions& options) {
  std::unique_ptr<PtReader> reader(new PtReader());
  ZT_ASSIGN_OR_RETURN(reader->file_, ReadFile::Open(path, options));
  const ReadFile& file = reader->file_;
  auto records = std::make_shared<Records>();
  ZT_ASSIGN_OR_RETURN(records->entries, ReadZipDirectory(file));
  const ZipEntry* pickle_entry = nullptr;
  for (size_t i = 0; i < records->entries.size(); ++i) {
    const ZipEntry& e = records->entries[i];
    if (!records->by_name.emplace(e.name, i).second) {
      return absl::DataLossError(absl::StrCat(Where(file), ": record '", e.name, "' appears twice"));
    }
    // "<archive>/data.pkl" with a one-level archive folder.
    if (absl::EndsWith(e.name, "/data.pkl") && e.name.find('/') == e.name.size() - 9) {
      if (pickle_entry != nullptr) {
        return absl::DataLossError(absl::StrCat(Where(file), ": two pickles, '", pickle_entry->name, "' and '", e.name,
                                                "'; not a torch.save checkpoint"));
      }
      pickle_entry = &e;
    }
  }
  if (pickle_entry == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(Where(file),
                                                   ": a zip file without '<archive>/data.pkl'; not a "
                                                   "checkpoint written by torch.save or zerotorch"));
  }
  if (pickle_entry->size > kMaxPickleBytes) {
    return absl::DataLossError(absl::StrCat(Where(file), ": record '", pickle_entry->name, "' claims ",
                                            pickle_entry->size, " bytes; the file is corrupted"));
  }
  std::string pickle(pickle_entry->size, '\0');
  ZT_RETURN_IF_ERROR(file.PRead(pickle.data(), pickle.size(), pickle_entry->data_offset));
  if (uint32_t crc = Crc32(0, pickle.data(), pickle.size()); crc != pickle_entry->crc32) {
    return CrcMismatch(file, *pickle_entry, crc);
  }
  const std::string archive = pickle_entry->name.substr(0, pickle_entry->name.size() - 9);
  const Records& table = *records;
  StorageLoadFn load = [&](const PickledStorage& s) -> absl::StatusOr<TensorRef> {
    TensorRef t;
    t.dtype = s.dtype;
    t.record = absl::StrCat(archive, "/data/", s.key);
    const ZipEntry* e = table.Find(t.record);
    if (e == nullptr) return absl::DataLossError(absl::StrCat("record '", t.record, "' is missing"));
    const uint64_t need = static_cast<uint64_t>(s.numel) * DTypeSize(s.dtype);
    if (s.numel > static_cast<int64_t>(e->size) || e->size < need) {
      return absl::DataLossError(absl::StrCat("record '", t.record, "' has ", e->size, " bytes; its ", s.numel, " ",
                                              std::string(DTypeName(s.dtype)), " elements need ", need));
    }
    t.file_offset = e->data_offset;
    t.storage_nbytes = e->size;
    t.crc32 = e->crc32;
    return t;
  };
  ZT_ASSIGN_OR_RETURN(reader->root_,
                      UnpickleValue(pickle, absl::StrCat(Where(file), ", record '", pickle_entry->name, "'"), load));
  reader->records_ = std::move(records);
  return reader;
}

namespace {

// The record and byte range [offset, offset + len) of elements [begin, end)
// of a row-major tensor, checked against the directory.
// `e` is the tensor's record as the directory has it (nullptr: unknown).
absl::StatusOr<std::pair<const ZipEntry*, uint64_t>> Locate(const ReadFile& f, const ZipEntry* e, const TensorRef& t,
                                                            int64_t begin, int64_t end) {
  if (e == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(f), ": no record '", t.record, "' (is this TensorRef from another file?)"));
  }
  if (!RowMajor(t)) {
    return absl::FailedPreconditionError(absl::StrCat(
        Where(f), ": tensor in record '", t.record, "' with shape ", ShapeText(t.shape), " and stride ",
        ShapeText(t.stride), " is not contiguous; read its whole storage (as uint8) and apply the strides"));
  }
  const int64_t numel = t.numel();
  if (begin < 0 || begin > end || end > numel) {
    return absl::OutOfRangeError(absl::StrCat(Where(f), ": elements [", begin, ", ", end, ") of a tensor with ", numel,
                                              " elements (record '", t.record, "')"));
  }
  const uint64_t size = DTypeSize(t.dtype);
  const uint64_t first = (static_cast<uint64_t>(t.storage_offset) + static_cast<uint64_t>(begin)) * size;
  const uint64_t len = static_cast<uint64_t>(end - begin) * size;
  if (t.storage_offset < 0 || first > e->size || len > e->size - first) {
    return absl::OutOfRangeError(absl::StrCat(Where(f), ": bytes [", first, ", ", first + len, ") lie outside record '",
                                              e->name, "' of ", e->size, " bytes"));
  }
  return std::make_pair(e, first);
}

}  // namespace

absl::Status PtReader::Read(const TensorRef& t, void* dst, bool verify) const {
  ZT_ASSIGN_OR_RETURN(auto where, Locate(file_, records_->Find(t.record), t, 0, t.numel()));
  const auto& [e, first] = where;
  const uint64_t len = t.nbytes();
  // The tensor is the whole record: copy and hash in one pass.
  if (verify && first == 0 && len == e->size) return ReadWholeRecord(file_, *e, static_cast<char*>(dst));
  if (verify) ZT_RETURN_IF_ERROR(CheckRecordCrc(file_, *e));
  return file_.PRead(dst, static_cast<size_t>(len), e->data_offset + first);
}

absl::Status PtReader::ReadElements(const TensorRef& t, int64_t begin, int64_t end, void* dst) const {
  ZT_ASSIGN_OR_RETURN(auto where, Locate(file_, records_->Find(t.record), t, begin, end));
  const uint64_t len = static_cast<uint64_t>(end - begin) * DTypeSize(t.dtype);
  return file_.PRead(dst, static_cast<size_t>(len), where.first->data_offset + where.second);
}

absl::Status PtReader::VerifyRecord(const std::string& record) const {
  const ZipEntry* e = records_->Find(record);
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("checkpoint file '", file_.path(), "' has no record '", record, "'"));
  }
  return CheckRecordCrc(file_, *e);
}

absl::Status PtReader::VerifyRecordFrom(const std::string& record, uint64_t from, uint32_t crc) const {
  const ZipEntry* e = records_->Find(record);
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("checkpoint file '", file_.path(), "' has no record '", record, "'"));
  }
  return CheckRecordCrc(file_, *e, from, crc);
}

absl::Status PtReader::VerifyAll() const {
  for (const ZipEntry& e : records_->entries) ZT_RETURN_IF_ERROR(CheckRecordCrc(file_, e));
  return absl::OkStatus();
}

}  // namespace zt::ckpt
