// Chooses the network address the Gloo transport listens on and creates the
// gloo TCP device. Policy (first that applies):
//   1. GLOO_SOCKET_IFNAME=eth0: that interface (PyTorch's variable).
//   2. MASTER_ADDR is loopback: 127.0.0.1 (single host).
//   3. The local address of the route to MASTER_ADDR (what peers can reach
//      if they can reach rank 0), else this host name's address.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "launch/rank_env.h"

namespace gloo::transport {
class Device;
}

namespace zt::comm {

struct GlooDevice {
  std::shared_ptr<::gloo::transport::Device> device;
  std::string description;  // "interface eth0" / "address 10.0.0.5", for messages
};

absl::StatusOr<GlooDevice> CreateGlooDevice(const RankEnv& env);

}  // namespace zt::comm
