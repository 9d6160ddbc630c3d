/* The TI INA219 current/power monitor as the meter uses it (datasheet SBOS448G): registers,
 * the configuration the firmware writes, and the decoding of the two registers it reads. The
 * firmware sends the raw registers; hosts decode them the same way (PROTOCOL.md, section 3). */
#ifndef H2_INA219_H
#define H2_INA219_H

#include <stdint.h>

#define H2_INA219_ADDR_BASE 0x40u /* A1 = A0 = GND; bit n of the I2C mask = address 0x40 + n */

#define H2_INA219_REG_CONFIG 0x00u
#define H2_INA219_REG_SHUNT 0x01u  /* signed, 10 uV per LSB at every PGA setting */
#define H2_INA219_REG_BUS 0x02u    /* bits 15..3: 4 mV per LSB; bit 1 CNVR, bit 0 OVF */
#define H2_INA219_REG_POWER 0x03u
#define H2_INA219_REG_CURRENT 0x04u
#define H2_INA219_REG_CALIBRATION 0x05u

/* Written at START: BRNG = 0 (16 V bus range: the node's 5 V), PGA = /8 (+-320 mV shunt),
 * BADC = SADC = 12 bit (532 us each), mode 7 (shunt then bus, continuous): a new pair of
 * values every 1064 us. */
#define H2_INA219_CONFIG 0x199Fu
#define H2_INA219_CONVERSION_US 1064u

#define H2_INA219_BUS_CNVR 0x0002u
#define H2_INA219_BUS_OVF 0x0001u
/* What a sample carries for an INA219 that did not answer on the bus: bus register values
 * above 0x7D00 (16 V) are impossible in the 16 V range. */
#define H2_INA219_BUS_FAILED 0xFFFFu
#define H2_INA219_SHUNT_FAILED 0x0000u

/* Shunt register -> microvolts (two's complement, 10 uV per LSB). */
static inline int32_t h2_ina219_shunt_uv(uint16_t reg)
{
    return (int32_t)(int16_t)reg * 10;
}

/* Bus register -> millivolts (bits 15..3, 4 mV per LSB). */
static inline uint16_t h2_ina219_bus_mv(uint16_t reg)
{
    return (uint16_t)((reg >> 3) * 4u);
}

/* Power in microwatts for a shunt of `shunt_mohm` milliohms: V_bus x V_shunt / R. */
static inline int32_t h2_ina219_power_uw(uint16_t shunt_reg, uint16_t bus_reg, uint16_t shunt_mohm)
{
    /* uV / mOhm = mA; mA x mV = uW. 64-bit: 32767 x 10 uV x 65532 mV overflows 32 bits. */
    int64_t current_ma_x1000 = (int64_t)h2_ina219_shunt_uv(shunt_reg) * 1000 / shunt_mohm;
    return (int32_t)(current_ma_x1000 * h2_ina219_bus_mv(bus_reg) / 1000);
}

#endif
