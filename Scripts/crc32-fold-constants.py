#!/usr/bin/env python3
"""The folding constants of Sources/CHoardChecksum/fold.c, and a check of the scheme.

Prints, for each folding distance d, the two 64-bit constants x^(64+d-1) mod P and x^(d-1) mod P
(P the CRC-32 polynomial 0x104C11DB7), with the coefficient of x^k at bit 63 - k: the order in
which the reflected CRC keeps its bits. Then folds random messages the way fold.c does, with a
carry-less multiplication written out here, and compares the result with zlib.crc32.
"""
import os
import random
import zlib

P = 0x104C11DB7
MASK64 = (1 << 64) - 1


def x_power_mod_p(exponent):
    """x^exponent mod P, with the coefficient of x^k at bit k."""
    remainder = 1
    for _ in range(exponent):
        remainder <<= 1
        if remainder >> 32 & 1:
            remainder ^= P
    return remainder


def reflect64(value):
    """Moves the coefficient of x^k from bit k to bit 63 - k."""
    return int(f"{value:064b}"[::-1], 2)


def constant(exponent):
    """The constant for x^exponent: one power lower, since the product comes out times x."""
    return reflect64(x_power_mod_p(exponent - 1))


def clmul(a, b):
    """Carry-less product of two 64-bit values, as PCLMULQDQ computes it."""
    product = 0
    for bit in range(64):
        if b >> bit & 1:
            product ^= a << bit
    return product


def fold(chunk, distance):
    """Moves a 128-bit chunk forward by `distance` bits, modulo P."""
    return clmul(chunk & MASK64, constant(64 + distance)) ^ clmul(chunk >> 64, constant(distance))


def checksum(data, seed):
    """zlib.crc32(data, seed) for at least 64 bytes, as fold.c computes it."""
    tail = len(data) % 16
    whole = len(data) - tail
    chunks = [int.from_bytes(data[offset:offset + 16], "little") for offset in range(0, whole, 16)]
    chunks[0] ^= ~seed & 0xFFFFFFFF
    lanes, rest = chunks[:4], chunks[4:]
    while len(rest) >= 4:
        lanes = [fold(lane, 512) ^ chunk for lane, chunk in zip(lanes, rest[:4])]
        rest = rest[4:]
    last = fold(lanes[0], 384) ^ fold(lanes[1], 256) ^ fold(lanes[2], 128) ^ lanes[3]
    for chunk in rest:
        last = fold(last, 128) ^ chunk
    if tail:
        # 16 - tail zero bytes, the last chunk and the tail: two chunks, the first folded onto the second.
        scratch = bytes(16) + last.to_bytes(16, "little") + data[whole:] + bytes(16 - tail)
        first = int.from_bytes(scratch[tail:tail + 16], "little")
        second = int.from_bytes(scratch[tail + 16:tail + 32], "little")
        last = fold(first, 128) ^ second
    return zlib.crc32(last.to_bytes(16, "little"), 0xFFFFFFFF)


for distance in (512, 384, 256, 128):
    print(f"by{distance}: _mm_set_epi64x({constant(distance):#018x}, {constant(64 + distance):#018x})")

for _ in range(500):
    data = os.urandom(random.randint(64, 1100))
    seed = random.getrandbits(32)
    assert checksum(data, seed) == zlib.crc32(data, seed)
print("folding agrees with zlib.crc32 on 500 random messages")
