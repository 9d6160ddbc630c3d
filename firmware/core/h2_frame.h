/* Frame encoding (into a ring or a flat buffer) and the resynchronising frame decoder. */
#ifndef H2_FRAME_H
#define H2_FRAME_H

#include <stdint.h>

#include "h2_crc.h"
#include "h2_ring.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Writes one frame into a ring. The caller checks h2_ring_free() >= H2_OVERHEAD + len first;
 * the frame becomes visible to the consumer at h2_fw_end. The byte writers are inline: they
 * run for every byte the meter sends, which is most of the main loop's work. */
typedef struct {
    h2_ring_t *ring;
    uint8_t *buf;
    uint16_t mask;
    uint16_t pos; /* where the next byte goes (the ring's head is not moved until the end) */
    uint16_t crc;
} h2_fw_t;

void h2_fw_begin(h2_fw_t *w, h2_ring_t *ring, uint8_t type, uint16_t seq, uint16_t len);
void h2_fw_end(h2_fw_t *w);

static inline void h2_fw_u8(h2_fw_t *w, uint8_t v)
{
    w->crc = h2_crc_update(w->crc, v);
    w->buf[w->pos] = v;
    w->pos = (uint16_t)((w->pos + 1u) & w->mask);
}

static inline void h2_fw_u16(h2_fw_t *w, uint16_t v)
{
    h2_fw_u8(w, (uint8_t)v);
    h2_fw_u8(w, (uint8_t)(v >> 8));
}

static inline void h2_fw_u32(h2_fw_t *w, uint32_t v)
{
    h2_fw_u16(w, (uint16_t)v);
    h2_fw_u16(w, (uint16_t)(v >> 16));
}

/* Flat encoder; returns the frame length (H2_OVERHEAD + len). */
uint16_t h2_frame_encode(uint8_t *out, uint8_t type, uint16_t seq, const uint8_t *payload,
                         uint16_t len);

/* Decoder over a sliding window of unconsumed bytes (PROTOCOL.md, "Receiving and
 * resynchronising"): garbage is skipped, and after a bad CRC or an oversized length only one
 * byte is dropped, because the real frame may begin inside the rejected one. */
typedef struct {
    uint8_t *buf;
    uint16_t cap;         /* H2_OVERHEAD + the largest payload accepted */
    uint16_t len;         /* bytes in the window */
    uint16_t frame_len;   /* bytes of the frame last returned, dropped at the next call */
    uint16_t discarded;   /* frame candidates rejected (bad CRC or too long), wraps */
} h2_parser_t;

typedef struct {
    uint8_t type;
    uint16_t seq;
    uint16_t len;
    const uint8_t *payload; /* valid until the next h2_parser_* call */
} h2_frame_t;

void h2_parser_init(h2_parser_t *p, uint8_t *buf, uint16_t cap);
/* Returns 0 when the window is full: call h2_parser_next until it returns 0, then retry. */
uint8_t h2_parser_feed(h2_parser_t *p, uint8_t byte);
/* Returns 1 and fills *f when a whole valid frame is at the front of the window. */
uint8_t h2_parser_next(h2_parser_t *p, h2_frame_t *f);

static inline uint16_t h2_get_u16(const uint8_t *b)
{
    return (uint16_t)(b[0] | ((uint16_t)b[1] << 8));
}

static inline uint32_t h2_get_u32(const uint8_t *b)
{
    return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

#ifdef __cplusplus
}
#endif

#endif
