// Implementation of ckpt/save_snapshot.h.
#include "ckpt/save_snapshot.h"

#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/strings.h"

namespace zt::ckpt {
namespace {

constexpr uint64_t kAlign = 64;
constexpr uint64_t kSourceChunk = 8u << 20;  // a source is read this much at a time

uint64_t AlignUp(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Every tensor reference below `v` (dict values, list and tuple items).
void CollectRefs(const Value& v, std::vector<TensorRef*>* out) {
  if (v.is_tensor()) {
    out->push_back(std::get<std::shared_ptr<TensorRef>>(v.data()).get());
  } else if (v.is_list() || v.is_tuple()) {
    for (const Value& x : v.AsList()) CollectRefs(x, out);
  } else if (v.is_dict()) {
    for (const auto& [k, x] : v.AsDict().items) CollectRefs(x, out);
  }
}

}  // namespace

void SnapshotArena::Free::operator()(char* p) const { std::free(p); }

absl::Status SnapshotArena::Snapshot(RankShards* shards, Dict* module, bool defer,
                                     const std::set<std::string>& copy_now) {
  deferred_.clear();
  // Which references, in a fixed order, each with a name for errors and
  // whether it is copied now.
  struct Entry {
    TensorRef* ref;
    std::string name;
    bool now;
  };
  std::vector<Entry> refs;
  auto add = [&refs, defer](TensorRef* r, std::string name, bool now = false) {
    refs.push_back({r, std::move(name), now || !defer});
  };
  for (size_t g = 0; g < shards->master.size(); ++g) add(&shards->master[g], absl::StrCat("master ", g));
  for (auto& [kind, per_group] : shards->state) {
    for (size_t g = 0; g < per_group.size(); ++g) add(&per_group[g], absl::StrCat(kind, " ", g));
  }
  for (size_t g = 0; g < shards->frozen.size(); ++g) add(&shards->frozen[g], absl::StrCat("frozen ", g));
  if (shards->rng_cpu) add(&*shards->rng_cpu, "the RNG state");
  for (size_t j = 0; j < shards->rng_cpu_replicas.size(); ++j) {
    add(&shards->rng_cpu_replicas[j], absl::StrCat("replica ", j + 1, "'s RNG state"));
  }
  if (module != nullptr) {
    for (const auto& [key, value] : module->items) {
      std::vector<TensorRef*> found;
      CollectRefs(value, &found);
      const std::string name = key.is_string() ? key.AsString() : "a module entry";
      for (TensorRef* r : found) add(r, name, copy_now.count(name) > 0);
    }
  }
  uint64_t need = 0;
  for (const Entry& e : refs) need += AlignUp(e.ref->nbytes());
  if (need > capacity_) {
    void* p = nullptr;
    if (::posix_memalign(&p, kAlign, need == 0 ? kAlign : need) != 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "checkpoint.async_save: cannot allocate ", HumanBytes(static_cast<double>(need)),
          " of host memory to stage this rank's checkpoint; turn checkpoint.async_save off (saves then stop training "
          "until written) or give the ranks more memory"));
    }
    memory_.reset(static_cast<char*>(p));
    capacity_ = need;
  }
  uint64_t at = 0;
  for (Entry& e : refs) {
    TensorRef* r = e.ref;
    const std::string& name = e.name;
    char* dst = memory_.get() + at;
    const uint64_t n = r->nbytes();
    if (r->data != nullptr) {
      if (e.now) {
        std::memcpy(dst, r->data, n);
      } else {
        deferred_.push_back({r->data, dst, n});
      }
    } else if (r->source) {
      for (uint64_t off = 0; off < n; off += kSourceChunk) {
        const uint64_t len = std::min(kSourceChunk, n - off);
        if (absl::Status st = r->source(off, dst + off, len); !st.ok()) {
          return absl::Status(st.code(), absl::StrCat("staging ", name, " for an asynchronous save: ", st.message()));
        }
      }
      r->source = nullptr;
    } else if (n > 0) {
      return absl::InternalError(absl::StrCat("staging ", name, ": the reference has neither data nor a source"));
    }
    r->data = dst;
    at += AlignUp(n);
  }
  return absl::OkStatus();
}

void SnapshotArena::CopyDeferred() {
  for (const Copy& c : deferred_) std::memcpy(c.to, c.from, c.bytes);
  deferred_.clear();
}

}  // namespace zt::ckpt
