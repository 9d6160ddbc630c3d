/* Single-producer single-consumer byte ring. One side may be an interrupt handler: the
 * producer owns `head`, the consumer owns `tail`, and each only reads the other's index. */
#ifndef H2_RING_H
#define H2_RING_H

#include <stdint.h>

typedef struct {
    uint8_t *buf;
    uint16_t mask; /* size - 1; size is a power of two */
    volatile uint16_t head;
    volatile uint16_t tail;
} h2_ring_t;

#ifdef __cplusplus
extern "C" {
#endif

/* size must be a power of two, 2..32768; the ring holds size - 1 bytes. */
void h2_ring_init(h2_ring_t *r, uint8_t *buf, uint16_t size);
uint16_t h2_ring_used(const h2_ring_t *r);
uint16_t h2_ring_free(const h2_ring_t *r);

/* Producer side. A producer may write bytes past head (buf[(head + i) & mask]) and make them
 * visible all at once with h2_ring_publish(new_head), so the consumer never sees half a frame. */
void h2_ring_publish(h2_ring_t *r, uint16_t new_head);
uint8_t h2_ring_put(h2_ring_t *r, uint8_t byte); /* 0 when full */

/* Consumer side. */
uint8_t h2_ring_get(h2_ring_t *r, uint8_t *byte); /* 0 when empty */

/* For interrupt handlers, where the other index cannot change underneath. */
static inline uint8_t h2_ring_isr_get(h2_ring_t *r, uint8_t *byte)
{
    uint16_t t = r->tail;
    if (t == r->head) {
        return 0;
    }
    *byte = r->buf[t];
    r->tail = (uint16_t)((t + 1u) & r->mask);
    return 1;
}

static inline uint8_t h2_ring_isr_put(h2_ring_t *r, uint8_t byte)
{
    uint16_t h = r->head;
    uint16_t next = (uint16_t)((h + 1u) & r->mask);
    if (next == r->tail) {
        return 0;
    }
    r->buf[h] = byte;
    r->head = next;
    return 1;
}

#ifdef __cplusplus
}
#endif

#endif
