/* The TWI plumbing shared by the register-file parts (see twi_register_part.h): a write
 * transaction's first byte sets the register pointer and the next two (high, low) write that
 * register; a read transaction returns the pointed register high byte first, then 0xFF. */
#include "twi_register_part.h"

#include "avr_twi.h"

static void ack(twi_register_part_t *t)
{
    avr_raise_irq(t->irq + TWI_IRQ_INPUT, avr_twi_irq_msg(TWI_COND_ACK, t->selected, 1));
}

/* The master's bus events (simavr 1.6 TWI messages). */
static void on_bus(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    twi_register_part_t *t = param;
    avr_twi_msg_irq_t v;
    v.u.v = value;
    if (v.u.twi.msg & TWI_COND_STOP) {
        t->selected = 0;
    }
    if (v.u.twi.msg & TWI_COND_START) {
        t->selected = 0;
        if ((v.u.twi.addr >> 1) == t->addr) {
            t->selected = v.u.twi.addr;
            t->reading = v.u.twi.addr & 1u;
            t->index = 0;
            t->ops->update(t->part);
            if (t->reading) {
                uint16_t reg = t->ops->read(t->part, t->pointer);
                t->out[0] = (uint8_t)(reg >> 8);
                t->out[1] = (uint8_t)reg;
                t->reads++;
            }
            ack(t);
        }
        return;
    }
    if (!t->selected) {
        return;
    }
    if ((v.u.twi.msg & TWI_COND_WRITE) && !t->reading) {
        ack(t);
        if (t->index == 0) {
            t->pointer = v.u.twi.data;
        } else if (t->index == 1) {
            t->write_hi = v.u.twi.data;
        } else if (t->index == 2) {
            t->ops->write(t->part, t->pointer, (uint16_t)(t->write_hi << 8 | v.u.twi.data));
            t->writes++;
        }
        t->index++;
    }
    if ((v.u.twi.msg & TWI_COND_READ) && t->reading) {
        uint8_t byte = t->index < 2 ? t->out[t->index] : 0xFFu;
        t->index++;
        avr_raise_irq(t->irq + TWI_IRQ_INPUT,
                      avr_twi_irq_msg(TWI_COND_READ, t->selected, byte));
    }
}

void twi_register_part_init(twi_register_part_t *t, avr_t *avr, uint8_t addr,
                            const char *irq_names[2], const twi_register_ops_t *ops, void *part)
{
    *t = (twi_register_part_t){.avr = avr, .addr = addr, .ops = ops, .part = part};
    t->irq = avr_alloc_irq(&avr->irq_pool, 0, 2, irq_names);
    avr_irq_register_notify(t->irq + TWI_IRQ_OUTPUT, on_bus, t);
}

void twi_register_part_attach(twi_register_part_t *t)
{
    avr_connect_irq(t->irq + TWI_IRQ_INPUT,
                    avr_io_getirq(t->avr, AVR_IOCTL_TWI_GETIRQ(0), TWI_IRQ_INPUT));
    avr_connect_irq(avr_io_getirq(t->avr, AVR_IOCTL_TWI_GETIRQ(0), TWI_IRQ_OUTPUT),
                    t->irq + TWI_IRQ_OUTPUT);
}
