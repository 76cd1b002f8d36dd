// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of
// TFRecord framing, plus TensorFlow's "masked" form. Byte-wise table, no
// hardware instructions: event files are small.
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt::monitor {

// Incremental: crc = Crc32c(crc, data, n), starting at 0.
// Crc32c(0, "123456789", 9) == 0xE3069283.
uint32_t Crc32c(uint32_t crc, const void* data, size_t n);

// TFRecord stores CRCs masked, so that a CRC of data that itself contains
// CRCs is not degenerate: ((crc >> 15) | (crc << 17)) + 0xa282ead8.
uint32_t MaskCrc32c(uint32_t crc);
uint32_t UnmaskCrc32c(uint32_t masked);

}  // namespace zt::monitor
