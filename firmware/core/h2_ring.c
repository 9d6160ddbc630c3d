#include "h2_ring.h"
#include "h2_port.h"

void h2_ring_init(h2_ring_t *r, uint8_t *buf, uint16_t size)
{
    r->buf = buf;
    r->mask = (uint16_t)(size - 1u);
    r->head = 0;
    r->tail = 0;
}

uint16_t h2_ring_used(const h2_ring_t *r)
{
    uint16_t h, t;
    H2_ATOMIC_BEGIN
    h = r->head;
    t = r->tail;
    H2_ATOMIC_END
    return (uint16_t)((h - t) & r->mask);
}

uint16_t h2_ring_free(const h2_ring_t *r)
{
    return (uint16_t)(r->mask - h2_ring_used(r));
}

void h2_ring_publish(h2_ring_t *r, uint16_t new_head)
{
    H2_ATOMIC_BEGIN
    r->head = new_head;
    H2_ATOMIC_END
}

uint8_t h2_ring_put(h2_ring_t *r, uint8_t byte)
{
    if (h2_ring_free(r) == 0) {
        return 0;
    }
    r->buf[r->head] = byte;
    h2_ring_publish(r, (uint16_t)((r->head + 1u) & r->mask));
    return 1;
}

uint8_t h2_ring_get(h2_ring_t *r, uint8_t *byte)
{
    uint16_t h, t;
    H2_ATOMIC_BEGIN
    h = r->head;
    H2_ATOMIC_END
    t = r->tail;
    if (h == t) {
        return 0;
    }
    *byte = r->buf[t];
    t = (uint16_t)((t + 1u) & r->mask);
    H2_ATOMIC_BEGIN
    r->tail = t;
    H2_ATOMIC_END
    return 1;
}
