// The store `zt launch` agrees through across nodes (launch/node_rounds.h):
// c10d's TCPStore, the one the ranks' rendezvous uses. Node 0's launcher
// hosts it for the whole job; its ranks join it as torchrun's agent store
// (TORCHELASTIC_USE_AGENT_STORE=True), the other launchers as clients.
#pragma once

#include "launch/kv_store.h"

namespace zt::comm {

// A KeyValueStoreOpener over c10d::TCPStore. Hosting: the port must be free
// (Unavailable names it otherwise). Connecting: retried until the connect
// timeout; the operation timeout then bounds every operation
// (comm/store_socket.h), so a node 0 that is gone or frozen is an error
// naming its address, not a hang.
KeyValueStoreOpener TcpKeyValueStoreOpener();

}  // namespace zt::comm
