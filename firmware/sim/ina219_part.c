/* A TI INA219 (datasheet SBOS448G) on simavr's TWI bus: the register pointer, 16-bit
 * big-endian register reads and writes, and conversions in continuous mode computed from the
 * analog inputs the harness sets (shunt voltage, bus voltage). The bus side is
 * twi_register_part.c.
 *
 *   0x00 configuration  read/write; bit 15 (RST) resets every register; power-on 0x399F
 *   0x01 shunt voltage  signed, 10 uV per LSB, saturating at the PGA range (40 mV << PG)
 *   0x02 bus voltage    bits 15..3: 4 mV per LSB; bit 1 CNVR (a conversion completed since
 *                       the power register was last read), bit 0 OVF (shunt out of range)
 *   0x03 power          current x bus / 5000 (datasheet eq. 5), 0 while calibration is 0
 *   0x04 current        shunt x calibration / 4096 (eq. 4)
 *   0x05 calibration    read/write, bit 0 always 0
 *
 * A conversion completes every (shunt + bus ADC time) of simulated time in the continuous
 * modes (5..7): 1064 us at the 12-bit settings. Its results are taken from the inputs as they
 * are when it completes (the real chip averages over the conversion: with inputs that change
 * at most once per sample this differs by at most one conversion's lag). The part updates
 * lazily when the master addresses it, so it costs nothing while idle. Other modes (power
 * down, triggered) are not modelled: conversions run whenever the mode is not 0. */
#include "ina219_part.h"

#include <stdlib.h>

#include "sim_time.h"

#define POWER_ON_CONFIG 0x399Fu

static const char *irq_names[2] = {"8<ina219.in", "32>ina219.out"};

static uint32_t adc_time_us(uint8_t setting)
{
    static const uint32_t basic[4] = {84u, 148u, 276u, 532u};
    if (setting & 0x8u) {
        return 532u << (setting & 0x7u); /* 1..128 samples averaged */
    }
    return basic[setting & 0x3u];
}

static avr_cycle_count_t conversion_cycles(const ina219_part_t *p)
{
    uint32_t us = adc_time_us((uint8_t)(p->config >> 7 & 0xFu)) +
                  adc_time_us((uint8_t)(p->config >> 3 & 0xFu));
    return avr_usec_to_cycles(p->twi.avr, us);
}

uint16_t ina219_shunt_register(int32_t shunt_uv, uint16_t config)
{
    int32_t limit = 4000 << (config >> 11 & 0x3u); /* PGA /1../8: 40..320 mV in 10 uV */
    int32_t counts = shunt_uv >= 0 ? (shunt_uv + 5) / 10 : -((-shunt_uv + 5) / 10);
    if (counts > limit) {
        counts = limit;
    } else if (counts < -limit) {
        counts = -limit;
    }
    return (uint16_t)(int16_t)counts;
}

uint16_t ina219_bus_register(uint32_t bus_mv, uint8_t cnvr, uint8_t ovf)
{
    uint32_t counts = (bus_mv + 2u) / 4u;
    if (counts > 0x1FFFu) {
        counts = 0x1FFFu;
    }
    return (uint16_t)(counts << 3 | (cnvr ? 2u : 0u) | (ovf ? 1u : 0u));
}

static void convert(ina219_part_t *p)
{
    int32_t limit_uv = 40000 << (p->config >> 11 & 0x3u);
    uint8_t ovf = p->shunt_uv > limit_uv || p->shunt_uv < -limit_uv;
    p->shunt_reg = ina219_shunt_register(p->shunt_uv, p->config);
    p->cnvr = 1;
    p->bus_reg = ina219_bus_register(p->bus_mv, 1, ovf);
    int32_t current = (int32_t)(int16_t)p->shunt_reg * (int32_t)p->calibration / 4096;
    p->current_reg = (uint16_t)(int16_t)current;
    int64_t power = (int64_t)(current < 0 ? -current : current) * (p->bus_reg >> 3) / 5000;
    p->power_reg = (uint16_t)(power > 0xFFFF ? 0xFFFF : power);
}

static void update(void *part)
{
    ina219_part_t *p = part;
    if ((p->config & 0x7u) == 0u) {
        return; /* power-down */
    }
    avr_cycle_count_t now = p->twi.avr->cycle;
    if (now < p->next_conversion) {
        return;
    }
    avr_cycle_count_t period = conversion_cycles(p);
    convert(p);
    p->next_conversion += ((now - p->next_conversion) / period + 1u) * period;
}

static void reset_registers(ina219_part_t *p)
{
    p->config = POWER_ON_CONFIG;
    p->calibration = 0;
    p->shunt_reg = p->bus_reg = p->current_reg = p->power_reg = 0;
    p->cnvr = 0;
    p->next_conversion = p->twi.avr->cycle + conversion_cycles(p);
}

static uint16_t read_register(void *part, uint8_t reg)
{
    ina219_part_t *p = part;
    switch (reg) {
    case 0x00:
        return p->config;
    case 0x01:
        return p->shunt_reg;
    case 0x02:
        return (uint16_t)((p->bus_reg & ~2u) | (p->cnvr ? 2u : 0u));
    case 0x03:
        p->cnvr = 0; /* reading the power register clears CNVR */
        return p->power_reg;
    case 0x04:
        return p->current_reg;
    case 0x05:
        return p->calibration;
    default:
        return 0;
    }
}

static void write_register(void *part, uint8_t reg, uint16_t value)
{
    ina219_part_t *p = part;
    if (reg == 0x00) {
        if (value & 0x8000u) {
            reset_registers(p);
            return;
        }
        p->config = value;
        p->cnvr = 0;
        p->next_conversion = p->twi.avr->cycle + conversion_cycles(p);
    } else if (reg == 0x05) {
        p->calibration = (uint16_t)(value & 0xFFFEu);
    }
}

static const twi_register_ops_t ops = {.update = update, .read = read_register,
                                      .write = write_register};

void ina219_part_init(avr_t *avr, ina219_part_t *p, uint8_t addr)
{
    *p = (ina219_part_t){0};
    twi_register_part_init(&p->twi, avr, addr, irq_names, &ops, p);
    reset_registers(p);
}

void ina219_part_attach(ina219_part_t *p)
{
    twi_register_part_attach(&p->twi);
}

void ina219_part_set(ina219_part_t *p, int32_t shunt_uv, uint32_t bus_mv)
{
    p->shunt_uv = shunt_uv;
    p->bus_mv = bus_mv;
}
