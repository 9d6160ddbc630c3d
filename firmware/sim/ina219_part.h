/* A TI INA219 on simavr's TWI bus, for the firmware-in-the-loop harness. */
#ifndef INA219_PART_H
#define INA219_PART_H

#include <stdint.h>

#include "sim_avr.h"
#include "twi_register_part.h"

typedef struct {
    twi_register_part_t twi; /* the bus side: address, register pointer, access counts */
    uint16_t config, calibration;
    /* analog inputs, as set by the harness */
    int32_t shunt_uv;
    uint32_t bus_mv;
    /* results of the last completed conversion */
    uint16_t shunt_reg, bus_reg, current_reg, power_reg;
    uint8_t cnvr;
    avr_cycle_count_t next_conversion;
} ina219_part_t;

void ina219_part_init(avr_t *avr, ina219_part_t *p, uint8_t addr);
/* Connects it to TWI 0. */
void ina219_part_attach(ina219_part_t *p);
/* The analog inputs from now on: shunt voltage (uV, signed) and bus voltage (mV). */
void ina219_part_set(ina219_part_t *p, int32_t shunt_uv, uint32_t bus_mv);
/* Register decoding of a conversion, exposed for the harness's self-check. */
uint16_t ina219_shunt_register(int32_t shunt_uv, uint16_t config);
uint16_t ina219_bus_register(uint32_t bus_mv, uint8_t cnvr, uint8_t ovf);

#endif
