/* A TI INA226 (datasheet SBOS547A) on simavr's TWI bus: the register pointer, 16-bit
 * big-endian register reads and writes, its identity, and timed conversions in continuous
 * mode from the analog inputs the harness sets (shunt voltage, bus voltage). The bus side is
 * twi_register_part.c.
 *
 *   0x00 configuration  read/write; bit 15 (RST) resets every register; bits 14..12 read 100;
 *                       AVG 11..9 (1..1024), VBUSCT 8..6 and VSHCT 5..3 (140 us..8.244 ms),
 *                       MODE 2..0; power-on 0x4127
 *   0x01 shunt voltage  signed, 2.5 uV per LSB, saturating at +-81.92 mV
 *   0x02 bus voltage    1.25 mV per LSB, 0..40.96 V (bit 15 always 0)
 *   0x03 power          current x bus / 20000 (datasheet eq. 4), 0 while calibration is 0
 *   0x04 current        shunt x calibration / 2048 (eq. 3)
 *   0x05 calibration    read/write, bit 15 always 0
 *   0x06 mask/enable    alert bits read/write; bit 3 CVRF (a result is ready: set when an
 *                       averaging block completes, cleared by reading 0x06 or writing 0x00),
 *                       bit 2 OVF (the power or current arithmetic overflowed)
 *   0x07 alert limit    read/write
 *   0xFE manufacturer   0x5449 ("TI")
 *   0xFF die id         0x2260
 *
 * Conversions are timed as on the chip: in continuous mode a shunt conversion of VSHCT, then
 * a bus conversion of VBUSCT, repeated; each integrates its input over its own interval (the
 * inputs are piecewise constant, changed only by ina226_part_set, so the integral is exact),
 * and after AVG conversions the registers take their mean, rounded to the LSB, and CVRF is
 * set. The part catches up lazily, when the master addresses it or the inputs change, so it
 * costs nothing while idle. Writing the configuration restarts conversion. Modes other than
 * continuous shunt and bus (7) are not modelled: 0 and 4 (power-down) stop conversions, the
 * others run as 7. */
#include "ina226_part.h"

#include <math.h>
#include <stdlib.h>

#include "sim_time.h"

#define POWER_ON_CONFIG 0x4127u
#define MANUFACTURER_ID 0x5449u
#define DIE_ID 0x2260u
#define CVRF 0x0008u
#define OVF 0x0004u
#define ALERT_BITS 0xFC03u /* mask/enable bits the master may write */

static const char *irq_names[2] = {"8<ina226.in", "32>ina226.out"};

static uint32_t conversion_us(uint8_t setting)
{
    static const uint32_t us[8] = {140u, 204u, 332u, 588u, 1100u, 2116u, 4156u, 8244u};
    return us[setting & 7u];
}

static uint16_t averages(uint8_t setting)
{
    static const uint16_t n[8] = {1u, 4u, 16u, 64u, 128u, 256u, 512u, 1024u};
    return n[setting & 7u];
}

static avr_cycle_count_t shunt_cycles(const ina226_part_t *p)
{
    return avr_usec_to_cycles(p->twi.avr, conversion_us((uint8_t)(p->config >> 3)));
}

static avr_cycle_count_t bus_cycles(const ina226_part_t *p)
{
    return avr_usec_to_cycles(p->twi.avr, conversion_us((uint8_t)(p->config >> 6)));
}

static int converting(const ina226_part_t *p)
{
    return (p->config & 3u) != 0u; /* modes 0 and 4: power-down */
}

uint16_t ina226_shunt_register(double shunt_uv)
{
    double counts = nearbyint(shunt_uv / 2.5);
    if (counts > 32767.0) {
        counts = 32767.0;
    } else if (counts < -32768.0) {
        counts = -32768.0;
    }
    return (uint16_t)(int16_t)counts;
}

uint16_t ina226_bus_register(double bus_mv)
{
    double counts = nearbyint(bus_mv / 1.25);
    if (counts < 0.0) {
        counts = 0.0;
    } else if (counts > 32767.0) {
        counts = 32767.0;
    }
    return (uint16_t)counts;
}

/* A block of AVG conversions is done: the registers take their means. */
static void publish(ina226_part_t *p, double shunt_uv, double bus_mv)
{
    p->shunt_reg = ina226_shunt_register(shunt_uv);
    p->bus_reg = ina226_bus_register(bus_mv);
    int64_t current = (int64_t)(int16_t)p->shunt_reg * (int64_t)p->calibration / 2048;
    p->ovf = current > 32767 || current < -32768;
    if (p->ovf) {
        current = current > 0 ? 32767 : -32768;
    }
    p->current_reg = (uint16_t)(int16_t)current;
    int64_t power = (current < 0 ? -current : current) * (int64_t)p->bus_reg / 20000;
    p->power_reg = (uint16_t)(power > 0xFFFF ? 0xFFFF : power);
    p->cvrf = 1;
    p->results++;
}

/* Integrates the (constant) inputs from integrated_to up to `to`, completing conversions and
 * blocks on the way. */
static void advance(ina226_part_t *p, avr_cycle_count_t to)
{
    if (!converting(p)) {
        p->integrated_to = p->cycle_start = to;
        return;
    }
    avr_cycle_count_t sh = shunt_cycles(p), bus = bus_cycles(p);
    uint16_t avg = averages((uint8_t)(p->config >> 9));
    avr_cycle_count_t block = (sh + bus) * avg;
    /* Idle for more than two whole blocks at constant inputs: skip to the last one, whose
     * result is the inputs themselves. */
    if (p->done == 0 && p->integrated_to == p->cycle_start && to > p->cycle_start + 2 * block) {
        avr_cycle_count_t skip = (to - p->cycle_start) / block - 1;
        p->cycle_start += skip * block;
        p->integrated_to = p->cycle_start;
        p->results += skip - 1; /* the skipped blocks, the last of them published here */
        publish(p, p->shunt_uv, p->bus_mv);
    }
    while (p->integrated_to < to) {
        avr_cycle_count_t shunt_end = p->cycle_start + sh, bus_end = shunt_end + bus;
        if (p->integrated_to < shunt_end) {
            avr_cycle_count_t end = to < shunt_end ? to : shunt_end;
            p->shunt_acc += p->shunt_uv * (double)(end - p->integrated_to);
            p->integrated_to = end;
            continue;
        }
        avr_cycle_count_t end = to < bus_end ? to : bus_end;
        p->bus_acc += p->bus_mv * (double)(end - p->integrated_to);
        p->integrated_to = end;
        if (end < bus_end) {
            break;
        }
        p->shunt_sum += p->shunt_acc / (double)sh;
        p->bus_sum += p->bus_acc / (double)bus;
        p->shunt_acc = p->bus_acc = 0.0;
        p->cycle_start = bus_end;
        if (++p->done == avg) {
            publish(p, p->shunt_sum / avg, p->bus_sum / avg);
            p->done = 0;
            p->shunt_sum = p->bus_sum = 0.0;
        }
    }
}

/* A new configuration (or reset): the conversion under way is abandoned, a new one starts. */
static void restart(ina226_part_t *p)
{
    p->cycle_start = p->integrated_to = p->twi.avr->cycle;
    p->shunt_acc = p->bus_acc = p->shunt_sum = p->bus_sum = 0.0;
    p->done = 0;
    p->cvrf = 0;
}

static void reset_registers(ina226_part_t *p)
{
    p->config = POWER_ON_CONFIG;
    p->calibration = p->mask_enable = p->alert_limit = 0;
    p->shunt_reg = p->bus_reg = p->current_reg = p->power_reg = 0;
    p->ovf = 0;
    restart(p);
}

static uint16_t read_register(void *part, uint8_t reg)
{
    ina226_part_t *p = part;
    switch (reg) {
    case 0x00:
        return p->config;
    case 0x01:
        return p->shunt_reg;
    case 0x02:
        return p->bus_reg;
    case 0x03:
        return p->power_reg;
    case 0x04:
        return p->current_reg;
    case 0x05:
        return p->calibration;
    case 0x06: {
        uint16_t value = (uint16_t)(p->mask_enable | (p->cvrf ? CVRF : 0u) | (p->ovf ? OVF : 0u));
        p->cvrf = 0; /* reading mask/enable clears the conversion-ready flag */
        return value;
    }
    case 0x07:
        return p->alert_limit;
    case 0xFE:
        return MANUFACTURER_ID;
    case 0xFF:
        return DIE_ID;
    default:
        return 0;
    }
}

static void write_register(void *part, uint8_t reg, uint16_t value)
{
    ina226_part_t *p = part;
    switch (reg) {
    case 0x00:
        if (value & 0x8000u) {
            reset_registers(p);
            return;
        }
        p->config = (uint16_t)((value & 0x0FFFu) | 0x4000u);
        restart(p);
        break;
    case 0x05:
        p->calibration = (uint16_t)(value & 0x7FFFu);
        break;
    case 0x06:
        p->mask_enable = (uint16_t)(value & ALERT_BITS);
        break;
    case 0x07:
        p->alert_limit = value;
        break;
    default:
        break; /* read-only */
    }
}

/* The master addresses the part: what converted so far is done. */
static void catch_up(void *part)
{
    ina226_part_t *p = part;
    advance(p, p->twi.avr->cycle);
}

static const twi_register_ops_t ops = {.update = catch_up, .read = read_register,
                                      .write = write_register};

void ina226_part_init(avr_t *avr, ina226_part_t *p, uint8_t addr)
{
    *p = (ina226_part_t){0};
    twi_register_part_init(&p->twi, avr, addr, irq_names, &ops, p);
    reset_registers(p);
}

void ina226_part_attach(ina226_part_t *p)
{
    twi_register_part_attach(&p->twi);
}

void ina226_part_set(ina226_part_t *p, double shunt_uv, double bus_mv)
{
    advance(p, p->twi.avr->cycle); /* what converted so far saw the old inputs */
    p->shunt_uv = shunt_uv;
    p->bus_mv = bus_mv;
}
