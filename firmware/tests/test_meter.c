#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "h2_ina219.h"
#include "h2_ina226.h"
#include "h2_meter.h"
#include "vectors.h"

/* ---- a host-side stand-in for the hardware and the host ---------------------------------- */

static int starts, stops;
static void hw_start(h2_meter_t *m)
{
    (void)m;
    starts++;
}
static void hw_stop(h2_meter_t *m)
{
    (void)m;
    stops++;
}
/* A stand-in INA219 bus: each address answers with the next pair of ina_regs (shunt, bus);
 * address 0x43 never answers. */
static uint16_t ina_regs[64];
static int ina_next, ina_reads;
static uint8_t ina_last_addr;
static uint8_t hw_read_ina219(h2_meter_t *m, uint8_t addr, uint16_t *shunt, uint16_t *bus)
{
    (void)m;
    ina_reads++;
    ina_last_addr = addr;
    if (addr == 0x43u) {
        return 1;
    }
    *shunt = ina_regs[ina_next++ % 64];
    *bus = ina_regs[ina_next++ % 64];
    return 0;
}
static const h2_hooks_t hooks = {hw_start, hw_stop, hw_read_ina219};
static const h2_board_t mega = {H2_MCU_ATMEGA2560, 16000000u, 5000u, 500000u, 2u, "mega2560",
                                1u, 0u, 0u};

typedef struct {
    uint8_t type;
    uint16_t seq;
    uint16_t len;
    uint8_t payload[H2_MAX_PAYLOAD];
    uint8_t raw[H2_OVERHEAD + H2_MAX_PAYLOAD];
} frame_t;

#define MAX_FRAMES 4096
static frame_t frames[MAX_FRAMES];
static int nframes;
static h2_parser_t host;
static uint8_t host_window[H2_OVERHEAD + H2_MAX_PAYLOAD];
static uint16_t host_next_seq;
static int host_seq_gaps;

static void reset_host(void)
{
    nframes = 0;
    host_seq_gaps = 0;
    h2_parser_init(&host, host_window, sizeof host_window);
}

/* Moves everything the device queued through a host-side parser into frames[]. */
static void drain(h2_meter_t *m)
{
    uint8_t b;
    h2_frame_t f;
    for (;;) {
        while (h2_meter_isr_tx(m, &b)) {
            h2_parser_feed(&host, b);
            while (h2_parser_next(&host, &f)) {
                if (nframes && f.seq != host_next_seq) {
                    host_seq_gaps++;
                }
                host_next_seq = (uint16_t)(f.seq + 1u);
                if (nframes < MAX_FRAMES) {
                    frame_t *o = &frames[nframes];
                    o->type = f.type;
                    o->seq = f.seq;
                    o->len = f.len;
                    memcpy(o->payload, f.payload, f.len);
                    h2_frame_encode(o->raw, f.type, f.seq, f.payload, f.len);
                }
                nframes++;
            }
        }
        if (!h2_meter_poll(m)) {
            return;
        }
    }
}

static void command(h2_meter_t *m, uint8_t type, uint16_t seq, const uint8_t *payload, uint16_t len)
{
    uint8_t raw[64];
    uint16_t n = h2_frame_encode(raw, type, seq, payload, len);
    /* Like a host, one command at a time: the device buffers only H2_RX_SIZE bytes. */
    for (uint16_t i = 0; i < n; i++) {
        h2_meter_isr_rx(m, raw[i]);
    }
    h2_meter_poll(m);
}

static void command_u32(h2_meter_t *m, uint8_t type, uint16_t seq, uint32_t v)
{
    uint8_t p[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    command(m, type, seq, p, 4);
}

static void command_u8(h2_meter_t *m, uint8_t type, uint16_t seq, uint8_t v)
{
    command(m, type, seq, &v, 1);
}

static uint8_t ack_result(const frame_t *f, uint8_t type, uint16_t seq)
{
    CHECK_EQ(f->type, H2_T_ACK);
    CHECK_EQ(f->len, 4);
    CHECK_EQ(f->payload[0], type);
    CHECK_EQ(h2_get_u16(f->payload + 1), seq);
    return f->payload[3];
}

/* The value an input pin reads for sample `index` in these tests. */
static uint16_t wave(uint32_t index, uint8_t channel)
{
    return (uint16_t)((index * 7u + channel * 300u) % 1024u);
}

/* The sketch's sample-timer and ADC interrupt bodies: each returns the input whose conversion
 * the handler starts, or H2_ADC_NONE. */
static uint8_t tick(h2_meter_t *m)
{
    uint8_t mux = h2_meter_isr_first_input(m);
    h2_meter_isr_tick(m);
    return mux;
}

static uint8_t adc(h2_meter_t *m, uint16_t value)
{
    uint8_t mux = h2_meter_isr_next_input(m);
    h2_meter_isr_adc(m, value);
    return mux;
}

/* One timer tick and the conversions it starts. */
static void sample_once(h2_meter_t *m)
{
    uint32_t index = m->samples_taken;
    uint8_t mux = tick(m);
    while (mux != H2_ADC_NONE) {
        mux = adc(m, wave(index, mux));
    }
}

static h2_meter_t *new_meter(void)
{
    static h2_meter_t m;
    h2_meter_init(&m, &mega, &hooks);
    starts = stops = 0;
    reset_host();
    return &m;
}

static void check_frame_equals_vector(const frame_t *f, const vector_t *v)
{
    CHECK_EQ(f->type, v->type);
    CHECK_EQ(f->seq, v->seq);
    CHECK_EQ(H2_OVERHEAD + f->len, v->frame_len);
    CHECK(memcmp(f->raw, v->frame, (size_t)v->frame_len) == 0);
    if (memcmp(f->raw, v->frame, (size_t)v->frame_len) != 0) {
        fprintf(stderr, "  device frame differs from vector %s\n", v->name);
    }
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_pure_helpers(void)
{
    uint32_t f = 16000000u;
    CHECK_EQ(h2_check_config(f, 1000, 0x03, 1), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 99, 0x03, 1), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 100, 0x03, 1), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 3000, 0x03, 1), H2_R_BAD_VALUE); /* not a divisor of 16 MHz */
    CHECK_EQ(h2_check_config(f, 10000, 0x03, 1), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 10240, 0x01, 1), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 10000, 0x07, 1), H2_R_BAD_VALUE); /* 30000 conversions/s */
    CHECK_EQ(h2_check_config(f, 5000, 0x0F, 1), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 6400, 0x0F, 1), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 8000, 0x0F, 1), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 1000, 0x00, 1), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 1000, 0x1F, 1), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 1000, 0xF0, 1), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 1000, 0x03, 0), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 1000, 0x03, 14), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 1000, 0x03, 15), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 100, 0x03, 16), H2_R_OK);
    CHECK_EQ(h2_check_config(f, 1000, 0x03, 17), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_config(f, 1000, 0x0F, 7), H2_R_OK);  /* 28000 conversions/s */
    CHECK_EQ(h2_check_config(f, 1000, 0x0F, 8), H2_R_BAD_VALUE);

    CHECK_EQ(h2_adc_prescaler(f, 1000, 2), 128);
    CHECK_EQ(h2_adc_prescaler(f, 5000, 1), 128);
    CHECK_EQ(h2_adc_prescaler(f, 5000, 2), 64);
    CHECK_EQ(h2_adc_prescaler(f, 10000, 2), 32);

    CHECK_EQ(h2_samples_per_frame(100, 1), 1);
    CHECK_EQ(h2_samples_per_frame(1000, 2), 10);
    CHECK_EQ(h2_samples_per_frame(10000, 2), 64);
    CHECK_EQ(h2_samples_per_frame(10000, 1), 100);
    CHECK_EQ(h2_samples_per_frame(5000, 4), 32);

    uint8_t div;
    uint16_t ocr;
    h2_timer_config(f, 1000, &div, &ocr);
    CHECK(div == 1 && ocr == 15999);
    h2_timer_config(f, 10000, &div, &ocr);
    CHECK(div == 1 && ocr == 1599);
    h2_timer_config(f, 100, &div, &ocr);
    CHECK(div == 8 && ocr == 19999);
    h2_timer_config(f, 250, &div, &ocr);
    CHECK(div == 1 && ocr == 63999);
    h2_timer_config(f, 128, &div, &ocr);
    CHECK(div == 8 && ocr == 15624);
}

static void test_identify_and_config(const vector_t *v, int n)
{
    h2_meter_t *m = new_meter();
    command(m, H2_C_IDENTIFY, 0, NULL, 0);
    drain(m);
    CHECK_EQ(nframes, 2);
    CHECK_EQ(ack_result(&frames[0], H2_C_IDENTIFY, 0), H2_R_OK);
    const vector_t *info = vectors_find(v, n, "info_mega2560_defaults");
    CHECK_EQ(frames[1].type, H2_T_INFO);
    CHECK_EQ(frames[1].len, info->payload_len);
    CHECK(memcmp(frames[1].payload, info->payload, (size_t)info->payload_len) == 0);

    /* every check and its result code, in the documented order */
    reset_host();
    command_u32(m, H2_C_SET_RATE, 1, 5000);
    command_u32(m, H2_C_SET_RATE, 2, 3000);
    command(m, H2_C_SET_RATE, 3, NULL, 0);
    command_u8(m, H2_C_SET_CHANNELS, 4, 0x1F);
    command_u8(m, H2_C_SET_CHANNELS, 5, 0x0F);
    command_u8(m, H2_C_SET_OVERSAMPLING, 6, 2);
    command_u8(m, H2_C_SET_OVERSAMPLING, 7, 0);
    command(m, 0x42, 8, NULL, 0);
    command(m, 0x89, 9, NULL, 0);
    command_u8(m, H2_C_GET_STATUS, 10, 0);
    drain(m);
    CHECK_EQ(nframes, 10);
    CHECK_EQ(ack_result(&frames[0], H2_C_SET_RATE, 1), H2_R_OK);
    CHECK_EQ(ack_result(&frames[1], H2_C_SET_RATE, 2), H2_R_BAD_VALUE);
    CHECK_EQ(ack_result(&frames[2], H2_C_SET_RATE, 3), H2_R_BAD_LENGTH);
    CHECK_EQ(ack_result(&frames[3], H2_C_SET_CHANNELS, 4), H2_R_BAD_VALUE);
    CHECK_EQ(ack_result(&frames[4], H2_C_SET_CHANNELS, 5), H2_R_OK);
    CHECK_EQ(ack_result(&frames[5], H2_C_SET_OVERSAMPLING, 6), H2_R_BAD_VALUE); /* 40000/s */
    CHECK_EQ(ack_result(&frames[6], H2_C_SET_OVERSAMPLING, 7), H2_R_BAD_VALUE);
    CHECK_EQ(ack_result(&frames[7], 0x42, 8), H2_R_UNKNOWN);
    CHECK_EQ(ack_result(&frames[8], 0x89, 9), H2_R_UNKNOWN);
    CHECK_EQ(ack_result(&frames[9], H2_C_GET_STATUS, 10), H2_R_BAD_LENGTH);
    CHECK_EQ(m->rate_hz, 5000);
    CHECK_EQ(m->channel_count, 4);
    CHECK_EQ(m->oversampling, 1);
    CHECK_EQ(m->samples_per_frame, 32);
    CHECK_EQ(m->commands_rejected, 8);
    CHECK_EQ(host_seq_gaps, 0);

    /* a corrupted command is discarded and counted; the next one is answered */
    reset_host();
    uint8_t raw[16];
    uint16_t len = h2_frame_encode(raw, H2_C_GET_STATUS, 11, NULL, 0);
    raw[5] ^= 0x01;
    for (uint16_t i = 0; i < len; i++) {
        h2_meter_isr_rx(m, raw[i]);
    }
    command(m, H2_C_GET_STATUS, 12, NULL, 0);
    drain(m);
    CHECK_EQ(nframes, 2);
    CHECK_EQ(ack_result(&frames[0], H2_C_GET_STATUS, 12), H2_R_OK);
    CHECK_EQ(frames[1].type, H2_T_STATUS);
    CHECK_EQ(h2_get_u16(frames[1].payload + 12), 9);
    CHECK_EQ(frames[1].payload[14], 0);
}

/* A run at 1 kHz x 2 channels: indices, values, the once-a-second STATUS, and STOP's flush. */
static void test_run(void)
{
    h2_meter_t *m = new_meter();
    command(m, H2_C_START, 100, NULL, 0);
    drain(m);
    CHECK_EQ(starts, 1);
    CHECK_EQ(nframes, 1);
    CHECK_EQ(ack_result(&frames[0], H2_C_START, 100), H2_R_OK);
    command_u32(m, H2_C_SET_RATE, 101, 2000);
    command(m, H2_C_START, 102, NULL, 0);
    drain(m);
    CHECK_EQ(ack_result(&frames[1], H2_C_SET_RATE, 101), H2_R_BUSY);
    CHECK_EQ(ack_result(&frames[2], H2_C_START, 102), H2_R_BUSY);

    reset_host();
    for (int i = 0; i < 2505; i++) {
        sample_once(m);
        if (i % 7 == 0) {
            drain(m);
        }
    }
    command(m, H2_C_STOP, 103, NULL, 0);
    drain(m);
    CHECK_EQ(stops, 1);
    CHECK_EQ(host_seq_gaps, 0);
    uint32_t next = 0;
    int statuses = 0, acked = 0;
    for (int i = 0; i < nframes; i++) {
        frame_t *f = &frames[i];
        if (f->type == H2_T_SAMPLES) {
            CHECK(!acked || i == nframes - 2); /* only the last partial batch follows the ACK */
            uint32_t first = h2_get_u32(f->payload);
            uint8_t ch = f->payload[4];
            uint16_t count = (uint16_t)((f->len - 5) / (2 * ch));
            CHECK_EQ(first, next);
            CHECK_EQ(ch, 2);
            CHECK(count == 10 || (i == nframes - 2 && count == 5));
            for (uint16_t s = 0; s < count; s++) {
                for (uint8_t c = 0; c < ch; c++) {
                    CHECK_EQ(h2_get_u16(f->payload + 5 + 2 * (s * ch + c)), wave(first + s, c));
                }
            }
            next = first + count;
        } else if (f->type == H2_T_STATUS) {
            statuses++;
            uint32_t taken = h2_get_u32(f->payload);
            CHECK_EQ(h2_get_u32(f->payload + 4), 0);
            CHECK_EQ(h2_get_u32(f->payload + 8), f->seq);
            if (statuses <= 2) {
                CHECK_EQ(taken, 1000u * (uint32_t)statuses);
                CHECK_EQ(f->payload[14], 1);
            } else {
                CHECK_EQ(taken, 2505);
                CHECK_EQ(f->payload[14], 0);
                CHECK_EQ(i, nframes - 1);
            }
        } else if (f->type == H2_T_ACK) {
            CHECK_EQ(ack_result(f, H2_C_STOP, 103), H2_R_OK);
            acked = 1;
        }
    }
    CHECK_EQ(next, 2505);
    CHECK_EQ(statuses, 3);

    /* STOP when stopped: ACK and a STATUS; a new START restarts the index at 0 */
    reset_host();
    command(m, H2_C_STOP, 104, NULL, 0);
    command(m, H2_C_START, 105, NULL, 0);
    drain(m);
    for (int i = 0; i < 10; i++) {
        sample_once(m);
    }
    drain(m);
    CHECK_EQ(nframes, 4);
    CHECK_EQ(frames[1].type, H2_T_STATUS);
    CHECK_EQ(frames[1].payload[14], 0);
    CHECK_EQ(frames[3].type, H2_T_SAMPLES);
    CHECK_EQ(h2_get_u32(frames[3].payload), 0);
}

/* The host reads too slowly: whole batches are dropped and counted, never corrupted, and the
 * final STATUS accounts for every sample. */
static void test_drops_and_overrun(void)
{
    h2_meter_t *m = new_meter();
    command_u32(m, H2_C_SET_RATE, 1, 10000);
    command(m, H2_C_START, 2, NULL, 0);
    drain(m);
    reset_host();
    uint8_t b;
    for (int i = 0; i < 20000; i++) {
        sample_once(m);
        h2_meter_poll(m);
        if (i % 3 == 0) { /* the link drains 2 bytes per 3 samples: far too slow */
            h2_meter_isr_tx(m, &b);
            h2_meter_isr_tx(m, &b);
        }
    }
    /* an ADC overrun: the tick finds the previous sample still converting */
    uint32_t index = m->samples_taken;
    uint8_t mux = tick(m);
    CHECK(mux != H2_ADC_NONE);
    CHECK_EQ(tick(m), H2_ADC_NONE);
    while (mux != H2_ADC_NONE) {
        mux = adc(m, wave(index, mux));
    }
    sample_once(m);
    command(m, H2_C_STOP, 3, NULL, 0);
    reset_host();
    drain(m);
    uint32_t delivered = 0, last_end = 0;
    int gaps = 0;
    for (int i = 0; i < nframes; i++) {
        const frame_t *f = &frames[i];
        if (f->type != H2_T_SAMPLES) {
            continue;
        }
        uint32_t first = h2_get_u32(f->payload);
        uint16_t count = (uint16_t)((f->len - 5) / 4);
        gaps += first != last_end;
        for (uint16_t s = 0; s < count; s++) {
            CHECK_EQ(h2_get_u16(f->payload + 5 + 4 * s), wave(first + s, 0));
        }
        delivered += count;
        last_end = first + count;
    }
    const frame_t *st = &frames[nframes - 1];
    CHECK_EQ(st->type, H2_T_STATUS);
    uint32_t taken = h2_get_u32(st->payload), dropped = h2_get_u32(st->payload + 4);
    CHECK_EQ(taken, 20003);
    CHECK(dropped > 10000);
    CHECK(gaps > 0);
    /* the ring still held frames queued before the host reset: count those too */
    CHECK(delivered <= taken - dropped);
    CHECK_EQ(host_seq_gaps, 0);
}

static void test_full_accounting(void)
{
    /* Same as above but every byte reaches the host: delivered + dropped == taken exactly. */
    h2_meter_t *m = new_meter();
    command_u32(m, H2_C_SET_RATE, 1, 10000);
    command(m, H2_C_START, 2, NULL, 0);
    uint8_t b;
    h2_frame_t f;
    uint32_t delivered = 0, taken = 0, dropped = 0;
    for (int i = 0; i < 30000; i++) {
        sample_once(m);
        h2_meter_poll(m);
        for (int k = 0; k < (i % 2 ? 5 : 3); k++) {
            if (!h2_meter_isr_tx(m, &b)) {
                break;
            }
            h2_parser_feed(&host, b);
            while (h2_parser_next(&host, &f)) {
                if (f.type == H2_T_SAMPLES) {
                    delivered += (f.len - 5u) / 4u;
                }
            }
        }
    }
    command(m, H2_C_STOP, 3, NULL, 0);
    for (;;) {
        h2_meter_poll(m);
        if (!h2_meter_isr_tx(m, &b)) {
            break;
        }
        h2_parser_feed(&host, b);
        while (h2_parser_next(&host, &f)) {
            if (f.type == H2_T_SAMPLES) {
                delivered += (f.len - 5u) / 4u;
            } else if (f.type == H2_T_STATUS && f.payload[14] == 0) {
                taken = h2_get_u32(f.payload);
                dropped = h2_get_u32(f.payload + 4);
            }
        }
    }
    CHECK_EQ(taken, 30000);
    CHECK(dropped > 0);
    CHECK_EQ(delivered + dropped, taken);
}

/* The idle loop's wake-up test: ISR events, and blocked work waiting for TX room. */
static void test_has_work(void)
{
    h2_meter_t *m = new_meter();
    CHECK(!h2_meter_has_work(m));
    command(m, H2_C_START, 1, NULL, 0); /* command() polls */
    CHECK(!h2_meter_has_work(m));
    for (int i = 0; i < 9; i++) {
        sample_once(m);
    }
    CHECK(!h2_meter_has_work(m)); /* a batch is 10 samples at 1 kHz */
    sample_once(m);
    CHECK(h2_meter_has_work(m));
    /* fill the ring until samples must wait, then free room byte by byte */
    uint8_t b;
    for (int i = 0; i < 400; i++) {
        sample_once(m);
        h2_meter_poll(m);
    }
    CHECK(m->need_room > 0);
    CHECK(!h2_meter_has_work(m));
    int freed = 0;
    while (!h2_meter_has_work(m) && h2_meter_isr_tx(m, &b)) {
        freed++;
    }
    CHECK(h2_meter_has_work(m));
    CHECK(freed > 0 && freed <= (int)m->need_room);
    CHECK(h2_meter_poll(m) > 0);
}

static void test_oversampling_and_markers(void)
{
    h2_meter_t *m = new_meter();
    command_u8(m, H2_C_SET_CHANNELS, 1, 0x24); /* A2 and A5 */
    command_u8(m, H2_C_SET_OVERSAMPLING, 2, 3);
    command(m, H2_C_START, 3, NULL, 0);
    drain(m);
    reset_host();
    /* reads 10, 11, 13 -> 34/3 = 11.33 -> 11; 1000, 1001, 1001 -> 1000.67 -> 1001 */
    const uint16_t reads[] = {10, 11, 13, 1000, 1001, 1001};
    const uint8_t muxes[] = {2, 2, 2, 5, 5, 5};
    for (int s = 0; s < 10; s++) {
        if (s == 4) {
            h2_meter_isr_marker(m, 1);
        }
        uint8_t mux = tick(m);
        int k = 0;
        while (mux != H2_ADC_NONE) {
            CHECK_EQ(mux, muxes[k]);
            if (s == 6 && k == 2) {
                h2_meter_isr_marker(m, 0); /* mid-sample: the next sample is the first after */
            }
            mux = adc(m, reads[k++]);
        }
        CHECK_EQ(k, 6);
    }
    drain(m);
    CHECK_EQ(nframes, 3);
    CHECK_EQ(frames[0].type, H2_T_MARKER);
    CHECK_EQ(h2_get_u32(frames[0].payload), 4);
    CHECK_EQ(frames[0].payload[4], 2);
    CHECK_EQ(frames[0].payload[5], 1);
    CHECK_EQ(frames[1].type, H2_T_MARKER);
    CHECK_EQ(h2_get_u32(frames[1].payload), 7);
    CHECK_EQ(frames[1].payload[5], 0);
    CHECK_EQ(frames[2].type, H2_T_SAMPLES);
    CHECK_EQ(frames[2].len, 5 + 10 * 2 * 2);
    CHECK_EQ(h2_get_u16(frames[2].payload + 5), 11);
    CHECK_EQ(h2_get_u16(frames[2].payload + 7), 1001);

    /* at most H2_MARKERS edges wait; edges while stopped are ignored */
    for (int i = 0; i < 40; i++) {
        h2_meter_isr_marker(m, (uint8_t)(i & 1));
    }
    command(m, H2_C_STOP, 4, NULL, 0);
    reset_host();
    drain(m);
    h2_meter_isr_marker(m, 1);
    drain(m);
    int markers = 0;
    for (int i = 0; i < nframes; i++) {
        markers += frames[i].type == H2_T_MARKER;
    }
    CHECK_EQ(markers, H2_MARKERS);
}

/* The device's own encoders against the golden vectors, byte for byte. */
static void test_device_frames_match_vectors(const vector_t *v, int n)
{
    h2_meter_t *m = new_meter();
    m->frames_sent = 1000;
    m->samples_taken = 10000;
    m->samples_dropped = 3;
    m->commands_rejected = 2;
    m->state = H2_RUNNING;
    command(m, H2_C_GET_STATUS, 0, NULL, 0);
    drain(m);
    check_frame_equals_vector(&frames[1], vectors_find(v, n, "status_running"));

    m = new_meter();
    m->frames_sent = 1500;
    m->samples_taken = 1500;
    m->state = H2_RUNNING;
    m->frames_sent = 65535;
    h2_meter_isr_marker(m, 1);
    m->samples_taken = 0;
    h2_meter_isr_marker(m, 0);
    drain(m);
    check_frame_equals_vector(&frames[0], vectors_find(v, n, "marker_rising"));
    check_frame_equals_vector(&frames[1], vectors_find(v, n, "marker_falling_after_seq_wrap"));

    m = new_meter();
    m->frames_sent = 10;
    command(m, H2_C_START, 65535, NULL, 0);
    command(m, H2_C_SET_CHANNELS, 65534, NULL, 0);
    drain(m);
    check_frame_equals_vector(&frames[0], vectors_find(v, n, "ack_ok"));
    check_frame_equals_vector(&frames[1], vectors_find(v, n, "ack_bad_length"));
    m = new_meter();
    m->frames_sent = 12;
    command_u32(m, H2_C_SET_RATE, 65533, 3000);
    command(m, 0x99, 65532, NULL, 0);
    m->state = H2_RUNNING;
    command_u32(m, H2_C_SET_RATE, 65531, 1000);
    drain(m);
    check_frame_equals_vector(&frames[0], vectors_find(v, n, "ack_bad_value"));
    check_frame_equals_vector(&frames[1], vectors_find(v, n, "ack_unknown"));
    check_frame_equals_vector(&frames[2], vectors_find(v, n, "ack_busy"));

    static const h2_board_t uno = {H2_MCU_ATMEGA328P, 16000000u, 5000u, 500000u, 2u, "uno",
                                   1u, 0u, 0u};
    m = new_meter();
    h2_meter_init(m, &uno, &hooks);
    m->frames_sent = 3;
    command_u32(m, H2_C_SET_RATE, 0, 250);
    command_u8(m, H2_C_SET_CHANNELS, 1, 0x01);
    command_u8(m, H2_C_SET_OVERSAMPLING, 2, 4);
    command(m, H2_C_IDENTIFY, 3, NULL, 0);
    drain(m);
    check_frame_equals_vector(&frames[4], vectors_find(v, n, "info_uno"));

    static const h2_board_t odd = {H2_MCU_ATMEGA2560, 16000000u, 5000u, 1000000u, 2u,
                                   "ABCDEFGHIJKLMNOPQRSTUVWXYZ", 1u, 0u, 0u};
    m = new_meter();
    h2_meter_init(m, &odd, &hooks);
    m->rate_hz = 10000; /* not a configuration the checks allow: INFO reports what is set */
    m->channel_mask = 0xF0;
    m->frames_sent = 299;
    command(m, H2_C_IDENTIFY, 0, NULL, 0);
    drain(m);
    check_frame_equals_vector(&frames[1], vectors_find(v, n, "info_board_name_16_bytes"));

    /* SAMPLES: set up the rate and channels each vector implies, then feed its values. */
    struct {
        const char *name;
        uint32_t rate;
        uint8_t mask;
    } cases[] = {
        {"samples_one_value", 100, 0x01},
        {"samples_2ch_10", 1000, 0x03},
        {"samples_max_channels_mega_frame", 3200, 0x0F},
        {"samples_extremes", 100, 0x07},
        {"samples_sync_bytes_in_payload", 320, 0x01},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        const vector_t *vec = vectors_find(v, n, cases[c].name);
        uint32_t first = (uint32_t)vec_field(vec, "first_sample_index");
        uint8_t ch = (uint8_t)vec_field(vec, "columns");
        uint16_t count = (uint16_t)((vec->payload_len - 5) / (2 * ch));
        m = new_meter();
        command_u32(m, H2_C_SET_RATE, 0, cases[c].rate);
        command_u8(m, H2_C_SET_CHANNELS, 1, cases[c].mask);
        command(m, H2_C_START, 2, NULL, 0);
        drain(m);
        CHECK_EQ(m->samples_per_frame, count);
        m->samples_taken = first;
        m->frames_sent = (uint32_t)vec->seq;
        for (uint16_t s = 0; s < count; s++) {
            uint8_t mux = tick(m);
            uint8_t k = 0;
            while (mux != H2_ADC_NONE) {
                mux = adc(m, h2_get_u16(vec->payload + 5 + 2 * (s * ch + k++)));
            }
        }
        reset_host();
        drain(m);
        CHECK_EQ(nframes, 1);
        check_frame_equals_vector(&frames[0], vec);
    }
}

/* INA219 channels: configuration checks, the sample finished by the main loop's I2C reads,
 * a sensor that does not answer, drops while the reads are under way, and the golden frames. */
static void test_ina219(const vector_t *v, int n)
{
    uint32_t f = 16000000u;
    CHECK_EQ(h2_check_channels(f, 800, 0x03, 1, 0x01), H2_R_OK);
    CHECK_EQ(h2_check_channels(f, 800, 0x00, 1, 0x03), H2_R_OK); /* I2C alone */
    CHECK_EQ(h2_check_channels(f, 800, 0x00, 1, 0x00), H2_R_BAD_VALUE);
    CHECK_EQ(h2_check_channels(f, 800, 0x07, 1, 0x03), H2_R_BAD_VALUE); /* 5 channels */
    CHECK_EQ(h2_check_channels(f, 800, 0x01, 1, 0x10), H2_R_BAD_VALUE); /* a kind, no chip */
    CHECK_EQ(h2_check_channels(f, 1000, 0x00, 1, 0x01), H2_R_BAD_VALUE); /* faster than it converts */
    CHECK_EQ(h2_check_channels(f, 800, 0x00, 1, 0x0F), H2_R_BAD_VALUE); /* 4 x 300 us > 1.25 ms */
    CHECK_EQ(h2_check_channels(f, 800, 0x01, 4, 0x03), H2_R_OK);
    CHECK_EQ(h2_check_channels(f, 800, 0x03, 16, 0x03), H2_R_BAD_VALUE); /* ADC + I2C budget */

    /* the helpers the host decoding mirrors */
    CHECK_EQ(h2_ina219_shunt_uv(6000), 60000);
    CHECK_EQ(h2_ina219_shunt_uv(0xFFFF), -10);
    CHECK_EQ(h2_ina219_shunt_uv(0x8000), -327680);
    CHECK_EQ(h2_ina219_bus_mv((1250u << 3) | 3u), 5000);
    CHECK_EQ(h2_ina219_power_uw(6000, 1250u << 3, 100), 3000000); /* 600 mA at 5 V, 0.1 ohm */
    CHECK_EQ(h2_ina219_power_uw(0xFFFF, 1250u << 3, 100), -500);

    /* IDENTIFY reports the I2C mask */
    h2_meter_t *m = new_meter();
    m->frames_sent = 4;
    command_u32(m, H2_C_SET_RATE, 0, 800);
    command_u8(m, H2_C_SET_CHANNELS, 0, 0x01);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 1, 0x01);
    command(m, H2_C_IDENTIFY, 2, NULL, 0);
    drain(m);
    CHECK_EQ(ack_result(&frames[1], H2_C_SET_CHANNELS, 0), H2_R_OK);
    CHECK_EQ(ack_result(&frames[2], H2_C_SET_I2C_CHANNELS, 1), H2_R_OK);
    check_frame_equals_vector(&frames[4], vectors_find(v, n, "info_mega2560_ina219"));
    CHECK_EQ(m->columns, 3);

    /* A0 + INA219 at 0x40: the ADC interrupt leaves the sample to the main loop */
    const vector_t *vec = vectors_find(v, n, "samples_adc_and_ina219");
    m = new_meter();
    command_u32(m, H2_C_SET_RATE, 0, 400);
    command_u8(m, H2_C_SET_CHANNELS, 1, 0x01);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 2, 0x01);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 3, 0x01);
    command(m, H2_C_START, 4, NULL, 0);
    drain(m);
    CHECK_EQ(m->samples_per_frame, 4);
    m->samples_taken = 4096;
    m->frames_sent = (uint32_t)vec->seq;
    ina_next = 0;
    for (uint16_t s = 0; s < 4; s++) {
        ina_regs[2 * s] = h2_get_u16(vec->payload + 5 + 2 * (s * 3 + 1));
        ina_regs[2 * s + 1] = h2_get_u16(vec->payload + 5 + 2 * (s * 3 + 2));
    }
    /* the last sample's sensor fails: its values are replaced by the failure marks */
    ina_regs[6] = 0x1234;
    ina_regs[7] = 0x5678;
    reset_host();
    for (uint16_t s = 0; s < 4; s++) {
        uint8_t mux = tick(m);
        CHECK_EQ(mux, 0);
        CHECK_EQ(adc(m, h2_get_u16(vec->payload + 5 + 2 * (s * 3))), H2_ADC_NONE);
        CHECK(m->adc_busy && m->i2c_due);
        CHECK(h2_meter_has_work(m));
        CHECK_EQ(tick(m), H2_ADC_NONE); /* a tick now is a lost sample */
        m->samples_taken--;             /* ... which this test takes back */
        m->samples_dropped--;
        m->batch_broken = 0;
        if (s == 3) {
            m->i2c_addrs[0] = 0x43u; /* the sensor that never answers */
        }
        h2_meter_poll(m);
        CHECK(!m->adc_busy && !m->i2c_due);
    }
    drain(m);
    CHECK_EQ(nframes, 1);
    check_frame_equals_vector(&frames[0], vec);

    /* I2C channels alone: the tick hands the sample straight to the main loop */
    vec = vectors_find(v, n, "samples_two_ina219_extremes");
    m = new_meter();
    command_u32(m, H2_C_SET_RATE, 0, 100);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 1, 0x03);
    command_u8(m, H2_C_SET_CHANNELS, 2, 0x00);
    command(m, H2_C_START, 3, NULL, 0);
    command(m, H2_C_STOP, 4, NULL, 0);
    drain(m);
    CHECK_EQ(ack_result(&frames[1], H2_C_SET_I2C_CHANNELS, 1), H2_R_OK);
    CHECK_EQ(ack_result(&frames[2], H2_C_SET_CHANNELS, 2), H2_R_OK);
    m = new_meter();
    command_u32(m, H2_C_SET_RATE, 0, 100);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 1, 0x03);
    command_u8(m, H2_C_SET_CHANNELS, 2, 0x00);
    command(m, H2_C_START, 3, NULL, 0);
    drain(m);
    m->frames_sent = (uint32_t)vec->seq;
    for (uint16_t k = 0; k < 4; k++) {
        ina_regs[k] = h2_get_u16(vec->payload + 5 + 2 * k);
    }
    ina_next = 0;
    ina_reads = 0;
    CHECK_EQ(tick(m), H2_ADC_NONE);
    CHECK(m->i2c_due);
    reset_host();
    command(m, H2_C_STOP, 5, NULL, 0); /* STOP waits for the sample the I2C reads finish */
    drain(m);
    CHECK_EQ(ina_reads, 2);
    CHECK_EQ(ina_last_addr, 0x41);
    CHECK_EQ(nframes, 3);
    CHECK_EQ(ack_result(&frames[0], H2_C_STOP, 5), H2_R_OK);
    /* frames[1] is the samples frame; its seq follows the ACK */
    CHECK_EQ(frames[1].type, H2_T_SAMPLES);
    CHECK_EQ(frames[1].len, vec->payload_len);
    CHECK(memcmp(frames[1].payload, vec->payload, (size_t)vec->payload_len) == 0);
    CHECK_EQ(frames[2].type, H2_T_STATUS);
    CHECK_EQ(h2_get_u32(frames[2].payload), 1);
    CHECK_EQ(h2_get_u32(frames[2].payload + 4), 0);

    /* oversampling averages the analog columns only */
    m = new_meter();
    command_u32(m, H2_C_SET_RATE, 0, 100);
    command_u8(m, H2_C_SET_CHANNELS, 1, 0x01);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 2, 0x01);
    command_u8(m, H2_C_SET_OVERSAMPLING, 3, 3);
    command(m, H2_C_START, 4, NULL, 0);
    drain(m);
    ina_next = 0;
    ina_regs[0] = 7;
    ina_regs[1] = 9;
    CHECK_EQ(tick(m), 0);
    CHECK_EQ(adc(m, 100), 0);
    CHECK_EQ(adc(m, 101), 0);
    CHECK_EQ(adc(m, 103), H2_ADC_NONE);
    reset_host();
    command(m, H2_C_STOP, 5, NULL, 0);
    drain(m);
    CHECK_EQ(frames[1].type, H2_T_SAMPLES);
    CHECK_EQ(frames[1].payload[4], 3);
    CHECK_EQ(h2_get_u16(frames[1].payload + 5), 101);
    CHECK_EQ(h2_get_u16(frames[1].payload + 7), 7);
    CHECK_EQ(h2_get_u16(frames[1].payload + 9), 9);
}

/* INA226 channels: bit 4 + n of the I2C mask marks the chip at 0x40 + n as an INA226; its rate
 * limit comes from the configuration the firmware picks for the rate; the decoding helpers. */
static void test_ina226(const vector_t *v, int n)
{
    uint32_t f = 16000000u;
    CHECK_EQ(h2_check_channels(f, 1000, 0x00, 1, 0x11), H2_R_OK);  /* INA226 at 0x40 alone */
    CHECK_EQ(h2_check_channels(f, 1000, 0x00, 1, 0x13), H2_R_BAD_VALUE); /* + an INA219 at 1 kHz */
    CHECK_EQ(h2_check_channels(f, 800, 0x01, 1, 0x13), H2_R_OK);   /* both kinds at 800 Hz */
    CHECK_EQ(h2_check_channels(f, 1000, 0x00, 1, 0x21), H2_R_BAD_VALUE); /* kind without chip */
    CHECK_EQ(h2_check_channels(f, 2500, 0x00, 1, 0x11), H2_R_OK);  /* 2 x 140 us x 1 fits */
    CHECK_EQ(h2_check_channels(f, 2560, 0x00, 1, 0x11), H2_R_OK);  /* the I2C budget's last */
    CHECK_EQ(h2_check_channels(f, 3200, 0x00, 1, 0x11), H2_R_BAD_VALUE); /* I2C budget */
    CHECK_EQ(h2_check_channels(f, 2500, 0x00, 1, 0x33), H2_R_BAD_VALUE); /* 2 x 300 us > 400 us */
    CHECK_EQ(h2_check_channels(f, 1000, 0x03, 1, 0x33), H2_R_OK);  /* 4 channels */

    /* the configuration for a rate: the longest result within 90 % of the period */
    CHECK_EQ(h2_ina226_config_for_rate(1000), 0x4097u); /* 2 x 332 us */
    CHECK_EQ(h2_ina226_result_us(0x4097u), 664);
    CHECK_EQ(h2_ina226_config_for_rate(800), 0x4207u);  /* 4 x 2 x 140 us = 1120 us */
    CHECK_EQ(h2_ina226_config_for_rate(500), 0x424Fu);  /* 4 x 2 x 204 us = 1632 us */
    CHECK_EQ(h2_ina226_config_for_rate(100), 0x4327u);  /* 4 x 2 x 1100 us = 8800 us */
    CHECK_EQ(h2_ina226_result_us(0x4327u), 8800);
    CHECK_EQ(h2_ina226_config_for_rate(3200), 0x4007u); /* 2 x 140 us */
    CHECK_EQ(h2_ina226_config_for_rate(4000), 0u);
    CHECK_EQ(h2_ina226_result_us(H2_INA226_POWER_ON_CONFIG), 2200); /* 2 x 1.1 ms */

    CHECK_EQ(h2_ina226_shunt_nv(0x0001), 2500);
    CHECK_EQ(h2_ina226_shunt_nv(0xFFFF), -2500);
    CHECK_EQ(h2_ina226_shunt_nv(0x8000), -81920000);
    CHECK_EQ(h2_ina226_bus_uv(4000), 5000000u);
    CHECK_EQ(h2_ina226_power_uw(24000, 4000, 100), 3000000); /* 60 mV: 600 mA at 5 V */
    CHECK_EQ(h2_ina226_power_uw(0xFFFF, 4000, 100), -125);  /* -25 uA x 5 V */

    /* INFO carries the whole I2C mask, kinds included; the columns are two per chip */
    h2_meter_t *m = new_meter();
    m->frames_sent = 7;
    command_u32(m, H2_C_SET_RATE, 0, 800);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 1, 0x13);
    command_u8(m, H2_C_SET_CHANNELS, 2, 0x01);
    command(m, H2_C_IDENTIFY, 3, NULL, 0);
    drain(m);
    CHECK_EQ(ack_result(&frames[1], H2_C_SET_I2C_CHANNELS, 1), H2_R_OK);
    CHECK_EQ(ack_result(&frames[2], H2_C_SET_CHANNELS, 2), H2_R_OK);
    check_frame_equals_vector(&frames[4], vectors_find(v, n, "info_mega2560_ina226"));
    CHECK_EQ(m->columns, 5);
    CHECK_EQ(m->i2c_count, 2);
    CHECK_EQ(m->i2c_addrs[0], 0x40);

    /* an INA226 and an INA219 alone: the main loop reads both the same way (shunt, bus), the
     * frame is the golden one */
    const vector_t *vec = vectors_find(v, n, "samples_ina226_and_ina219");
    m = new_meter();
    command_u32(m, H2_C_SET_RATE, 0, 500);
    command_u8(m, H2_C_SET_I2C_CHANNELS, 1, 0x13);
    command_u8(m, H2_C_SET_CHANNELS, 2, 0x00);
    command(m, H2_C_START, 3, NULL, 0);
    drain(m);
    CHECK_EQ(m->samples_per_frame, 5);
    m->samples_taken = 77;
    m->frames_sent = (uint32_t)vec->seq;
    for (uint16_t k = 0; k < 20; k++) {
        ina_regs[k] = h2_get_u16(vec->payload + 5 + 2 * k);
    }
    ina_next = 0;
    ina_reads = 0;
    reset_host();
    for (uint16_t s = 0; s < 5; s++) {
        CHECK_EQ(tick(m), H2_ADC_NONE);
        CHECK(m->i2c_due);
        h2_meter_poll(m);
        CHECK(!m->i2c_due);
    }
    drain(m);
    CHECK_EQ(ina_reads, 10);
    CHECK_EQ(nframes, 1);
    check_frame_equals_vector(&frames[0], vec);
}

void test_meter(const char *vectors_path)
{
    vector_t *v;
    int n = vectors_load(vectors_path, &v);
    CHECK(n > 0);
    if (n <= 0) {
        return;
    }
    test_pure_helpers();
    test_identify_and_config(v, n);
    test_run();
    test_drops_and_overrun();
    test_full_accounting();
    test_oversampling_and_markers();
    test_has_work();
    test_device_frames_match_vectors(v, n);
    test_ina219(v, n);
    test_ina226(v, n);
    free(v);
}
