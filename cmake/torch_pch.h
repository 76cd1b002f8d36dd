// Precompiled header shared by every target that includes LibTorch.
// Only stable, heavy third-party headers belong here; never our own.
#pragma once
#include <torch/torch.h>
