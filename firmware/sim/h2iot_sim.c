/* h2iot_sim: runs the compiled meter firmware (ATmega2560 .elf) in simavr, firmware in the loop.
 *
 *   h2iot_sim [--fast] [--profile] [--vcc-mv MV] [--ina219 MASK] [--ina226 MASK] FIRMWARE.elf
 *
 * --ina219 MASK puts an INA219 (sim/ina219_part.c) on the I2C bus at address 0x40 + n for
 * each bit n of MASK (0..0x0F); --ina226 MASK puts INA226s (sim/ina226_part.c) there the same
 * way (an address in both masks is an error). The firmware reads those it is told to
 * (SET_I2C_CHANNELS).
 *
 * stdout, one line each (flushed at once):
 *   /dev/pts/N                    first line: UART0 as a pseudo-terminal, the board's "serial port"
 *   clock T0_NS PERIOD_NS          the firmware's sample timer started: sample 0 was taken at
 *                                  simulated time T0_NS, then one sample every PERIOD_NS
 *   clock-stop T_NS                the sample timer stopped; T_NS is its last tick
 * Everything else (simavr's own chatter, errors, the final speed summary) goes to stderr.
 *
 * stdin, one command per line, times in simulated nanoseconds since the simulator started
 * (non-decreasing; `now` = the current simulated time):
 *   T MV0 [MV1 .. MV7]   from time T the analog inputs A0.. read these millivolts (0..5000)
 *   T m LEVEL            drive the marker pin (D2 = PE4/INT4) to LEVEL (0 or 1)
 *   T i N UV MV          the INA219 or INA226 at 0x40 + N sees a shunt voltage of UV
 *                        microvolts (signed) and a bus voltage of MV millivolts from time T;
 *                        both may have decimals (an INA226 resolves 2.5 uV and 1.25 mV; an
 *                        INA219 gets them rounded to whole uV and mV)
 *   T                    nothing new; in --fast mode this lets the simulation run up to T
 *   q                    quit
 * While the sample timer runs, changes (of every kind) take effect exactly at the next sample tick (the Timer1
 * compare match), before the firmware starts that sample's conversions; so every channel of a
 * sample sees the same inputs, and a marker edge together with a level change is reported
 * with the index of the first sample that shows the new level. While it is stopped, changes
 * take effect at time T.
 *
 * Pacing: by default simulated time follows wall-clock time (a power model can feed inputs in
 * real time). --fast runs as fast as it can, but never past the latest T received: the input
 * is the clock, which makes a test fully deterministic. End of input quits in --fast mode; in
 * real-time mode the simulation keeps running with the last inputs until SIGINT/SIGTERM or `q`.
 * The simulated core is held while more than half of the UART's 512-byte output buffer waits
 * for the pty reader, so a slow (or absent) reader slows the simulation instead of losing
 * bytes; in real-time mode the time held is then missing from simulated time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "avr_adc.h"
#include "avr_extint.h"
#include "avr_ioport.h"
#include "avr_uart.h"
#include <math.h>

#include "ina219_part.h"
#include "ina226_part.h"
#include "parts/uart_pty.h"
#include "sim_avr.h"
#include "sim_elf.h"
#include "sim_interrupts.h"
#include "sim_irq.h"
#include "sim_time.h"

#define MCU "atmega2560"
#define F_CPU_HZ 16000000u
#define TIMER1_COMPA_VECTOR 17 /* ATmega2560 vector number of TIMER1_COMPA */
#define TIMSK1_ADDR 0x6F        /* its enable bit, OCIE1A, lives here */
#define TIMSK1_OCIE1A 0x02
#define TCCR1B_ADDR 0x81        /* clock select CS12:0 in bits 2..0 */
#define OCR1AL_ADDR 0x88
#define OCR1AH_ADDR 0x89
#define UCSR0A_ADDR 0xC0 /* U2X0: bit 1 */
#define UCSR0C_ADDR 0xC2 /* UPM0: bits 5..4, USBS0: bit 3 */
#define UBRR0L_ADDR 0xC4
#define UBRR0H_ADDR 0xC5
#define MARKER_PORT 'E'
#define MARKER_BIT 4
#define MARKER_INT 4
#define ADC_INPUTS 8
#define PTY_HIGH_WATER 256 /* of the part's 512-byte fifo */
#define SLICE_CYCLES 16000u /* at most 1 ms of simulated time between housekeeping */

typedef struct {
    avr_cycle_count_t cycle;
    int8_t marker;          /* -1: no marker change */
    int8_t ina;             /* -1: no INA219/INA226 change, else n of address 0x40 + n */
    double shunt_uv;
    double bus_mv;
    uint8_t n_inputs;       /* inputs A0..A(n-1) change */
    uint16_t mv[ADC_INPUTS];
} event_t;

typedef struct {
    event_t *items;
    size_t head, tail, cap;
} queue_t;

static avr_t *avr;
static avr_uart_t *uart0;
static uart_pty_t pty;
static FILE *out;
static avr_irq_t *adc_irq[ADC_INPUTS];
static avr_irq_t *marker_irq;
#define INA219_PARTS 4
static ina219_part_t ina219[INA219_PARTS];
static uint8_t ina219_mask;
static ina226_part_t ina226[INA219_PARTS];
static uint8_t ina226_mask;
static volatile sig_atomic_t quit_requested;
static avr_cycle_count_t sleeping_cycles; /* for the summary: how busy the firmware was */

/* --profile: cycles spent in each interrupt handler (from its vector's "running" IRQ) */
static const struct {
    uint8_t vector;
    const char *name;
} profiled[] = {{5, "INT4 (marker)"}, {17, "TIMER1_COMPA (tick)"}, {25, "USART0_RX"},
                {26, "USART0_UDRE (tx)"}, {29, "ADC"}};
#define PROFILED (sizeof profiled / sizeof profiled[0])
static avr_cycle_count_t isr_cycles[PROFILED], isr_entered[PROFILED];
static uint64_t isr_calls[PROFILED];

static void on_isr_running(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    size_t i = (size_t)(uintptr_t)param;
    if (value) {
        isr_entered[i] = avr->cycle;
        isr_calls[i]++;
    } else if (isr_entered[i]) {
        isr_cycles[i] += avr->cycle - isr_entered[i];
        isr_entered[i] = 0;
    }
}

static queue_t pending; /* read from stdin, not yet due */
static queue_t held;    /* due while the sample timer runs: applied at its next tick */

/* the sample timer as seen from its compare interrupt */
static avr_cycle_count_t last_tick, first_tick, period;
static uint64_t ticks_in_run;
static int clock_running;

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static avr_cycle_count_t ns_to_cycles(uint64_t ns)
{
    return (avr_cycle_count_t)((unsigned __int128)ns * F_CPU_HZ / 1000000000u);
}

static uint64_t cycles_to_ns(avr_cycle_count_t c)
{
    return avr_cycles_to_nsec(avr, c);
}

static void push(queue_t *q, const event_t *e)
{
    if (q->tail == q->cap) {
        if (q->head > 0) {
            memmove(q->items, q->items + q->head, (q->tail - q->head) * sizeof *q->items);
            q->tail -= q->head;
            q->head = 0;
        }
        if (q->tail == q->cap) {
            q->cap = q->cap ? q->cap * 2 : 1024;
            q->items = realloc(q->items, q->cap * sizeof *q->items);
            if (!q->items) {
                fprintf(stderr, "h2iot_sim: out of memory\n");
                exit(1);
            }
        }
    }
    q->items[q->tail++] = *e;
}

static int queue_empty(const queue_t *q)
{
    return q->head == q->tail;
}

static void apply(const event_t *e)
{
    for (uint8_t ch = 0; ch < e->n_inputs; ch++) {
        avr_raise_irq(adc_irq[ch], e->mv[ch]);
    }
    if (e->marker >= 0) {
        avr_raise_irq(marker_irq, (uint32_t)e->marker);
    }
    if (e->ina >= 0) {
        if (ina226_mask & (1u << e->ina)) {
            ina226_part_set(&ina226[e->ina], e->shunt_uv, e->bus_mv);
        } else {
            ina219_part_set(&ina219[e->ina], (int32_t)lround(e->shunt_uv),
                            (uint32_t)lround(e->bus_mv));
        }
    }
}

static void apply_held(void)
{
    while (!queue_empty(&held)) {
        apply(&held.items[held.head++]);
    }
}

/* A tick more than two periods ago (or, before the period is known, longer ago than the
 * slowest rate's period) means the timer stopped. */
static int timer_alive(avr_cycle_count_t now)
{
    if (!ticks_in_run) {
        return 0;
    }
    avr_cycle_count_t limit = ticks_in_run >= 2 ? 2 * period + 64 : 2 * (F_CPU_HZ / 100u);
    return now - last_tick <= limit;
}

/* The exact tick period from the firmware's Timer1 setup (CTC on OCR1A): the interrupt's
 * observed times are only as exact as the instruction it lands on. */
static avr_cycle_count_t timer1_period(void)
{
    static const uint16_t prescale[8] = {0, 1, 8, 64, 256, 1024, 0, 0};
    uint16_t ocr = (uint16_t)(avr->data[OCR1AL_ADDR] | (avr->data[OCR1AH_ADDR] << 8));
    return (avr_cycle_count_t)(ocr + 1u) * prescale[avr->data[TCCR1B_ADDR] & 0x07];
}

static void on_timer1_compa(struct avr_irq_t *irq, uint32_t value, void *param)
{
    (void)irq;
    (void)param;
    if (!value || !(avr->data[TIMSK1_ADDR] & TIMSK1_OCIE1A)) {
        return; /* serviced, or a compare match the firmware does not use */
    }
    avr_cycle_count_t now = avr->cycle;
    if (!timer_alive(now)) {
        ticks_in_run = 0;
        first_tick = now;
    }
    ticks_in_run++;
    if (ticks_in_run == 1) {
        period = timer1_period();
    } else if (ticks_in_run == 2) {
        clock_running = 1;
        fprintf(out, "clock %llu %llu\n", (unsigned long long)cycles_to_ns(first_tick),
                (unsigned long long)cycles_to_ns(period));
    }
    last_tick = now;
    /* The compare interrupt is pending but not yet serviced: inputs set now are what this
     * sample's conversions read, and a marker edge raised now is serviced first (INT4 has the
     * higher priority), so the firmware gives it this sample's index. */
    apply_held();
}

static void check_timer_stopped(void)
{
    if (ticks_in_run && !timer_alive(avr->cycle)) {
        if (clock_running) {
            fprintf(out, "clock-stop %llu\n", (unsigned long long)cycles_to_ns(last_tick));
        }
        clock_running = 0;
        ticks_in_run = 0;
        apply_held();
    }
}

static void release_due(void)
{
    while (!queue_empty(&pending) && pending.items[pending.head].cycle <= avr->cycle) {
        event_t *e = &pending.items[pending.head++];
        if (timer_alive(avr->cycle)) {
            push(&held, e);
        } else {
            apply(e);
        }
    }
}

/* ---- input ------------------------------------------------------------------------------- */

static avr_cycle_count_t input_horizon; /* the latest time given on stdin */
static avr_cycle_count_t last_event_cycle;
static int input_eof;
static char line_buf[1 << 16];
static size_t line_len;

static void parse_line(char *line)
{
    char *save = NULL;
    char *tok = strtok_r(line, " \t\r\n", &save);
    if (!tok || tok[0] == '#') {
        return;
    }
    if (strcmp(tok, "q") == 0) {
        quit_requested = 1;
        return;
    }
    event_t e = {.marker = -1, .ina = -1};
    if (strcmp(tok, "now") == 0) {
        e.cycle = avr->cycle;
    } else {
        char *end;
        unsigned long long ns = strtoull(tok, &end, 10);
        if (*end) {
            fprintf(stderr, "h2iot_sim: stdin: bad time '%s' (ignored)\n", tok);
            return;
        }
        e.cycle = ns_to_cycles(ns);
    }
    if (e.cycle < last_event_cycle) {
        e.cycle = last_event_cycle; /* times must not go backwards */
    }
    last_event_cycle = e.cycle;
    if (e.cycle > input_horizon) {
        input_horizon = e.cycle;
    }
    tok = strtok_r(NULL, " \t\r\n", &save);
    if (!tok) {
        return; /* a bare time only moves the horizon */
    }
    if (strcmp(tok, "m") == 0) {
        tok = strtok_r(NULL, " \t\r\n", &save);
        if (!tok || (strcmp(tok, "0") != 0 && strcmp(tok, "1") != 0)) {
            fprintf(stderr, "h2iot_sim: stdin: marker level must be 0 or 1 (ignored)\n");
            return;
        }
        e.marker = (int8_t)(tok[0] - '0');
    } else if (strcmp(tok, "i") == 0) {
        char *n = strtok_r(NULL, " \t\r\n", &save);
        char *uv = strtok_r(NULL, " \t\r\n", &save);
        char *mv = strtok_r(NULL, " \t\r\n", &save);
        long k = n ? strtol(n, NULL, 10) : -1;
        if (k < 0 || k >= INA219_PARTS || !uv || !mv) {
            fprintf(stderr, "h2iot_sim: stdin: expected 'T i N UV MV', N 0..3 (ignored)\n");
            return;
        }
        double bus = strtod(mv, NULL);
        e.ina = (int8_t)k;
        e.shunt_uv = strtod(uv, NULL);
        e.bus_mv = bus < 0 ? 0 : bus > 32000 ? 32000 : bus;
    } else {
        for (; tok && e.n_inputs < ADC_INPUTS; tok = strtok_r(NULL, " \t\r\n", &save)) {
            long mv = strtol(tok, NULL, 10);
            e.mv[e.n_inputs++] = (uint16_t)(mv < 0 ? 0 : mv > 5000 ? 5000 : mv);
        }
    }
    push(&pending, &e);
}

/* Reads whatever stdin has (non-blocking) and queues its complete lines. */
static void read_input(void)
{
    while (!input_eof) {
        ssize_t n = read(0, line_buf + line_len, sizeof line_buf - line_len - 1);
        if (n == 0) {
            input_eof = 1;
            break;
        }
        if (n < 0) {
            if (errno != EAGAIN && errno != EINTR) {
                input_eof = 1;
            }
            break;
        }
        line_len += (size_t)n;
        line_buf[line_len] = '\0';
        char *start = line_buf;
        char *nl;
        while ((nl = memchr(start, '\n', line_len - (size_t)(start - line_buf))) != NULL) {
            *nl = '\0';
            parse_line(start);
            start = nl + 1;
        }
        line_len -= (size_t)(start - line_buf);
        memmove(line_buf, start, line_len);
        if (line_len == sizeof line_buf - 1) {
            fprintf(stderr, "h2iot_sim: stdin: line too long (dropped)\n");
            line_len = 0;
        }
    }
}

/* simavr 1.6 times every UART byte as if it carried a parity bit (11 bits for 8N1), which
 * makes the simulated link 10 % slower than the board's; the byte time is recomputed from the
 * firmware's own UART registers instead. */
static void fix_uart_byte_time(void)
{
    uint16_t ubrr = (uint16_t)(avr->data[UBRR0L_ADDR] | ((avr->data[UBRR0H_ADDR] & 0x0F) << 8));
    uint8_t c = avr->data[UCSR0C_ADDR];
    avr_cycle_count_t per_bit = (avr_cycle_count_t)(ubrr + 1u) * 8u;
    if (!(avr->data[UCSR0A_ADDR] & 0x02)) {
        per_bit *= 2; /* no U2X */
    }
    unsigned bits = 1u + 8u + ((c & 0x30) ? 1u : 0u) + ((c & 0x08) ? 2u : 1u);
    uart0->cycles_per_byte = per_bit * bits;
}

static avr_uart_t *find_uart0(void)
{
    for (avr_io_t *io = avr->io_port; io; io = io->next) {
        if (io->kind && strcmp(io->kind, "uart") == 0 && ((avr_uart_t *)io)->name == '0') {
            return (avr_uart_t *)io;
        }
    }
    return NULL;
}

/* ---- setup and main loop ------------------------------------------------------------------ */

static void on_signal(int sig)
{
    (void)sig;
    quit_requested = 1;
}

/* Time spent in the firmware's sleep is skipped, not slept: pacing is done by the main loop. */
static void no_sleep(avr_t *a, avr_cycle_count_t how_long)
{
    (void)a;
    (void)how_long;
}

static uint16_t pty_backlog(void)
{
    /* the part's device -> pty fifo; its reader is the part's own thread */
    uint16_t w = *(volatile uint16_t *)&pty.pty.in.write;
    uint16_t r = *(volatile uint16_t *)&pty.pty.in.read;
    return (uint16_t)((w - r) & (uart_pty_fifo_fifo_size - 1));
}

static void usage(void)
{
    fprintf(stderr,
            "usage: h2iot_sim [--fast] [--profile] [--vcc-mv MV] [--ina219 MASK] [--ina226 MASK] "
            "FIRMWARE.elf\n");
    exit(2);
}

int main(int argc, char **argv)
{
    int fast = 0;
    int profile = 0;
    uint32_t vcc_mv = 5000;
    const char *elf = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--fast") == 0) {
            fast = 1;
        } else if (strcmp(argv[i], "--profile") == 0) {
            profile = 1;
        } else if (strcmp(argv[i], "--vcc-mv") == 0 && i + 1 < argc) {
            vcc_mv = (uint32_t)strtoul(argv[++i], NULL, 10);
        } else if (strcmp(argv[i], "--ina219") == 0 && i + 1 < argc) {
            ina219_mask = (uint8_t)(strtoul(argv[++i], NULL, 0) & 0x0Fu);
        } else if (strcmp(argv[i], "--ina226") == 0 && i + 1 < argc) {
            ina226_mask = (uint8_t)(strtoul(argv[++i], NULL, 0) & 0x0Fu);
        } else if (argv[i][0] == '-' || elf) {
            usage();
        } else {
            elf = argv[i];
        }
    }
    if (!elf) {
        usage();
    }
    if (ina219_mask & ina226_mask) {
        fprintf(stderr, "h2iot_sim: --ina219 and --ina226 both put a chip at 0x%02x\n",
                0x40u + (unsigned)__builtin_ctz(ina219_mask & ina226_mask));
        return 2;
    }

    /* Our protocol owns stdout; simavr prints to stdout too, so its fd 1 becomes stderr. */
    int out_fd = dup(1);
    out = fdopen(out_fd, "w");
    setvbuf(out, NULL, _IOLBF, 0);
    dup2(2, 1);
    setvbuf(stdout, NULL, _IOLBF, 0);

    elf_firmware_t fw;
    memset(&fw, 0, sizeof fw);
    if (access(elf, R_OK) != 0 || elf_read_firmware(elf, &fw) != 0) {
        fprintf(stderr, "h2iot_sim: %s: cannot read the firmware ELF\n", elf);
        return 1;
    }
    /* Arduino ELFs carry no .mmcu section: the MCU and clock are set here. */
    strcpy(fw.mmcu, MCU);
    fw.frequency = F_CPU_HZ;
    fw.vcc = fw.avcc = fw.aref = vcc_mv;
    avr = avr_make_mcu_by_name(fw.mmcu);
    if (!avr) {
        fprintf(stderr, "h2iot_sim: simavr does not know %s\n", MCU);
        return 1;
    }
    avr_init(avr);
    avr_load_firmware(avr, &fw);
    avr->vcc = avr->avcc = avr->aref = vcc_mv;
    avr->sleep = no_sleep;
    avr->log = LOG_ERROR;

    uint32_t flags = 0;
    avr_ioctl(avr, AVR_IOCTL_UART_GET_FLAGS('0'), &flags);
    flags &= ~(uint32_t)AVR_UART_FLAG_POLL_SLEEP; /* else streaming runs at half speed */
    avr_ioctl(avr, AVR_IOCTL_UART_SET_FLAGS('0'), &flags);
    uart_pty_init(avr, &pty);
    uart_pty_connect(&pty, '0');

    for (int ch = 0; ch < ADC_INPUTS; ch++) {
        adc_irq[ch] = avr_io_getirq(avr, AVR_IOCTL_ADC_GETIRQ, ADC_IRQ_ADC0 + ch);
    }
    marker_irq = avr_io_getirq(avr, AVR_IOCTL_IOPORT_GETIRQ(MARKER_PORT), MARKER_BIT);
    /* edge-triggered use only: skip simavr's per-cycle polling of level-triggered pins */
    avr_extint_set_strict_lvl_trig(avr, MARKER_INT, 0);
    avr_irq_t *compa = avr_get_interrupt_irq(avr, TIMER1_COMPA_VECTOR);
    uart0 = find_uart0();
    if (!adc_irq[0] || !marker_irq || !compa || !uart0) {
        fprintf(stderr, "h2iot_sim: simavr lacks an ADC, port E, Timer1 IRQ or UART0\n");
        return 1;
    }
    avr_irq_register_notify(compa + AVR_INT_IRQ_PENDING, on_timer1_compa, NULL);
    for (uint8_t n = 0; n < INA219_PARTS; n++) {
        if (ina219_mask & (1u << n)) {
            ina219_part_init(avr, &ina219[n], (uint8_t)(0x40u + n));
            ina219_part_attach(&ina219[n]);
        }
        if (ina226_mask & (1u << n)) {
            ina226_part_init(avr, &ina226[n], (uint8_t)(0x40u + n));
            ina226_part_attach(&ina226[n]);
        }
    }
    for (size_t i = 0; profile && i < PROFILED; i++) {
        avr_irq_t *vec = avr_get_interrupt_irq(avr, profiled[i].vector);
        if (vec) {
            avr_irq_register_notify(vec + AVR_INT_IRQ_RUNNING, on_isr_running, (void *)i);
        }
    }

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    signal(SIGPIPE, SIG_IGN);
    fcntl(0, F_SETFL, fcntl(0, F_GETFL) | O_NONBLOCK);

    fprintf(out, "%s\n", pty.port[0].slavename);

    uint64_t wall_start = wall_ns();
    int status = 0;
    while (!quit_requested) {
        read_input();
        if (fast && input_eof && queue_empty(&pending)) {
            break;
        }
        avr_cycle_count_t limit = fast ? input_horizon : ns_to_cycles(wall_ns() - wall_start);
        if (pty_backlog() > PTY_HIGH_WATER) {
            uint64_t held_from = wall_ns();
            usleep(200);
            /* real time: the hold does not count, or the core would race to catch up after */
            wall_start += wall_ns() - held_from;
            continue;
        }
        if (avr->cycle >= limit) {
            /* wait for input (fast) or for wall time to catch up (real time) */
            struct pollfd pfd = {.fd = 0, .events = POLLIN};
            poll(&pfd, input_eof ? 0 : 1, fast ? 20 : 1);
            if (!fast && input_eof) {
                usleep(500);
            }
            continue;
        }
        fix_uart_byte_time();
        avr_cycle_count_t slice_end = avr->cycle + SLICE_CYCLES;
        if (slice_end > limit) {
            slice_end = limit;
        }
        while (avr->cycle < slice_end) {
            avr_cycle_count_t before = avr->cycle;
            int was_sleeping = avr->state == cpu_Sleeping;
            int state = avr_run(avr);
            if (was_sleeping) {
                sleeping_cycles += avr->cycle - before;
            }
            if (state == cpu_Done || state == cpu_Crashed) {
                fprintf(stderr, "h2iot_sim: the firmware %s at pc 0x%x\n",
                        state == cpu_Done ? "stopped" : "crashed", avr->pc);
                status = 1;
                quit_requested = 1;
                break;
            }
            if (!queue_empty(&pending) && pending.items[pending.head].cycle <= avr->cycle) {
                release_due();
            }
        }
        check_timer_stopped();
    }

    double sim_s = (double)cycles_to_ns(avr->cycle) / 1e9;
    double wall_s = (double)(wall_ns() - wall_start) / 1e9;
    fprintf(stderr,
            "h2iot_sim: simulated %.3f s in %.3f s wall (%.2fx real time); the AVR was busy "
            "%.1f %% of its cycles\n",
            sim_s, wall_s, wall_s > 0 ? sim_s / wall_s : 0.0,
            avr->cycle ? 100.0 * (double)(avr->cycle - sleeping_cycles) / (double)avr->cycle : 0.0);
    for (uint8_t n = 0; n < INA219_PARTS; n++) {
        if (ina219_mask & (1u << n)) {
            fprintf(stderr, "h2iot_sim: INA219 at 0x%02x: %llu register reads, %llu writes\n",
                    0x40u + n, (unsigned long long)ina219[n].twi.reads,
                    (unsigned long long)ina219[n].twi.writes);
        }
        if (ina226_mask & (1u << n)) {
            fprintf(stderr,
                    "h2iot_sim: INA226 at 0x%02x: %llu register reads, %llu writes, %llu results\n",
                    0x40u + n, (unsigned long long)ina226[n].twi.reads,
                    (unsigned long long)ina226[n].twi.writes, (unsigned long long)ina226[n].results);
        }
    }
    for (size_t i = 0; profile && i < PROFILED; i++) {
        fprintf(stderr, "h2iot_sim: %-20s %9llu calls, %6.1f cycles each, %5.1f %% of the cycles\n",
                profiled[i].name, (unsigned long long)isr_calls[i],
                isr_calls[i] ? (double)isr_cycles[i] / (double)isr_calls[i] : 0.0,
                avr->cycle ? 100.0 * (double)isr_cycles[i] / (double)avr->cycle : 0.0);
    }
    /* uart_pty_stop() can hang in its thread's select loop: cancel the thread instead. */
    pthread_cancel(pty.thread);
    pthread_join(pty.thread, NULL);
    fflush(out);
    return status;
}
