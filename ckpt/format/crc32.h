// CRC-32 with the zip polynomial, for the zip container of .pt files.
//
// Crc32 takes the fastest path the CPU has: carry-less multiplication
// (PCLMULQDQ) folding 64 bytes per step, about 10x the table; otherwise, and
// for the short head and tail of a buffer, Crc32Reference, the slicing-by-8
// table. Both give the same value for every input (tests/ckpt/crc32_test.cc).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zt::ckpt {

// Incrementally: crc = Crc32(crc, data, n), starting at 0.
uint32_t Crc32(uint32_t crc, const void* data, size_t n);

// The table implementation alone (the reference the fast path is tested against).
uint32_t Crc32Reference(uint32_t crc, const void* data, size_t n);

// The CRC of A followed by B from crc_a = Crc32(0, A), crc_b = Crc32(0, B)
// and B's length: what lets pieces of one record be hashed on several
// threads. Multiplies crc_a by x^(8 len_b) modulo the polynomial (GF(2)),
// O(log len_b) steps.
uint32_t Crc32Combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

// Whether Crc32 folds with PCLMULQDQ on this CPU.
bool Crc32UsesClmul();

}  // namespace zt::ckpt
