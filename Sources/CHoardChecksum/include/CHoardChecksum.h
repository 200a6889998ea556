// CRC-32 (the reflected IEEE polynomial of `CRC32.swift`) folded with carry-less multiplication
// (PCLMULQDQ) on x86_64. Elsewhere the header declares nothing and Hoard uses its Swift
// slicing-by-16 alone.
#ifndef HOARD_CHECKSUM_H
#define HOARD_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

#if defined(__x86_64__)

/// Whether this CPU has PCLMULQDQ and SSE4.1, which `hoard_crc32_fold` needs: x86_64 only
/// promises SSE2, so it is checked at run time rather than assumed at build time.
int hoard_crc32_fold_available(void);

/// Folds `length` bytes at `data` (at least 64; any alignment) into 16 bytes with the same
/// CRC-32 remainder, and writes them to `folded`.
///
/// `seed` is the CRC-32 of the bytes before `data` (0 to start), as `CRC32.checksum` takes it.
/// The CRC-32 of those bytes followed by `data` is then the CRC-32 of the 16 folded bytes with a
/// seed of 0xFFFFFFFF (a zero register): the caller finishes with its table, which is both shorter
/// and easier to check than a Barrett reduction here. Call only when
/// `hoard_crc32_fold_available` returns nonzero.
void hoard_crc32_fold(const void *data, size_t length, uint32_t seed, uint8_t folded[16]);

#endif

#endif
