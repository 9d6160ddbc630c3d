/* The TWI plumbing of a register-file part on simavr's bus (the INA219 and INA226 models):
 * its address, the register pointer, 16-bit big-endian register reads and writes, and the
 * IRQ wiring to TWI 0. The part itself supplies what its registers hold. */
#ifndef TWI_REGISTER_PART_H
#define TWI_REGISTER_PART_H

#include <stdint.h>

#include "sim_avr.h"
#include "sim_irq.h"

typedef struct {
    /* Brings the part up to date with simulated time; called when the master addresses it. */
    void (*update)(void *part);
    /* A register's value, as the master reads it (may have side effects: flags it clears). */
    uint16_t (*read)(void *part, uint8_t reg);
    /* The master wrote a register. */
    void (*write)(void *part, uint8_t reg, uint16_t value);
} twi_register_ops_t;

typedef struct {
    avr_t *avr;
    avr_irq_t *irq; /* TWI_IRQ_INPUT / TWI_IRQ_OUTPUT, as simavr's i2c_eeprom part */
    uint8_t addr;   /* 7-bit */
    uint8_t selected, reading, index, pointer;
    uint8_t write_hi;
    uint8_t out[2];
    uint64_t reads, writes; /* register accesses, for the summary */
    const twi_register_ops_t *ops;
    void *part;
} twi_register_part_t;

/* Sets up the bus side of `part` (irq_names: simavr's names of its two IRQs). */
void twi_register_part_init(twi_register_part_t *t, avr_t *avr, uint8_t addr,
                            const char *irq_names[2], const twi_register_ops_t *ops, void *part);
/* Connects it to TWI 0. */
void twi_register_part_attach(twi_register_part_t *t);

#endif
