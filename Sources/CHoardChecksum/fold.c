// CRC-32 folding with PCLMULQDQ, after "Fast CRC Computation for Generic Polynomials Using
// PCLMULQDQ Instruction" (Gopal et al., Intel, 2009): the message is split into 128-bit chunks,
// and a chunk is moved forward by d bits, modulo the CRC polynomial P, by multiplying its two
// 64-bit halves by x^(64+d) mod P and x^d mod P. The result has degree < 96, so it fits in the
// chunk d bits later, into which it is XORed; the CRC of the whole message is then the CRC of the
// last chunk alone.
//
// Bit order: the CRC is reflected, so the first message bit is the lowest bit of the first byte,
// and a 16-byte chunk loaded little-endian holds the coefficient of x^(127 - i) in bit i. A 64-bit
// half likewise holds x^(63 - i) in bit i. PCLMULQDQ of two such halves puts the coefficient of
// x^(126 - m) in bit m, which the 128-bit chunk reads as x^(127 - m): the product comes out
// multiplied by x. The constants are therefore x^(64+d-1) mod P and x^(d-1) mod P, each written
// with degree k at bit 63 - k. Scripts/crc32-fold-constants.py computes them, and checks the
// whole scheme against zlib's CRC-32.
// The header first, outside the condition: elsewhere it still gives the file declarations, and
// an empty translation unit is not ISO C.
#include "CHoardChecksum.h"

#if defined(__x86_64__)

#include <immintrin.h>
#include <string.h>

/// The instructions the folding may use beyond x86_64's baseline (PCLMULQDQ, and SSE4.1 for the
/// moves around it); only these functions get them, so the rest still runs on any x86_64 CPU.
#define HOARD_FOLD_TARGET __attribute__((target("pclmul,sse4.1")))

int hoard_crc32_fold_available(void) {
    return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

/// Moves `chunk` forward by the distance `constants` encodes: its low 64-bit lane holds the
/// constant for the chunk's first half (x^(64+d-1) mod P), its high lane the one for its second
/// half (x^(d-1) mod P).
HOARD_FOLD_TARGET static inline __m128i fold(__m128i chunk, __m128i constants) {
    __m128i first = _mm_clmulepi64_si128(chunk, constants, 0x00);
    __m128i second = _mm_clmulepi64_si128(chunk, constants, 0x11);
    return _mm_xor_si128(first, second);
}

/// Loads the 16 bytes at `bytes`, which need no alignment.
HOARD_FOLD_TARGET static inline __m128i load(const uint8_t *bytes) {
    return _mm_loadu_si128((const __m128i *)(const void *)bytes);
}

HOARD_FOLD_TARGET void hoard_crc32_fold(const void *data, size_t length, uint32_t seed, uint8_t folded[16]) {
    // By 512 bits: four chunks in flight, so that the multiplications of one step overlap.
    const __m128i by512 = _mm_set_epi64x((long long)0xcad38e8f00000000u, (long long)0x653d982200000000u);
    const __m128i by384 = _mm_set_epi64x((long long)0x2a28386200000000u, (long long)0x69ccfc0d00000000u);
    const __m128i by256 = _mm_set_epi64x((long long)0x01b5fd1d00000000u, (long long)0x9570d49500000000u);
    const __m128i by128 = _mm_set_epi64x((long long)0x9ba54c6f00000000u, (long long)0x65673b4600000000u);

    const uint8_t *bytes = data;
    size_t tail = length & 15;
    const uint8_t *end = bytes + (length - tail);
    // The register starts as the complement of the seed, XORed into the first four bytes: the
    // same start the table-driven code makes.
    __m128i chunk0 = _mm_xor_si128(load(bytes), _mm_cvtsi32_si128((int)~seed));
    __m128i chunk1 = load(bytes + 16);
    __m128i chunk2 = load(bytes + 32);
    __m128i chunk3 = load(bytes + 48);
    bytes += 64;
    while (end - bytes >= 64) {
        chunk0 = _mm_xor_si128(fold(chunk0, by512), load(bytes));
        chunk1 = _mm_xor_si128(fold(chunk1, by512), load(bytes + 16));
        chunk2 = _mm_xor_si128(fold(chunk2, by512), load(bytes + 32));
        chunk3 = _mm_xor_si128(fold(chunk3, by512), load(bytes + 48));
        bytes += 64;
    }
    // Each of the four moved onto the last, in one step rather than three dependent ones.
    __m128i chunk = _mm_xor_si128(
        _mm_xor_si128(fold(chunk0, by384), fold(chunk1, by256)), _mm_xor_si128(fold(chunk2, by128), chunk3)
    );
    while (end - bytes >= 16) {
        chunk = _mm_xor_si128(fold(chunk, by128), load(bytes));
        bytes += 16;
    }
    if (tail > 0) {
        // The last chunk and the tail make 16 + tail bytes: put them after 16 - tail zero bytes,
        // which add nothing (the start value is already in), and fold the first 16 bytes of the
        // 32 onto the second. A few bytes more through the tables would cost a dependent table
        // read each.
        uint8_t scratch[48] = {0};
        _mm_storeu_si128((__m128i *)(void *)(scratch + 16), chunk);
        memcpy(scratch + 32, end, tail);
        chunk = _mm_xor_si128(fold(load(scratch + tail), by128), load(scratch + tail + 16));
    }
    _mm_storeu_si128((__m128i *)(void *)folded, chunk);
}

#endif
