// The SHA-256 compression function (FIPS 180-4, section 6.2.2) with the x86 SHA extensions, written
// from the instructions' definitions in the Intel SDM (SHA256RNDS2, SHA256MSG1, SHA256MSG2):
//
// - SHA256RNDS2 does two rounds. One register holds the working variables A, B, E and F (A in the
//   top 32-bit lane, F in the bottom one: "ABEF"), a second C, D, G and H ("CDGH"), and the low two
//   lanes of a third hold W[t] + K[t] and W[t+1] + K[t+1]. It returns the new ABEF. Two rounds move
//   A to C, B to D, E to G and F to H, so the new CDGH is simply the old ABEF: the two registers
//   trade roles at each instruction, and no shuffling is needed between rounds.
// - The schedule of FIPS 180-4, (6.2.2) step 1, W[t] = σ1(W[t-2]) + W[t-7] + σ0(W[t-15]) +
//   W[t-16], is made four words at a time, with word t in lane t mod 4 (lowest lane first).
//   SHA256MSG1 of W[t-16..t-13] and W[t-12..t-9] gives W[t-16+i] + σ0(W[t-15+i]) in lane i; the
//   W[t-7+i] are added with an ordinary 32-bit addition (PALIGNR picks W[t-7..t-4] out of the two
//   registers they straddle); SHA256MSG2 of that sum and W[t-4..t-1] then adds σ1(W[t-2+i]), for
//   the upper two lanes from the two words it has just computed in the lower two.
//
// The Swift compression of `SHA256.swift` is the portable reference: the tests compare the two on every
// length up to 1100 bytes and on random ones up to 64 KiB. The header first, outside the
// condition, for the same reason as in fold.c.
#include "CHoardChecksum.h"

#if defined(__x86_64__)

#include <immintrin.h>

/// The instructions the compression uses beyond x86_64's baseline: the SHA extensions, and SSSE3
/// for PSHUFB (the big-endian load) and PALIGNR (the schedule). Only these functions get them.
#define HOARD_SHA_TARGET __attribute__((target("sha,ssse3")))

int hoard_sha256_available(void) {
    return __builtin_cpu_supports("sha") && __builtin_cpu_supports("ssse3");
}

/// The 64 round constants K (FIPS 180-4, section 4.2.2), read four at a time in schedule order.
static const uint32_t round_constants[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

/// Loads four big-endian message words from the 16 bytes at `bytes` (any alignment), word i in
/// lane i: PSHUFB reverses the bytes within each 32-bit lane.
HOARD_SHA_TARGET static inline __m128i load_words(const uint8_t *bytes, __m128i byte_swap) {
    return _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(const void *)bytes), byte_swap);
}

/// The next four schedule words W[t..t+3], from the sixteen before them: `w16` holds
/// W[t-16..t-13], `w12` W[t-12..t-9], `w8` W[t-8..t-5] and `w4` W[t-4..t-1].
HOARD_SHA_TARGET static inline __m128i next_words(__m128i w16, __m128i w12, __m128i w8, __m128i w4) {
    // Lane i: W[t-16+i] + σ0(W[t-15+i]).
    __m128i sum = _mm_sha256msg1_epu32(w16, w12);
    // Lane i: + W[t-7+i]. Those are the top three lanes of w8 and the bottom one of w4: the 32
    // bytes w4:w8 shifted right by one lane.
    sum = _mm_add_epi32(sum, _mm_alignr_epi8(w4, w8, 4));
    // Lane i: + σ1(W[t-2+i]), from the top two lanes of w4 for lanes 0 and 1, and from the
    // results of lanes 0 and 1 for lanes 2 and 3.
    return _mm_sha256msg2_epu32(sum, w4);
}

/// Four rounds with the schedule words `words` (W[t..t+3]) and the constants K[t..t+3] at
/// `constants`. On return `abef` and `cdgh` hold the working variables after the four rounds,
/// in the same layout as on entry.
HOARD_SHA_TARGET static inline void four_rounds(__m128i *abef, __m128i *cdgh, __m128i words, const uint32_t *constants) {
    __m128i summed = _mm_add_epi32(words, _mm_loadu_si128((const __m128i *)(const void *)constants));
    // Rounds t and t+1 read lanes 0 and 1. The result is the new ABEF; the old ABEF, still in
    // `abef`, is now CDGH.
    *cdgh = _mm_sha256rnds2_epu32(*cdgh, *abef, summed);
    // Rounds t+2 and t+3 read lanes 2 and 3, moved down to 0 and 1: the roles swap back.
    *abef = _mm_sha256rnds2_epu32(*abef, *cdgh, _mm_shuffle_epi32(summed, 0x0e));
}

HOARD_SHA_TARGET void hoard_sha256_compress(uint32_t state[8], const void *blocks, size_t blockCount) {
    // Byte i of each lane from byte 3 - i: big-endian words in little-endian lanes.
    const __m128i byte_swap = _mm_set_epi64x(0x0c0d0e0f08090a0bLL, 0x0405060700010203LL);

    // state[0..3] = A, B, C, D and state[4..7] = E, F, G, H, lowest lane first. Swapping the lanes
    // of each pair gives (B, A, D, C) and (F, E, H, G); their low halves make ABEF (F, E, B, A from
    // the bottom) and their high halves CDGH (H, G, D, C).
    __m128i badc = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(const void *)state), 0xb1);
    __m128i fehg = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(const void *)(state + 4)), 0xb1);
    __m128i abef = _mm_unpacklo_epi64(fehg, badc);
    __m128i cdgh = _mm_unpackhi_epi64(fehg, badc);

    const uint8_t *block = blocks;
    for (size_t remaining = blockCount; remaining > 0; remaining--, block += 64) {
        const __m128i saved_abef = abef;
        const __m128i saved_cdgh = cdgh;

        // Rounds 0 to 15 use the message words themselves.
        __m128i w0 = load_words(block, byte_swap);
        __m128i w1 = load_words(block + 16, byte_swap);
        __m128i w2 = load_words(block + 32, byte_swap);
        __m128i w3 = load_words(block + 48, byte_swap);
        four_rounds(&abef, &cdgh, w0, round_constants);
        four_rounds(&abef, &cdgh, w1, round_constants + 4);
        four_rounds(&abef, &cdgh, w2, round_constants + 8);
        four_rounds(&abef, &cdgh, w3, round_constants + 12);

        // Rounds 16 to 63, sixteen a step: w0 to w3 always hold the last sixteen words, and each
        // new group of four replaces the oldest.
        for (int round = 16; round < 64; round += 16) {
            w0 = next_words(w0, w1, w2, w3);
            four_rounds(&abef, &cdgh, w0, round_constants + round);
            w1 = next_words(w1, w2, w3, w0);
            four_rounds(&abef, &cdgh, w1, round_constants + round + 4);
            w2 = next_words(w2, w3, w0, w1);
            four_rounds(&abef, &cdgh, w2, round_constants + round + 8);
            w3 = next_words(w3, w0, w1, w2);
            four_rounds(&abef, &cdgh, w3, round_constants + round + 12);
        }

        // H(i) = H(i-1) + the working variables, lane by lane in either layout.
        abef = _mm_add_epi32(abef, saved_abef);
        cdgh = _mm_add_epi32(cdgh, saved_cdgh);
    }

    // Back to A..H: the high halves of ABEF and CDGH are (B, A) and (D, C), the low halves
    // (F, E) and (H, G); swapping the lanes of each pair puts them in order.
    __m128i abcd = _mm_shuffle_epi32(_mm_unpackhi_epi64(abef, cdgh), 0xb1);
    __m128i efgh = _mm_shuffle_epi32(_mm_unpacklo_epi64(abef, cdgh), 0xb1);
    _mm_storeu_si128((__m128i *)(void *)state, abcd);
    _mm_storeu_si128((__m128i *)(void *)(state + 4), efgh);
}

#endif
