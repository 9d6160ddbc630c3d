/* The TI INA226 current/power monitor as the meter uses it (datasheet SBOS547A): registers,
 * its identity, the configuration the firmware writes for a sample rate, and the decoding of
 * the two registers it reads. It sits on the same I2C channels as the INA219 (bit 4 + n of the
 * I2C mask marks the chip at 0x40 + n as an INA226, PROTOCOL.md section 3) and is read the same
 * way (shunt 0x01, bus 0x02, raw on the wire); only its configuration and scales differ. */
#ifndef H2_INA226_H
#define H2_INA226_H

#include <stdint.h>

#define H2_INA226_REG_CONFIG 0x00u
#define H2_INA226_REG_SHUNT 0x01u  /* signed, 2.5 uV per LSB, +-81.92 mV */
#define H2_INA226_REG_BUS 0x02u    /* 1.25 mV per LSB, 0..40.96 V: bit 15 is always 0 */
#define H2_INA226_REG_POWER 0x03u
#define H2_INA226_REG_CURRENT 0x04u
#define H2_INA226_REG_CALIBRATION 0x05u
#define H2_INA226_REG_MASK_ENABLE 0x06u
#define H2_INA226_REG_MANUFACTURER 0xFEu
#define H2_INA226_REG_DIE 0xFFu

#define H2_INA226_MANUFACTURER_ID 0x5449u /* "TI" */
#define H2_INA226_DIE_ID 0x2260u
#define H2_INA226_CVRF 0x0008u /* mask/enable: a conversion (with its averaging) is ready */

/* Configuration: bits 14..12 read 100; AVG in 11..9, VBUSCT in 8..6, VSHCT in 5..3, MODE in
 * 2..0 (7: shunt then bus, continuous). */
#define H2_INA226_CONFIG_BASE 0x4007u
#define H2_INA226_CONFIG_RESET 0x8000u
#define H2_INA226_POWER_ON_CONFIG 0x4127u

/* What a sample carries for an INA226 that did not answer or failed its check at START: the
 * bus register never has bit 15 set, so 0xFFFF cannot be a reading (as for the INA219). */
#define H2_INA226_BUS_FAILED 0xFFFFu
#define H2_INA226_SHUNT_FAILED 0x0000u

/* Conversion time per setting (us) and samples averaged per setting. */
static inline uint16_t h2_ina226_conversion_us(uint8_t setting)
{
    static const uint16_t us[8] = {140u, 204u, 332u, 588u, 1100u, 2116u, 4156u, 8244u};
    return us[setting & 7u];
}

static inline uint16_t h2_ina226_averages(uint8_t setting)
{
    static const uint16_t n[8] = {1u, 4u, 16u, 64u, 128u, 256u, 512u, 1024u};
    return n[setting & 7u];
}

/* The time one result takes under a configuration (shunt + bus conversion, times averages). */
static inline uint32_t h2_ina226_result_us(uint16_t config)
{
    uint32_t pair = (uint32_t)h2_ina226_conversion_us((uint8_t)(config >> 6)) +
                    h2_ina226_conversion_us((uint8_t)(config >> 3));
    return pair * h2_ina226_averages((uint8_t)(config >> 9));
}

/* The configuration the firmware writes at START for a sample rate: the same conversion time
 * for shunt and bus, and the averaging and conversion time whose result takes the largest part
 * of the sample period without exceeding 90 % of it (the chip's time base is good to about
 * 10 %). Every sample then reads a fresh result that integrated as much of its period as the
 * chip allows, which keeps what the load does between samples in the figures. 0: even the
 * fastest (2 x 140 us) does not fit, the rate is too high for an INA226. */
static inline uint16_t h2_ina226_config_for_rate(uint32_t rate_hz)
{
    uint32_t budget_us = 900000u / rate_hz;
    uint32_t best_us = 0;
    uint16_t best = 0;
    for (uint8_t avg = 0; avg < 8u; avg++) {
        for (uint8_t ct = 0; ct < 8u; ct++) {
            uint32_t us = 2u * h2_ina226_conversion_us(ct) * (uint32_t)h2_ina226_averages(avg);
            if (us <= budget_us && us > best_us) {
                best_us = us;
                best = (uint16_t)(H2_INA226_CONFIG_BASE | (uint16_t)((unsigned)avg << 9) |
                                  (uint16_t)((unsigned)ct << 6) | (uint16_t)((unsigned)ct << 3));
            }
        }
    }
    return best;
}

/* Shunt register -> nanovolts (two's complement, 2.5 uV per LSB). */
static inline int32_t h2_ina226_shunt_nv(uint16_t reg)
{
    return (int32_t)(int16_t)reg * 2500;
}

/* Bus register -> microvolts (1.25 mV per LSB). */
static inline uint32_t h2_ina226_bus_uv(uint16_t reg)
{
    return (uint32_t)reg * 1250u;
}

/* Power in microwatts for a shunt of `shunt_mohm` milliohms: V_bus x V_shunt / R. */
static inline int32_t h2_ina226_power_uw(uint16_t shunt_reg, uint16_t bus_reg, uint16_t shunt_mohm)
{
    /* nV / mOhm = uA; uA x uV = pW. 64-bit: 81.92 mV / 1 mOhm x 40.96 V overflows 32 bits. */
    int64_t current_ua = (int64_t)h2_ina226_shunt_nv(shunt_reg) / shunt_mohm;
    return (int32_t)(current_ua * (int64_t)h2_ina226_bus_uv(bus_reg) / 1000000);
}

#endif
