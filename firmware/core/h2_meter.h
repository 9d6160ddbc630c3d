/* The meter's device logic without hardware: command handling, sample batching, drop
 * accounting, markers and the outgoing frame queue. The sketch calls the h2_meter_isr_*
 * functions from its interrupt handlers and h2_meter_poll from its main loop; host tests drive
 * the same functions directly. */
#ifndef H2_METER_H
#define H2_METER_H

#include <stdint.h>

#include "h2_frame.h"
#include "h2_protocol.h"
#include "h2_ring.h"

/* Per-board sizes (RAM): values per SAMPLES frame, batch slots, ring sizes. */
#if defined(__AVR_ATmega328P__)
#define H2_VALUES_MAX 64u
#define H2_SLOTS 2u
#define H2_TX_SIZE 512u
#else
#define H2_VALUES_MAX 128u
#define H2_SLOTS 4u
#define H2_TX_SIZE 2048u
#endif
#define H2_RX_SIZE 64u
#define H2_CMD_PAYLOAD_MAX 16u
#define H2_MARKERS 16u

/* Room the sample stream leaves in the TX ring for ACK, INFO, STATUS and MARKER frames. */
#define H2_TX_RESERVE 64u

#define H2_ADC_NONE 0xFFu
/* ADC timing budget (CPU cycles), measured in simavr with --profile: each read costs its
 * conversion plus about this much interrupt latency before the next starts, and a sample
 * has this much fixed latency (timer interrupt, a UART interrupt in the way). */
#define H2_ADC_READ_CYCLES 64u
#define H2_ADC_FIXED_CYCLES 256u
/* Reading one INA219 or INA226 (two register reads at 400 kHz from the main loop, with the pointer
 * writes): CPU cycles a sample must leave for it. */
#define H2_I2C_SENSOR_CYCLES 4800u

typedef struct {
    uint8_t mcu_id;
    uint32_t f_cpu_hz;
    uint16_t adc_ref_mv;
    uint32_t baud;
    uint8_t marker_pin;
    const char *name; /* at most H2_BOARD_NAME_MAX bytes are sent */
    uint8_t fw_major, fw_minor, fw_patch;
} h2_board_t;

typedef struct h2_meter h2_meter_t;

/* Hardware actions. start: program the sample timer for m->rate_hz and the ADC clock for
 * m->adc_prescaler, then enable the timer interrupt. stop: disable the timer interrupt. */
typedef struct {
    void (*start)(h2_meter_t *m);
    void (*stop)(h2_meter_t *m);
    /* Read the shunt (0x01) and bus (0x02) registers of the INA219 or INA226 at `addr` (main
     * loop, may block for the transfer). Returns 0 on success; nonzero: the sensor did not answer. May
     * be NULL when no I2C channel is ever enabled. */
    uint8_t (*read_ina219)(h2_meter_t *m, uint8_t addr, uint16_t *shunt, uint16_t *bus);
} h2_hooks_t;

typedef struct {
    uint32_t first_index;
    uint8_t count;
    uint16_t values[H2_VALUES_MAX];
} h2_batch_t;

typedef struct {
    uint32_t index;
    uint8_t edge;
} h2_marker_t;

enum { H2_IDLE = 0, H2_RUNNING = 1, H2_DRAINING = 2, H2_FLUSHING = 3 };

struct h2_meter {
    const h2_board_t *board;
    const h2_hooks_t *hooks;

    /* configuration (changed only while idle) */
    uint32_t rate_hz;
    uint8_t channel_mask;
    uint8_t channel_count;
    uint8_t channels[H2_CHANNELS_MAX]; /* analog inputs, ascending */
    uint8_t i2c_mask; /* bit n: the chip at 0x40 + n; bit 4 + n: it is an INA226 (H2_I2C_CHIPS) */
    uint8_t i2c_count;
    uint8_t i2c_addrs[H2_I2C_CHANNELS];
    uint8_t columns; /* values per sample: channel_count + 2 x i2c_count */
    uint8_t oversampling;
    uint8_t oversampling_shift; /* log2(oversampling) when it is a power of two, else 0xFF */
    uint8_t samples_per_frame;
    uint8_t adc_prescaler; /* 128, 64 or 32 */

    volatile uint8_t state;

    /* written by the sample interrupts */
    volatile uint32_t samples_taken;
    volatile uint32_t samples_dropped;
    volatile uint8_t status_due;
    uint32_t status_taken; /* counters as they were when the periodic STATUS fell due */
    uint32_t status_dropped;
    uint16_t status_countdown;
    volatile uint8_t adc_busy; /* a sample is being taken: ADC reads, then I2C reads */
    volatile uint8_t i2c_due;  /* its ADC reads are done, the main loop reads the INA219s */
    uint8_t adc_channel;   /* position in channels[] of the read under way */
    uint8_t adc_reads;     /* reads of that channel so far (oversampling) */
    uint16_t *dst;         /* where the current sample's values (sums of reads) go */
    uint16_t scratch[H2_COLUMNS_MAX]; /* ... when its batch is being dropped */

    /* batches: slots [slot_r, slot_w) are complete; the ISR fills slot_w when it is free.
     * Values are sums of `oversampling` reads; the main loop turns them into means. */
    h2_batch_t slots[H2_SLOTS];
    volatile uint8_t slot_w;
    volatile uint8_t slot_r;
    uint8_t fill;         /* samples in the batch being filled */
    uint8_t dropping;     /* that batch is counted, not kept */
    uint8_t batch_broken; /* a sample was lost since: start a new batch */

    /* markers: ISR writes marker_w, main loop advances marker_r */
    h2_marker_t markers[H2_MARKERS];
    volatile uint8_t marker_w;
    volatile uint8_t marker_r;

    /* outgoing and incoming bytes */
    h2_ring_t tx;
    h2_ring_t rx;
    uint8_t tx_buf[H2_TX_SIZE];
    uint8_t rx_buf[H2_RX_SIZE];
    h2_parser_t parser;
    uint8_t parser_buf[H2_OVERHEAD + H2_CMD_PAYLOAD_MAX];
    uint8_t parse_pending; /* the parser window may still hold a whole command */

    /* Waking the main loop: interrupts set `events` when they create work; `need_room` is the
     * TX room the first piece of work that poll() had to leave needs (0: none waits). */
    volatile uint8_t events;
    uint16_t need_room;

    uint32_t frames_sent;
    uint16_t commands_rejected; /* non-zero ACKs; parser discards are added when reported */
};

#ifdef __cplusplus
extern "C" {
#endif

void h2_meter_init(h2_meter_t *m, const h2_board_t *board, const h2_hooks_t *hooks);

/* Main loop: moves received bytes through the command parser and queues outgoing frames as
 * room allows. Returns the number of frames queued plus commands handled (0 = no progress). */
uint8_t h2_meter_poll(h2_meter_t *m);
/* Nonzero when h2_meter_poll has something it could do now. Cheap, for the idle loop: call it
 * with interrupts off and sleep when it returns 0 (an interrupt that adds work, or the UART
 * making room, wakes the CPU and the loop asks again). */
uint8_t h2_meter_has_work(h2_meter_t *m);

/* Interrupt side, in the order the sketch's handlers call them. Each handler starts the next
 * conversion first and does the bookkeeping while it runs, so the per-sample chain of
 * conversions is not stretched by the bookkeeping.
 *   sample timer:  mux = h2_meter_isr_first_input(); start mux unless H2_ADC_NONE (the previous
 *                  sample is still converting: this one is lost and counted); h2_meter_isr_tick()
 *   ADC complete:  mux = h2_meter_isr_next_input(); start mux unless H2_ADC_NONE (that was the
 *                  sample's last read); h2_meter_isr_adc(value)
 *   marker pin:    h2_meter_isr_marker(level after the edge: 1 rising, 0 falling) */
static inline uint8_t h2_meter_isr_first_input(const h2_meter_t *m)
{
    return m->adc_busy || m->channel_count == 0u ? H2_ADC_NONE : m->channels[0];
}
void h2_meter_isr_tick(h2_meter_t *m);
uint8_t h2_meter_isr_next_input(const h2_meter_t *m);
void h2_meter_isr_adc(h2_meter_t *m, uint16_t value);
void h2_meter_isr_marker(h2_meter_t *m, uint8_t edge);
/* UART: a byte arrived / the transmitter wants the next byte (returns 0 when none). */
static inline void h2_meter_isr_rx(h2_meter_t *m, uint8_t byte)
{
    (void)h2_ring_isr_put(&m->rx, byte);
    m->events = 1;
}
static inline uint8_t h2_meter_isr_tx(h2_meter_t *m, uint8_t *byte)
{
    return h2_ring_isr_get(&m->tx, byte);
}

/* Pure helpers (also used by the host tools and tests). */
/* The ADC clock prescaler for `reads_per_sample` reads plus `i2c_sensors` INA219 reads per
 * sample (0: none fits); h2_adc_prescaler is the analog-only case. */
uint8_t h2_sample_prescaler(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t reads_per_sample,
                            uint8_t i2c_sensors);
uint8_t h2_adc_prescaler(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t reads_per_sample);
/* A configuration's ACK result; h2_check_config is the analog-only case (no INA219). */
uint8_t h2_check_channels(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t mask, uint8_t oversampling,
                          uint8_t i2c_mask);
uint8_t h2_check_config(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t mask, uint8_t oversampling);
uint8_t h2_samples_per_frame(uint32_t rate_hz, uint8_t columns);
/* Sample timer: clock divider (1 or 8) and compare value for CTC mode. */
void h2_timer_config(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t *divider, uint16_t *ocr);

#ifdef __cplusplus
}
#endif

#endif
