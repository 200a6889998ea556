// CRC-32 (the reflected IEEE polynomial of `CRC32.swift`) folded with carry-less multiplication
// (PCLMULQDQ), and the SHA-256 compression of `SHA256.swift` with the SHA extensions, on x86_64.
// Elsewhere the header declares nothing and Hoard uses its Swift slicing-by-16 and SHA-256 alone.
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

/// Whether this CPU has the SHA extensions and SSSE3, which `hoard_sha256_compress` needs: like
/// PCLMULQDQ, they are checked at run time rather than assumed at build time.
int hoard_sha256_available(void);

/// Runs the SHA-256 compression function (FIPS 180-4, section 6.2.2) over `blockCount`
/// consecutive 64-byte message blocks at `blocks` (any alignment; none read when 0), updating the
/// eight hash words H0..H7 in `state` in place.
///
/// The padding is the caller's: the last blocks passed must already hold it. Call only when
/// `hoard_sha256_available` returns nonzero.
void hoard_sha256_compress(uint32_t state[8], const void *blocks, size_t blockCount);

#endif

#endif
