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
    uint8_t channels[H2_CHANNELS_MAX];
    uint8_t oversampling;
    uint8_t samples_per_frame;
    uint8_t adc_prescaler; /* 128, 64 or 32 */

    volatile uint8_t state;

    /* written by the sample interrupts */
    volatile uint32_t samples_taken;
    volatile uint32_t samples_dropped;
    volatile uint8_t status_due;
    uint32_t status_taken; /* counters as they were when the periodic STATUS fell due */
    uint32_t status_dropped;
    volatile uint8_t adc_busy;
    uint32_t status_countdown;
    uint32_t adc_index;   /* index of the sample being converted */
    uint8_t adc_channel;  /* position in channels[] */
    uint8_t adc_reads;    /* reads of this channel so far (oversampling) */
    uint16_t adc_sum;
    uint16_t sample[H2_CHANNELS_MAX];

    /* batches: slots [slot_r, slot_w) are complete; the ISR fills slot_w when it is free */
    h2_batch_t slots[H2_SLOTS];
    volatile uint8_t slot_w;
    volatile uint8_t slot_r;
    uint8_t fill;
    uint8_t dropping;
    uint32_t batch_first;

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
/* Nonzero while h2_meter_poll has something it could do now (call with interrupts off before
 * sleeping: an interrupt that adds work wakes the CPU). */
uint8_t h2_meter_has_work(h2_meter_t *m);

/* Interrupt side. tick: the sample timer fired; returns the ADC input to convert first, or
 * H2_ADC_NONE when the previous sample is still converting (this sample is lost and counted).
 * adc: one conversion finished; returns the input to convert next or H2_ADC_NONE when the
 * sample is complete. marker: an edge on the marker pin (1 rising, 0 falling). */
uint8_t h2_meter_isr_tick(h2_meter_t *m);
uint8_t h2_meter_isr_adc(h2_meter_t *m, uint16_t value);
void h2_meter_isr_marker(h2_meter_t *m, uint8_t edge);
/* UART: a byte arrived / the transmitter wants the next byte (returns 0 when none). */
static inline void h2_meter_isr_rx(h2_meter_t *m, uint8_t byte)
{
    (void)h2_ring_isr_put(&m->rx, byte);
}
static inline uint8_t h2_meter_isr_tx(h2_meter_t *m, uint8_t *byte)
{
    return h2_ring_isr_get(&m->tx, byte);
}

/* Pure helpers (also used by the host tools and tests). */
uint8_t h2_adc_prescaler(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t reads_per_sample);
uint8_t h2_check_config(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t mask, uint8_t oversampling);
uint8_t h2_samples_per_frame(uint32_t rate_hz, uint8_t channel_count);
/* Sample timer: clock divider (1 or 8) and compare value for CTC mode. */
void h2_timer_config(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t *divider, uint16_t *ocr);

#ifdef __cplusplus
}
#endif

#endif
