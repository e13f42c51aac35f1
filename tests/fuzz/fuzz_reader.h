/* fuzz_reader.h -- how our libFuzzer targets read their input: a cursor
 * over the fuzzer's bytes (bytes past the end read as 0, so every input
 * is a complete script), fixed-width readers, an "interesting 64-bit
 * value" reader, and CHECK, which names the broken property and aborts
 * (libFuzzer then keeps the input as a crash).
 *
 * Header-only, static inline: each target includes what it uses.
 * Multi-byte readers: u16/u64 read big-endian, u32 little-endian (what
 * the targets wrote before they shared this file; their corpora stay
 * valid). */
#ifndef FH_TESTS_FUZZ_READER_H
#define FH_TESTS_FUZZ_READER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct in {
    const uint8_t *p;
    size_t n, at;
} in_t;

static inline uint8_t u8(in_t *in)
{
    return in->at < in->n ? in->p[in->at++] : 0;
}

static inline uint16_t u16(in_t *in)
{
    uint16_t hi = u8(in);
    return (uint16_t)(hi << 8 | u8(in));
}

static inline uint32_t u32(in_t *in)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v |= (uint32_t)u8(in) << (8 * i);
    return v;
}

static inline uint64_t u64(in_t *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | u8(in);
    return v;
}

/* A 64-bit argument: small, small negative, a byte shifted anywhere (the
 * values next to the overflow limits), or any. */
static inline uint64_t arg(in_t *in)
{
    uint8_t how = u8(in);
    switch (how % 4) {
    case 0: return how >> 2;
    case 1: return (uint64_t)(int64_t)(int8_t)u8(in);
    case 2: {
        uint64_t v = u8(in);
        return v << (u8(in) % 64);
    }
    default: return u64(in);
    }
}

#define CHECK(c)                                                           \
    do {                                                                   \
        if (!(c)) {                                                        \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c);        \
            abort();                                                       \
        }                                                                  \
    } while (0)

#endif
