#include "h2_meter.h"

#include <string.h>

#include "h2_ina219.h"
#include "h2_ina226.h"
#include "h2_port.h"

#define FRAME_ACK (H2_OVERHEAD + H2_ACK_LEN)
#define FRAME_STATUS (H2_OVERHEAD + H2_STATUS_LEN)
#define FRAME_MARKER (H2_OVERHEAD + H2_MARKER_LEN)
#define FRAME_INFO_MAX (H2_OVERHEAD + H2_INFO_FIXED_LEN + H2_BOARD_NAME_MAX)
/* The largest reply to one command (ACK + INFO); commands wait until it fits. */
#define FRAME_REPLY_MAX (FRAME_ACK + FRAME_INFO_MAX)

/* ---- pure helpers ---------------------------------------------------------------------- */

static uint8_t popcount8(uint8_t v)
{
    uint8_t n = 0;
    for (; v; v &= (uint8_t)(v - 1u)) {
        n++;
    }
    return n;
}

uint8_t h2_sample_prescaler(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t reads_per_sample,
                            uint8_t i2c_sensors)
{
    /* A sample's reads run back to back: 13 ADC clocks per conversion, plus the interrupt
     * that starts the next one (H2_ADC_READ_CYCLES) and some fixed latency; all of it within
     * 90 % of the sample period. The slowest ADC clock that fits is the most accurate. */
    static const uint8_t prescalers[] = {128u, 64u, 32u};
    uint32_t budget = f_cpu_hz / rate_hz / 10u * 9u;
    for (uint8_t i = 0; i < sizeof prescalers; i++) {
        uint32_t need = (uint32_t)reads_per_sample * (13u * prescalers[i] + H2_ADC_READ_CYCLES) +
                        (uint32_t)i2c_sensors * H2_I2C_SENSOR_CYCLES + H2_ADC_FIXED_CYCLES;
        if (need <= budget) {
            return prescalers[i];
        }
    }
    return 0;
}

uint8_t h2_adc_prescaler(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t reads_per_sample)
{
    return h2_sample_prescaler(f_cpu_hz, rate_hz, reads_per_sample, 0u);
}

uint8_t h2_check_config(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t mask, uint8_t oversampling)
{
    return h2_check_channels(f_cpu_hz, rate_hz, mask, oversampling, 0u);
}

uint8_t h2_check_channels(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t mask, uint8_t oversampling,
                          uint8_t i2c_mask)
{
    /* bits 0..3: the chips at 0x40 + n; bits 4..7: which of them are INA226s */
    uint8_t chips = (uint8_t)(i2c_mask & H2_I2C_CHIPS);
    uint8_t ina226 = (uint8_t)(i2c_mask >> H2_I2C_CHANNELS);
    uint8_t analog = popcount8(mask);
    uint8_t i2c = popcount8(chips);
    uint8_t count = (uint8_t)(analog + i2c);
    if (rate_hz < H2_RATE_MIN_HZ || rate_hz > H2_RATE_MAX_HZ || f_cpu_hz % rate_hz != 0u) {
        return H2_R_BAD_VALUE;
    }
    if (count < 1u || count > H2_CHANNELS_MAX) {
        return H2_R_BAD_VALUE;
    }
    if (oversampling < 1u || oversampling > H2_OVERSAMPLING_MAX) {
        return H2_R_BAD_VALUE;
    }
    if (ina226 & (uint8_t)~chips) {
        return H2_R_BAD_VALUE; /* a kind for a chip that is not sampled */
    }
    /* an INA219 has new values every 1064 us: faster sampling would repeat them */
    if ((chips & (uint8_t)~ina226) && rate_hz > 1000000u / H2_INA219_CONVERSION_US) {
        return H2_R_BAD_VALUE;
    }
    /* an INA226 needs a configuration whose result fits the sample period */
    if (ina226 && h2_ina226_config_for_rate(rate_hz) == 0u) {
        return H2_R_BAD_VALUE;
    }
    if (h2_sample_prescaler(f_cpu_hz, rate_hz, (uint8_t)(analog * oversampling), i2c) == 0u) {
        return H2_R_BAD_VALUE;
    }
    return H2_R_OK;
}

uint8_t h2_samples_per_frame(uint32_t rate_hz, uint8_t columns)
{
    /* About 10 ms of samples per frame, at most H2_VALUES_MAX values. */
    uint32_t n = rate_hz / 100u;
    uint32_t cap = H2_VALUES_MAX / columns;
    if (n > cap) {
        n = cap;
    }
    return (uint8_t)(n ? n : 1u);
}

void h2_timer_config(uint32_t f_cpu_hz, uint32_t rate_hz, uint8_t *divider, uint16_t *ocr)
{
    uint32_t ticks = f_cpu_hz / rate_hz;
    *divider = 1;
    if (ticks > 65536u) {
        *divider = 8;
        ticks /= 8u;
    }
    *ocr = (uint16_t)(ticks - 1u);
}

static void apply_config(h2_meter_t *m, uint32_t rate_hz, uint8_t mask, uint8_t oversampling,
                         uint8_t i2c_mask)
{
    m->rate_hz = rate_hz;
    m->i2c_mask = i2c_mask;
    m->i2c_count = 0;
    for (uint8_t n = 0; n < H2_I2C_CHANNELS; n++) {
        if (i2c_mask & (1u << n)) {
            m->i2c_addrs[m->i2c_count++] = (uint8_t)(H2_INA219_ADDR_BASE + n);
        }
    }
    m->channel_mask = mask;
    m->oversampling = oversampling;
    m->channel_count = 0;
    for (uint8_t ch = 0; ch < 8u; ch++) {
        if (mask & (1u << ch)) {
            m->channels[m->channel_count++] = ch;
        }
    }
    m->oversampling_shift = 0xFFu;
    for (uint8_t k = 0; k < 5u; k++) {
        if (oversampling == (uint8_t)(1u << k)) {
            m->oversampling_shift = k;
        }
    }
    m->columns = (uint8_t)(m->channel_count + 2u * m->i2c_count);
    m->samples_per_frame = h2_samples_per_frame(rate_hz, m->columns);
    m->adc_prescaler = h2_sample_prescaler(m->board->f_cpu_hz, rate_hz,
                                           (uint8_t)(m->channel_count * oversampling),
                                           m->i2c_count);
}

void h2_meter_init(h2_meter_t *m, const h2_board_t *board, const h2_hooks_t *hooks)
{
    memset(m, 0, sizeof *m);
    m->board = board;
    m->hooks = hooks;
    h2_ring_init(&m->tx, m->tx_buf, H2_TX_SIZE);
    h2_ring_init(&m->rx, m->rx_buf, H2_RX_SIZE);
    h2_parser_init(&m->parser, m->parser_buf, sizeof m->parser_buf);
    apply_config(m, 1000u, 0x03u, 1u, 0u);
}

/* ---- interrupt side ---------------------------------------------------------------------- */

static void close_batch(h2_meter_t *m)
{
    if (m->fill && !m->dropping) {
        m->slots[m->slot_w % H2_SLOTS].count = m->fill;
        m->slot_w = (uint8_t)(m->slot_w + 1u);
        m->events = 1;
    }
    m->fill = 0;
}

void h2_meter_isr_tick(h2_meter_t *m)
{
    uint32_t index = m->samples_taken;
    m->samples_taken = index + 1u;
    if (--m->status_countdown == 0u) {
        m->status_countdown = (uint16_t)m->rate_hz;
        m->status_taken = index + 1u;
        m->status_dropped = m->samples_dropped;
        m->status_due = 1;
        m->events = 1;
    }
    if (m->adc_busy) {
        m->samples_dropped++;
        m->batch_broken = 1;
        return;
    }
    if (m->batch_broken) {
        m->batch_broken = 0;
        close_batch(m); /* a lost sample ends the batch: indices in a frame are contiguous */
    }
    if (m->fill == 0) {
        /* no free slot: the one slot_w points at is still the main loop's oldest */
        m->dropping = (uint8_t)(m->slot_w - m->slot_r) >= H2_SLOTS;
        if (m->dropping) {
            m->dst = m->scratch;
        } else {
            h2_batch_t *slot = &m->slots[m->slot_w % H2_SLOTS];
            slot->first_index = index;
            m->dst = slot->values;
        }
    }
    m->adc_busy = 1;
    m->adc_channel = 0;
    m->adc_reads = 0;
    if (m->channel_count == 0u) {
        m->i2c_due = 1; /* no analog input: the sample is the INA219 reads alone */
        m->events = 1;
    }
}

/* The sample's last value is in: count it and close the batch when it is full. */
static void sample_done(h2_meter_t *m)
{
    m->adc_busy = 0;
    if (m->dropping) {
        m->samples_dropped++;
    } else {
        m->dst += m->columns;
    }
    if (++m->fill >= m->samples_per_frame) {
        close_batch(m);
    }
    if (m->state != H2_RUNNING) {
        m->events = 1; /* a STOP waits for this sample */
    }
}

uint8_t h2_meter_isr_next_input(const h2_meter_t *m)
{
    if (!m->adc_busy) {
        return H2_ADC_NONE;
    }
    if ((uint8_t)(m->adc_reads + 1u) < m->oversampling) {
        return m->channels[m->adc_channel];
    }
    if ((uint8_t)(m->adc_channel + 1u) < m->channel_count) {
        return m->channels[m->adc_channel + 1u];
    }
    return H2_ADC_NONE;
}

/* Kept lean (no division, no 32-bit work): it runs once per conversion and delays the UART
 * interrupt while it runs. */
void h2_meter_isr_adc(h2_meter_t *m, uint16_t value)
{
    if (!m->adc_busy) {
        return;
    }
    uint16_t *v = m->dst + m->adc_channel;
    *v = m->adc_reads ? (uint16_t)(*v + value) : value;
    if (++m->adc_reads < m->oversampling) {
        return;
    }
    m->adc_reads = 0;
    if (++m->adc_channel < m->channel_count) {
        return;
    }
    if (m->i2c_count) {
        m->i2c_due = 1; /* the main loop reads the INA219s and finishes the sample */
        m->events = 1;
        return;
    }
    sample_done(m);
}

void h2_meter_isr_marker(h2_meter_t *m, uint8_t edge)
{
    uint8_t w = m->marker_w;
    if (m->state != H2_RUNNING || (uint8_t)(w - m->marker_r) >= H2_MARKERS) {
        return;
    }
    m->markers[w % H2_MARKERS].index = m->samples_taken;
    m->markers[w % H2_MARKERS].edge = edge;
    m->marker_w = (uint8_t)(w + 1u);
    m->events = 1;
}

/* ---- main-loop side ---------------------------------------------------------------------- */

static uint8_t room(h2_meter_t *m, uint16_t bytes)
{
    return h2_ring_free(&m->tx) >= bytes;
}

static void frame_begin(h2_meter_t *m, h2_fw_t *w, uint8_t type, uint16_t len)
{
    h2_fw_begin(w, &m->tx, type, (uint16_t)m->frames_sent, len);
}

static void frame_end(h2_meter_t *m, h2_fw_t *w)
{
    h2_fw_end(w);
    m->frames_sent++;
}

static void send_ack(h2_meter_t *m, const h2_frame_t *cmd, uint8_t result)
{
    h2_fw_t w;
    frame_begin(m, &w, H2_T_ACK, H2_ACK_LEN);
    h2_fw_u8(&w, cmd->type);
    h2_fw_u16(&w, cmd->seq);
    h2_fw_u8(&w, result);
    frame_end(m, &w);
}

static void send_info(h2_meter_t *m)
{
    const h2_board_t *b = m->board;
    uint8_t name_len = (uint8_t)strlen(b->name);
    if (name_len > H2_BOARD_NAME_MAX) {
        name_len = H2_BOARD_NAME_MAX;
    }
    h2_fw_t w;
    frame_begin(m, &w, H2_T_INFO, (uint16_t)(H2_INFO_FIXED_LEN + name_len));
    h2_fw_u8(&w, H2_PROTOCOL_VERSION);
    h2_fw_u8(&w, b->fw_major);
    h2_fw_u8(&w, b->fw_minor);
    h2_fw_u8(&w, b->fw_patch);
    h2_fw_u8(&w, b->mcu_id);
    h2_fw_u32(&w, b->f_cpu_hz);
    h2_fw_u8(&w, 10u);
    h2_fw_u16(&w, b->adc_ref_mv);
    h2_fw_u32(&w, m->rate_hz);
    h2_fw_u8(&w, m->channel_mask);
    h2_fw_u8(&w, m->oversampling);
    h2_fw_u32(&w, b->baud);
    h2_fw_u8(&w, b->marker_pin);
    h2_fw_u8(&w, m->i2c_mask);
    for (uint8_t i = 0; i < name_len; i++) {
        h2_fw_u8(&w, (uint8_t)b->name[i]);
    }
    frame_end(m, &w);
}

static void send_status(h2_meter_t *m, uint8_t periodic)
{
    uint32_t taken, dropped;
    H2_ATOMIC_BEGIN
    taken = periodic ? m->status_taken : m->samples_taken;
    dropped = periodic ? m->status_dropped : m->samples_dropped;
    H2_ATOMIC_END
    h2_fw_t w;
    frame_begin(m, &w, H2_T_STATUS, H2_STATUS_LEN);
    h2_fw_u32(&w, taken);
    h2_fw_u32(&w, dropped);
    h2_fw_u32(&w, m->frames_sent);
    h2_fw_u16(&w, (uint16_t)(m->commands_rejected + m->parser.discarded));
    h2_fw_u8(&w, m->state == H2_RUNNING);
    frame_end(m, &w);
}

static void send_marker(h2_meter_t *m, const h2_marker_t *mk)
{
    h2_fw_t w;
    frame_begin(m, &w, H2_T_MARKER, H2_MARKER_LEN);
    h2_fw_u32(&w, mk->index);
    h2_fw_u8(&w, m->board->marker_pin);
    h2_fw_u8(&w, mk->edge);
    frame_end(m, &w);
}

static uint16_t samples_frame_len(const h2_meter_t *m, const h2_batch_t *b)
{
    return (uint16_t)(H2_OVERHEAD + H2_SAMPLES_HEADER_LEN + 2u * b->count * m->columns);
}

/* Main loop: the sample under way has its ADC values; read the INA219s and finish it. The
 * sample interrupts leave dst and the batch alone while adc_busy is set, so only the
 * bookkeeping at the end needs interrupts off. */
static void read_i2c(h2_meter_t *m)
{
    uint16_t *v = m->dst + m->channel_count;
    for (uint8_t i = 0; i < m->i2c_count; i++, v += 2) {
        uint16_t shunt = H2_INA219_SHUNT_FAILED;
        uint16_t bus = H2_INA219_BUS_FAILED;
        if (!m->hooks->read_ina219 || m->hooks->read_ina219(m, m->i2c_addrs[i], &shunt, &bus)) {
            shunt = H2_INA219_SHUNT_FAILED;
            bus = H2_INA219_BUS_FAILED;
        }
        v[0] = shunt;
        v[1] = bus;
    }
    H2_ATOMIC_BEGIN
    m->i2c_due = 0;
    sample_done(m);
    H2_ATOMIC_END
}

static void send_samples(h2_meter_t *m, const h2_batch_t *b)
{
    uint16_t values = (uint16_t)(b->count * m->columns);
    h2_fw_t w;
    frame_begin(m, &w, H2_T_SAMPLES, (uint16_t)(H2_SAMPLES_HEADER_LEN + 2u * values));
    h2_fw_u32(&w, b->first_index);
    h2_fw_u8(&w, m->columns);
    if (m->oversampling == 1u) {
        for (uint16_t i = 0; i < values; i++) {
            h2_fw_u16(&w, b->values[i]);
        }
    } else {
        /* analog columns are sums of n reads; INA219 columns are raw registers */
        uint8_t n = m->oversampling;
        uint8_t shift = m->oversampling_shift;
        uint8_t c = 0;
        for (uint16_t i = 0; i < values; i++) {
            uint16_t value = b->values[i];
            if (c < m->channel_count) {
                uint16_t sum = (uint16_t)(value + n / 2u);
                value = (uint16_t)(shift != 0xFFu ? sum >> shift : sum / n);
            }
            h2_fw_u16(&w, value);
            if (++c == m->columns) {
                c = 0;
            }
        }
    }
    frame_end(m, &w);
}

static uint8_t expected_len(uint8_t type)
{
    switch (type) {
    case H2_C_SET_RATE:
        return 4;
    case H2_C_SET_CHANNELS:
    case H2_C_SET_OVERSAMPLING:
    case H2_C_SET_I2C_CHANNELS:
        return 1;
    default:
        return 0;
    }
}

static uint8_t configure(h2_meter_t *m, const h2_frame_t *cmd)
{
    uint32_t rate = m->rate_hz;
    uint8_t mask = m->channel_mask;
    uint8_t os = m->oversampling;
    uint8_t i2c = m->i2c_mask;
    if (cmd->type == H2_C_SET_RATE) {
        rate = h2_get_u32(cmd->payload);
    } else if (cmd->type == H2_C_SET_CHANNELS) {
        mask = cmd->payload[0];
    } else if (cmd->type == H2_C_SET_I2C_CHANNELS) {
        i2c = cmd->payload[0];
    } else {
        os = cmd->payload[0];
    }
    uint8_t result = h2_check_channels(m->board->f_cpu_hz, rate, mask, os, i2c);
    if (result == H2_R_OK) {
        apply_config(m, rate, mask, os, i2c);
    }
    return result;
}

static void start(h2_meter_t *m)
{
    /* Idle: no sample interrupt can run, so plain writes are safe. */
    m->samples_taken = 0;
    m->samples_dropped = 0;
    m->status_due = 0;
    m->status_countdown = (uint16_t)m->rate_hz;
    m->adc_busy = 0;
    m->i2c_due = 0;
    m->slot_w = 0;
    m->slot_r = 0;
    m->fill = 0;
    m->dropping = 0;
    m->batch_broken = 0;
    m->marker_w = 0;
    m->marker_r = 0;
    m->state = H2_RUNNING;
    m->hooks->start(m);
}

static void handle(h2_meter_t *m, const h2_frame_t *cmd)
{
    uint8_t t = cmd->type;
    uint8_t busy = m->state != H2_IDLE;
    uint8_t result = H2_R_OK;
    if (t < H2_C_IDENTIFY || t > H2_C_SET_I2C_CHANNELS) {
        result = H2_R_UNKNOWN;
    } else if (cmd->len != expected_len(t)) {
        result = H2_R_BAD_LENGTH;
    } else if (busy && (t == H2_C_START || t == H2_C_SET_RATE || t == H2_C_SET_CHANNELS ||
                        t == H2_C_SET_OVERSAMPLING || t == H2_C_SET_I2C_CHANNELS)) {
        result = H2_R_BUSY;
    } else if (t == H2_C_SET_RATE || t == H2_C_SET_CHANNELS || t == H2_C_SET_OVERSAMPLING ||
               t == H2_C_SET_I2C_CHANNELS) {
        result = configure(m, cmd);
    }
    if (result != H2_R_OK) {
        m->commands_rejected++;
    }
    send_ack(m, cmd, result);
    if (result != H2_R_OK) {
        return;
    }
    switch (t) {
    case H2_C_IDENTIFY:
        send_info(m);
        break;
    case H2_C_START:
        start(m);
        break;
    case H2_C_STOP:
        if (m->state == H2_RUNNING) {
            m->hooks->stop(m);
            m->state = H2_DRAINING;
        } else if (m->state == H2_IDLE) {
            send_status(m, 0);
        }
        break;
    case H2_C_GET_STATUS:
        send_status(m, 0);
        break;
    default:
        break;
    }
}

static uint8_t markers_pending(const h2_meter_t *m)
{
    return m->marker_r != m->marker_w;
}

static uint8_t samples_pending(const h2_meter_t *m)
{
    return m->slot_r != m->slot_w;
}

uint8_t h2_meter_has_work(h2_meter_t *m)
{
    return m->events || m->i2c_due || (m->need_room && h2_ring_free(&m->tx) >= m->need_room);
}

static void note_need(uint16_t *need, uint16_t bytes)
{
    if (*need == 0 || bytes < *need) {
        *need = bytes;
    }
}

/* What the work poll() could not do needs in TX room (everything left is blocked on room). */
static uint16_t room_needed(h2_meter_t *m)
{
    uint16_t need = 0;
    if (markers_pending(m)) {
        note_need(&need, FRAME_MARKER);
    }
    if (m->status_due) {
        note_need(&need, FRAME_STATUS);
    }
    if (m->parse_pending || h2_ring_used(&m->rx)) {
        note_need(&need, FRAME_REPLY_MAX);
    }
    if (samples_pending(m)) {
        note_need(&need, samples_frame_len(m, &m->slots[m->slot_r % H2_SLOTS]) + H2_TX_RESERVE);
    } else if (m->state == H2_FLUSHING) {
        note_need(&need, FRAME_STATUS);
    }
    return need;
}

uint8_t h2_meter_poll(h2_meter_t *m)
{
    uint8_t progress = 0;
    h2_frame_t cmd;
    uint8_t byte;

    m->events = 0; /* anything an interrupt adds from here on sets it again */

    while (markers_pending(m) && room(m, FRAME_MARKER)) {
        send_marker(m, &m->markers[m->marker_r % H2_MARKERS]);
        m->marker_r = (uint8_t)(m->marker_r + 1u);
        progress++;
    }
    if (m->status_due && room(m, FRAME_STATUS)) {
        m->status_due = 0;
        send_status(m, 1);
        progress++;
    }
    while (room(m, FRAME_REPLY_MAX)) {
        if (h2_parser_next(&m->parser, &cmd)) {
            handle(m, &cmd);
            progress++;
            continue;
        }
        if (!h2_ring_get(&m->rx, &byte)) {
            m->parse_pending = 0;
            break;
        }
        h2_parser_feed(&m->parser, byte);
        m->parse_pending = 1;
    }
    if (m->i2c_due) {
        read_i2c(m);
        progress++;
    }
    if (m->state == H2_DRAINING && !m->adc_busy) {
        close_batch(m);
        m->state = H2_FLUSHING;
        progress++;
    }
    while (samples_pending(m)) {
        const h2_batch_t *b = &m->slots[m->slot_r % H2_SLOTS];
        if (!room(m, samples_frame_len(m, b) + H2_TX_RESERVE)) {
            break;
        }
        send_samples(m, b);
        H2_ATOMIC_BEGIN
        m->slot_r = (uint8_t)(m->slot_r + 1u);
        H2_ATOMIC_END
        progress++;
    }
    if (m->state == H2_FLUSHING && !samples_pending(m) && room(m, FRAME_STATUS)) {
        m->state = H2_IDLE;
        send_status(m, 0);
        progress++;
    }
    m->need_room = room_needed(m);
    return progress;
}
