// The estimator's view of the built-in models (models/registry.h): every
// parameter tensor with its size and sharding unit, in the order
// zt::Engine::Create sees them, and the transformer dimensions that size the
// activations. Builds nothing, so it works for billions of parameters.
// No LibTorch (models/catalog/catalog.h).
#pragma once

#include "absl/status/statusor.h"
#include "estimate/memory_estimate.h"
#include "models/catalog/catalog.h"

namespace zt::estimate {

// Errors as models::DescribeModel: an unknown name or override key, or
// dimensions that do not fit (the message names the key).
absl::StatusOr<ModelShape> BuiltinModelShape(const models::ModelSpec& spec);

}  // namespace zt::estimate
