// Implementation of comm/agreement.h.
#include "comm/agreement.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "comm/collective_label.h"
#include "util/fnv1a.h"

namespace zt::comm {

absl::Status AgreeAcrossRanks(ProcessGroup& pg, const absl::Status& local, const std::string& what) {
  if (pg.size() == 1) return local;
  CollectiveLabel label(what);
  at::Tensor flags = at::zeros({pg.size()}, at::kInt);
  flags[pg.rank()] = local.ok() ? 0 : 1;
  absl::Status st = pg.AllGather(flags.narrow(0, pg.rank(), 1).clone(), flags)->Wait();
  if (!st.ok()) return absl::Status(st.code(), absl::StrCat(what, ": ranks could not agree: ", st.message()));
  if (!local.ok()) return local;
  std::vector<int> failed;
  const int* f = flags.data_ptr<int>();
  for (int r = 0; r < pg.size(); ++r) {
    if (f[r] != 0) failed.push_back(r);
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::AbortedError(absl::StrCat(what, " failed on rank", failed.size() > 1 ? "s " : " ",
                                         absl::StrJoin(failed, ", "), " (their logs say why)"));
}

namespace {

// "key\0value\0" per item: what rank 0 sends when the digests differ.
std::string Serialize(const Description& items) {
  std::string out;
  for (const auto& [key, value] : items) {
    out.append(key);
    out.push_back('\0');
    out.append(value);
    out.push_back('\0');
  }
  return out;
}

Description Deserialize(const std::string& bytes) {
  Description items;
  size_t at = 0;
  while (at < bytes.size()) {
    const size_t k = bytes.find('\0', at);
    if (k == std::string::npos) break;
    const size_t v = bytes.find('\0', k + 1);
    if (v == std::string::npos) break;
    items.emplace_back(bytes.substr(at, k - at), bytes.substr(k + 1, v - k - 1));
    at = v + 1;
  }
  return items;
}

std::string Shown(const std::string& value) {
  constexpr size_t kMax = 80;
  return value.size() <= kMax ? value : value.substr(0, kMax) + "...";
}

// What differs between rank 0's items and this rank's, as phrases.
std::vector<std::string> Differences(const Description& theirs, const Description& mine) {
  std::vector<std::string> out;
  std::map<std::string, std::string> by_key_theirs(theirs.begin(), theirs.end());
  std::map<std::string, std::string> by_key_mine(mine.begin(), mine.end());
  for (const auto& [key, value] : mine) {
    auto it = by_key_theirs.find(key);
    if (it == by_key_theirs.end()) {
      out.push_back(absl::StrCat(key, " (", Shown(value), ") is here but not on rank 0"));
    } else if (it->second != value) {
      out.push_back(absl::StrCat(key, " is ", Shown(it->second), " on rank 0 and ", Shown(value), " here"));
    }
  }
  for (const auto& [key, value] : theirs) {
    if (by_key_mine.count(key) == 0) {
      out.push_back(absl::StrCat(key, " (", Shown(value), ") is on rank 0 but not here"));
    }
  }
  if (out.empty()) {
    // Same items, another order: name the first position that differs.
    for (size_t i = 0; i < std::min(theirs.size(), mine.size()); ++i) {
      if (theirs[i].first != mine[i].first) {
        out.push_back(absl::StrCat("item ", i, " is ", theirs[i].first, " on rank 0 and ", mine[i].first,
                                   " here (the same items in another order)"));
        break;
      }
    }
  }
  return out;
}

}  // namespace

uint64_t DescriptionDigest(const Description& items) {
  Fnv1a64 h;
  for (const auto& [key, value] : items) {
    h.AddString(key);
    h.AddString(value);
  }
  return h.value();
}

absl::Status AgreeOnDescription(ProcessGroup& pg, const Description& mine, const std::string& what) {
  if (pg.size() == 1) return absl::OkStatus();
  CollectiveLabel label(what);
  const auto failed = [&](const absl::Status& st) {
    return absl::Status(st.code(), absl::StrCat("comparing the ranks' ", what, ": ", st.message()));
  };
  at::Tensor all = at::zeros({pg.size(), 2}, at::kLong);
  at::Tensor own = at::empty({2}, at::kLong);
  const uint64_t digest = DescriptionDigest(mine);
  std::memcpy(own.data_ptr<int64_t>(), &digest, sizeof(digest));
  own[1] = static_cast<int64_t>(mine.size());
  absl::Status st = pg.AllGather(own, all.view({-1}))->Wait();
  if (!st.ok()) return failed(st);
  std::vector<int> differ;
  const int64_t* a = all.data_ptr<int64_t>();
  for (int r = 1; r < pg.size(); ++r) {
    if (a[2 * r] != a[0] || a[2 * r + 1] != a[1]) differ.push_back(r);
  }
  if (differ.empty()) return absl::OkStatus();

  // Rank 0's description, for the differing ranks to compare item by item.
  std::string bytes = pg.rank() == 0 ? Serialize(mine) : std::string();
  at::Tensor size = at::full({1}, static_cast<int64_t>(bytes.size()), at::kLong);
  st = pg.Broadcast(size, 0)->Wait();
  if (!st.ok()) return failed(st);
  bytes.resize(static_cast<size_t>(size.item<int64_t>()));
  if (!bytes.empty()) {
    at::Tensor buf = at::empty({static_cast<int64_t>(bytes.size())}, at::kByte);
    if (pg.rank() == 0) std::memcpy(buf.data_ptr<uint8_t>(), bytes.data(), bytes.size());
    st = pg.Broadcast(buf, 0)->Wait();
    if (!st.ok()) return failed(st);
    std::memcpy(bytes.data(), buf.data_ptr<uint8_t>(), bytes.size());
  }
  const bool this_differs = std::find(differ.begin(), differ.end(), pg.rank()) != differ.end();
  if (!this_differs) {
    const bool many = differ.size() > 1;
    return absl::FailedPreconditionError(absl::StrCat(
        many ? "ranks " : "rank ", absl::StrJoin(differ, ", "), many ? " differ" : " differs", " from rank 0 in ",
        many ? "their " : "its ", what, " (", many ? "their errors name" : "its error names",
        " the differences): every rank must be started with the same model and settings"));
  }
  std::vector<std::string> diffs = Differences(Deserialize(bytes), mine);
  const size_t total = diffs.size();
  constexpr size_t kShown = 5;
  if (diffs.size() > kShown) diffs.resize(kShown);
  std::string listed =
      diffs.empty() ? std::string("(no item differs by name; the digests do)") : absl::StrJoin(diffs, "; ");
  if (total > kShown) absl::StrAppend(&listed, "; and ", total - kShown, " more");
  return absl::FailedPreconditionError(absl::StrCat("rank ", pg.rank(), " differs from rank 0 in its ", what, ": ",
                                                    listed,
                                                    ". Every rank must be started with the same model and settings"));
}

}  // namespace zt::comm
