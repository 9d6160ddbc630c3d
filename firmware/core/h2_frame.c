#include "h2_frame.h"

#include <string.h>

#include "h2_crc.h"
#include "h2_protocol.h"

void h2_fw_begin(h2_fw_t *w, h2_ring_t *ring, uint8_t type, uint16_t seq, uint16_t len)
{
    w->ring = ring;
    w->buf = ring->buf;
    w->mask = ring->mask;
    w->pos = ring->head; /* only the producer moves head: no race */
    w->buf[w->pos] = H2_SYNC0;
    w->pos = (uint16_t)((w->pos + 1u) & w->mask);
    w->buf[w->pos] = H2_SYNC1;
    w->pos = (uint16_t)((w->pos + 1u) & w->mask);
    w->crc = H2_CRC_INIT;
    h2_fw_u16(w, len);
    h2_fw_u8(w, type);
    h2_fw_u16(w, seq);
}

void h2_fw_end(h2_fw_t *w)
{
    uint16_t crc = w->crc;
    w->buf[w->pos] = (uint8_t)crc;
    w->pos = (uint16_t)((w->pos + 1u) & w->mask);
    w->buf[w->pos] = (uint8_t)(crc >> 8);
    w->pos = (uint16_t)((w->pos + 1u) & w->mask);
    h2_ring_publish(w->ring, w->pos);
}

uint16_t h2_frame_encode(uint8_t *out, uint8_t type, uint16_t seq, const uint8_t *payload,
                         uint16_t len)
{
    out[0] = H2_SYNC0;
    out[1] = H2_SYNC1;
    out[2] = (uint8_t)len;
    out[3] = (uint8_t)(len >> 8);
    out[4] = type;
    out[5] = (uint8_t)seq;
    out[6] = (uint8_t)(seq >> 8);
    if (len) {
        memmove(out + H2_HEADER_LEN, payload, len);
    }
    uint16_t crc = h2_crc(out + 2, (uint16_t)(len + 5u));
    out[H2_HEADER_LEN + len] = (uint8_t)crc;
    out[H2_HEADER_LEN + len + 1] = (uint8_t)(crc >> 8);
    return (uint16_t)(H2_OVERHEAD + len);
}

void h2_parser_init(h2_parser_t *p, uint8_t *buf, uint16_t cap)
{
    p->buf = buf;
    p->cap = cap;
    p->len = 0;
    p->frame_len = 0;
    p->discarded = 0;
}

static void drop(h2_parser_t *p, uint16_t n)
{
    p->len = (uint16_t)(p->len - n);
    memmove(p->buf, p->buf + n, p->len);
}

uint8_t h2_parser_feed(h2_parser_t *p, uint8_t byte)
{
    if (p->frame_len) {
        drop(p, p->frame_len);
        p->frame_len = 0;
    }
    if (p->len >= p->cap) {
        return 0;
    }
    p->buf[p->len++] = byte;
    return 1;
}

uint8_t h2_parser_next(h2_parser_t *p, h2_frame_t *f)
{
    if (p->frame_len) {
        drop(p, p->frame_len);
        p->frame_len = 0;
    }
    for (;;) {
        if (p->len >= 1 && p->buf[0] != H2_SYNC0) {
            drop(p, 1);
            continue;
        }
        if (p->len >= 2 && p->buf[1] != H2_SYNC1) {
            drop(p, 1);
            continue;
        }
        if (p->len < 4) {
            return 0;
        }
        uint16_t plen = h2_get_u16(p->buf + 2);
        if (plen > H2_MAX_PAYLOAD || plen > p->cap - H2_OVERHEAD) {
            p->discarded++;
            drop(p, 1);
            continue;
        }
        uint16_t total = (uint16_t)(H2_OVERHEAD + plen);
        if (p->len < total) {
            return 0;
        }
        uint16_t crc = h2_crc(p->buf + 2, (uint16_t)(plen + 5u));
        if (crc != h2_get_u16(p->buf + H2_HEADER_LEN + plen)) {
            p->discarded++;
            drop(p, 1);
            continue;
        }
        f->type = p->buf[4];
        f->seq = h2_get_u16(p->buf + 5);
        f->len = plen;
        f->payload = p->buf + H2_HEADER_LEN;
        p->frame_len = total;
        return 1;
    }
}
