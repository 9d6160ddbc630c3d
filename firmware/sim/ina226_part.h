/* A TI INA226 on simavr's TWI bus, for the firmware-in-the-loop harness. */
#ifndef INA226_PART_H
#define INA226_PART_H

#include <stdint.h>

#include "sim_avr.h"
#include "twi_register_part.h"

typedef struct {
    twi_register_part_t twi; /* the bus side: address, register pointer, access counts */
    uint16_t config, calibration, mask_enable, alert_limit;
    /* analog inputs, as set by the harness (held between changes) */
    double shunt_uv, bus_mv;
    /* the conversion under way: cycle its shunt phase began, cycle the inputs are integrated
     * up to, and the integrals (input x cycles) of its two phases so far */
    avr_cycle_count_t cycle_start, integrated_to;
    double shunt_acc, bus_acc;
    /* the averaging block under way: conversions done and their mean inputs summed */
    uint16_t done;
    double shunt_sum, bus_sum;
    /* results of the last completed block */
    uint16_t shunt_reg, bus_reg, current_reg, power_reg;
    uint8_t cvrf, ovf;
    uint64_t results; /* completed blocks, for the summary */
} ina226_part_t;

void ina226_part_init(avr_t *avr, ina226_part_t *p, uint8_t addr);
/* Connects it to TWI 0. */
void ina226_part_attach(ina226_part_t *p);
/* The analog inputs from now on: shunt voltage (uV, signed) and bus voltage (mV). */
void ina226_part_set(ina226_part_t *p, double shunt_uv, double bus_mv);
/* Register encoding of a conversion result, exposed for the harness's self-check. */
uint16_t ina226_shunt_register(double shunt_uv);
uint16_t ina226_bus_register(double bus_mv);

#endif
