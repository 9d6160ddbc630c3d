#include <string.h>

#include "check.h"
#include "h2_crc.h"
#include "h2_ring.h"

static uint16_t crc_bitwise(const uint8_t *d, size_t n)
{
    uint16_t crc = 0xFFFF;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)(d[i] << 8);
        for (int b = 0; b < 8; b++) {
            crc = (uint16_t)((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
        }
    }
    return crc;
}

void test_crc_ring(void)
{
    CHECK_EQ(h2_crc((const uint8_t *)"123456789", 9), 0x29B1);
    CHECK_EQ(h2_crc((const uint8_t *)"", 0), 0xFFFF);

    /* The table-free byte form against the textbook bit loop, for every single byte and a
     * few thousand pseudo-random strings. */
    uint8_t buf[64];
    uint32_t x = 12345;
    for (int i = 0; i < 256; i++) {
        buf[0] = (uint8_t)i;
        CHECK_EQ(h2_crc(buf, 1), crc_bitwise(buf, 1));
    }
    for (int t = 0; t < 3000; t++) {
        size_t n = (size_t)(t % 64);
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            buf[i] = (uint8_t)x;
        }
        CHECK_EQ(h2_crc(buf, (uint16_t)n), crc_bitwise(buf, n));
    }

    h2_ring_t r;
    uint8_t store[8];
    uint8_t b;
    h2_ring_init(&r, store, sizeof store);
    CHECK_EQ(h2_ring_free(&r), 7);
    CHECK(!h2_ring_get(&r, &b));
    /* Wrap many times; the ring holds size - 1 bytes and keeps FIFO order. */
    uint8_t next_in = 0, next_out = 0;
    for (int round = 0; round < 50; round++) {
        int k = round % 8;
        for (int i = 0; i < k; i++) {
            uint8_t ok = h2_ring_put(&r, next_in);
            CHECK_EQ(ok, i < 7);
            if (ok) {
                next_in++;
            }
        }
        CHECK_EQ(h2_ring_used(&r), (uint8_t)(next_in - next_out));
        while (h2_ring_get(&r, &b)) {
            CHECK_EQ(b, next_out);
            next_out++;
        }
    }
    /* Bytes written past head stay invisible until published. */
    r.buf[(r.head + 0u) & r.mask] = 0xAA;
    r.buf[(r.head + 1u) & r.mask] = 0xBB;
    CHECK_EQ(h2_ring_used(&r), 0);
    h2_ring_publish(&r, (uint16_t)((r.head + 2u) & r.mask));
    CHECK_EQ(h2_ring_used(&r), 2);
    CHECK(h2_ring_isr_get(&r, &b) && b == 0xAA);
    CHECK(h2_ring_isr_get(&r, &b) && b == 0xBB);
    CHECK(!h2_ring_isr_get(&r, &b));
    for (int i = 0; i < 7; i++) {
        CHECK(h2_ring_isr_put(&r, (uint8_t)i));
    }
    CHECK(!h2_ring_isr_put(&r, 99));
}
