#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h2_frame.h"
#include "h2_protocol.h"
#include "vectors.h"

#define BIG (H2_OVERHEAD + H2_MAX_PAYLOAD)

/* Every golden vector: the flat encoder and the ring writer produce frame_hex, and the parser
 * returns the vector's type, seq and payload, alone and inside a noisy stream. */
void test_frame(const char *vectors_path)
{
    vector_t *v;
    int n = vectors_load(vectors_path, &v);
    CHECK(n >= 20);
    if (n < 0) {
        return;
    }
    static uint8_t out[BIG], ring_store[2048], window[BIG], stream[64 * 1024];
    int types_seen[256] = {0};
    size_t stream_len = 0;
    for (int i = 0; i < n; i++) {
        types_seen[v[i].type] = 1;
        uint16_t len = h2_frame_encode(out, (uint8_t)v[i].type, (uint16_t)v[i].seq, v[i].payload,
                                       (uint16_t)v[i].payload_len);
        CHECK_EQ(len, v[i].frame_len);
        CHECK(memcmp(out, v[i].frame, (size_t)len) == 0);

        h2_ring_t ring;
        h2_fw_t w;
        h2_ring_init(&ring, ring_store, sizeof ring_store);
        h2_fw_begin(&w, &ring, (uint8_t)v[i].type, (uint16_t)v[i].seq, (uint16_t)v[i].payload_len);
        for (int k = 0; k < v[i].payload_len; k++) {
            h2_fw_u8(&w, v[i].payload[k]);
        }
        CHECK_EQ(h2_ring_used(&ring), 0);
        h2_fw_end(&w);
        CHECK_EQ(h2_ring_used(&ring), v[i].frame_len);
        for (int k = 0; k < v[i].frame_len; k++) {
            uint8_t b = 0;
            h2_ring_get(&ring, &b);
            CHECK_EQ(b, v[i].frame[k]);
        }

        /* garbage, including a lone sync byte, before each frame */
        const uint8_t junk[] = {0x00, 0xA5, 0x13, 0xA5, 0xA5, 0x11};
        memcpy(stream + stream_len, junk, (size_t)(i % (int)sizeof junk));
        stream_len += (size_t)(i % (int)sizeof junk);
        memcpy(stream + stream_len, v[i].frame, (size_t)v[i].frame_len);
        stream_len += (size_t)v[i].frame_len;
    }
    CHECK(types_seen[H2_T_INFO] && types_seen[H2_T_SAMPLES] && types_seen[H2_T_MARKER]);
    CHECK(types_seen[H2_T_STATUS] && types_seen[H2_T_ACK]);
    for (unsigned t = H2_C_IDENTIFY; t <= H2_C_SET_OVERSAMPLING; t++) {
        CHECK(types_seen[t]);
    }

    h2_parser_t p;
    h2_frame_t f;
    h2_parser_init(&p, window, sizeof window);
    int got = 0;
    for (size_t k = 0; k < stream_len; k++) {
        CHECK(h2_parser_feed(&p, stream[k]));
        while (h2_parser_next(&p, &f)) {
            CHECK(got < n);
            if (got < n) {
                CHECK_EQ(f.type, v[got].type);
                CHECK_EQ(f.seq, v[got].seq);
                CHECK_EQ(f.len, v[got].payload_len);
                CHECK(memcmp(f.payload, v[got].payload, f.len) == 0);
            }
            got++;
        }
    }
    CHECK_EQ(got, n);
    CHECK_EQ(p.discarded, 0);

    /* A length above 1024 is not a frame: the parser skips it and finds the next one. */
    uint8_t bad[] = {0xA5, 0x5A, 0x01, 0x04, 0x01, 0x00, 0x00};
    const vector_t *ack = vectors_find(v, n, "ack_ok");
    h2_parser_init(&p, window, sizeof window);
    for (size_t k = 0; k < sizeof bad; k++) {
        h2_parser_feed(&p, bad[k]);
        CHECK(!h2_parser_next(&p, &f));
    }
    got = 0;
    for (int k = 0; k < ack->frame_len; k++) {
        h2_parser_feed(&p, ack->frame[k]);
        got += h2_parser_next(&p, &f);
    }
    CHECK_EQ(got, 1);
    CHECK_EQ(p.discarded, 1);

    /* A device-sized window (16-byte payloads) rejects a SAMPLES frame but keeps going. */
    uint8_t small[H2_OVERHEAD + 16];
    const vector_t *big = vectors_find(v, n, "samples_2ch_10");
    h2_parser_init(&p, small, sizeof small);
    got = 0;
    for (int k = 0; k < big->frame_len; k++) {
        CHECK(h2_parser_feed(&p, big->frame[k]));
        got += h2_parser_next(&p, &f);
    }
    for (int k = 0; k < ack->frame_len; k++) {
        CHECK(h2_parser_feed(&p, ack->frame[k]));
        got += h2_parser_next(&p, &f);
    }
    CHECK_EQ(got, 1);
    CHECK_EQ(f.type, H2_T_ACK);
    free(v);
}

/* Random valid frames, with garbage between them and some frames corrupted (bit flips,
 * truncation): every intact frame comes out, in order, and nothing else. */
static uint32_t rng = 2463534242u;
static uint32_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

void test_parser_fuzz(void)
{
    static uint8_t stream[200000], window[BIG], payload[H2_MAX_PAYLOAD];
    static uint16_t expect_seq[4000];
    for (int round = 0; round < 20; round++) {
        size_t len = 0;
        int expected = 0;
        uint16_t seq = (uint16_t)next_rand();
        while (len < sizeof stream - 3000 && expected < 4000) {
            uint16_t plen = (uint16_t)(next_rand() % 5 == 0 ? next_rand() % 1025 : next_rand() % 40);
            for (uint16_t k = 0; k < plen; k++) {
                /* sync bytes are common inside payloads on purpose */
                uint32_t r = next_rand();
                payload[k] = (uint8_t)(r % 3 == 0 ? 0xA5 : r % 3 == 1 ? 0x5A : r >> 8);
            }
            uint8_t *frame = stream + len;
            uint16_t flen = h2_frame_encode(frame, (uint8_t)next_rand(), seq, payload, plen);
            uint32_t fate = next_rand() % 10;
            if (fate == 0) {
                /* flip 1..3 bits: CRC-16/CCITT catches every 1-3 bit error at these lengths */
                uint32_t flips = 1 + next_rand() % 3;
                uint32_t pos[3];
                for (uint32_t k = 0; k < flips; k++) {
                    do {
                        pos[k] = next_rand() % (uint32_t)(flen * 8u);
                    } while ((k > 0 && pos[k] == pos[0]) || (k > 1 && pos[k] == pos[1]));
                    frame[pos[k] / 8] ^= (uint8_t)(1u << (pos[k] % 8));
                }
                len += flen;
            } else if (fate == 1) {
                len += next_rand() % flen; /* truncated */
            } else {
                expect_seq[expected++] = seq;
                len += flen;
            }
            seq++;
            uint32_t junk = next_rand() % 4 == 0 ? next_rand() % 20 : 0;
            for (uint32_t k = 0; k < junk; k++) {
                stream[len++] = (uint8_t)(next_rand() % 2 ? 0xA5 : next_rand());
            }
        }
        /* enough zeros to complete any frame a corrupted length is still waiting for */
        memset(stream + len, 0, BIG);
        len += BIG;

        h2_parser_t p;
        h2_frame_t f;
        h2_parser_init(&p, window, sizeof window);
        int got = 0, wrong = 0;
        for (size_t k = 0; k < len; k++) {
            h2_parser_feed(&p, stream[k]);
            while (h2_parser_next(&p, &f)) {
                if (got < expected && f.seq == expect_seq[got]) {
                    got++;
                } else {
                    wrong++;
                }
            }
        }
        CHECK_EQ(got, expected);
        CHECK_EQ(wrong, 0);
    }
}
