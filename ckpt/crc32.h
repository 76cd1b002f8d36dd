// CRC-32 with the zip polynomial, for the zip container of .pt files.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt::ckpt {

// Incrementally: crc = Crc32(crc, data, n), starting at 0.
uint32_t Crc32(uint32_t crc, const void* data, size_t n);

}  // namespace zt::ckpt
