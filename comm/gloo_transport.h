// The Gloo transport: a full mesh of TCP connections made through the
// rendezvous store, running comm/gloo_collectives.h. Works between any ranks
// (hosts or not); collectives on distinct tags run concurrently.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "comm/group_options.h"
#include "comm/rendezvous.h"
#include "comm/transport.h"

namespace zt::comm {

// Connects the group's ranks (store.env: its rank and size) under
// "<options.store_prefix>/gloo" in the store. `world_ranks`: the members'
// world ranks for messages (empty: the world itself).
absl::StatusOr<std::unique_ptr<Transport>> ConnectGlooTransport(const StoreHandle& store, const GroupOptions& options,
                                                                const std::vector<int>& world_ranks);

// gloo prefixes messages with "[/path/to/file.cc:123] "; keeps the text.
std::string CleanGlooMessage(const std::string& what);

}  // namespace zt::comm
