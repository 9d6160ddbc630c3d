/* h2iot current meter: samples the ACS712 outputs on A0.. and INA219s or INA226s on the I2C
 * bus at a fixed rate and streams them in the framed protocol of firmware/PROTOCOL.md. All logic lives in the portable core
 * (firmware/core); this file is only the glue to the ATmega's timer, ADC, UART and marker pin.
 *
 * Timing: Timer1 in CTC mode fires once per sample; its interrupt starts the first conversion
 * and the ADC interrupt chains the remaining reads of that sample. (ADC auto-trigger from the
 * timer would save an interrupt, but simavr does not implement it and the firmware must run
 * there unchanged.) millis()/delay() are not used: Timer0's interrupt is switched off so it
 * adds no jitter to the sample interrupt. */
#include <avr/interrupt.h>
#include <avr/io.h>
#include <avr/sleep.h>
#include <util/twi.h>

#include "h2_ina219.h"
#include "h2_ina226.h"
#include "h2_meter.h"

#ifndef H2_BAUD
#define H2_BAUD 500000UL
#endif
#ifndef H2_FW_MAJOR
#define H2_FW_MAJOR 0
#define H2_FW_MINOR 0
#define H2_FW_PATCH 0
#endif

#if defined(__AVR_ATmega2560__)
#define H2_BOARD_NAME "mega2560"
#define H2_MCU_ID H2_MCU_ATMEGA2560
/* Arduino pin 2 = PE4 = INT4 on the Mega */
#define MARKER_VECT INT4_vect
#define MARKER_LEVEL() ((PINE >> PE4) & 1u)
static void marker_setup(void)
{
    DDRE &= (uint8_t)~_BV(PE4);
    PORTE |= _BV(PE4); /* pull-up: an unwired input reads high and makes no edges */
    EICRB = (uint8_t)((EICRB & ~(_BV(ISC41) | _BV(ISC40))) | _BV(ISC40)); /* any edge */
    EIFR = _BV(INTF4);
    EIMSK |= _BV(INT4);
}
#define UART_RX_VECT USART0_RX_vect
#define UART_UDRE_VECT USART0_UDRE_vect
#elif defined(__AVR_ATmega328P__)
#define H2_BOARD_NAME "uno"
#define H2_MCU_ID H2_MCU_ATMEGA328P
/* Arduino pin 2 = PD2 = INT0 on the Uno */
#define MARKER_VECT INT0_vect
#define MARKER_LEVEL() ((PIND >> PD2) & 1u)
static void marker_setup(void)
{
    DDRD &= (uint8_t)~_BV(PD2);
    PORTD |= _BV(PD2);
    EICRA = (uint8_t)((EICRA & ~(_BV(ISC01) | _BV(ISC00))) | _BV(ISC00));
    EIFR = _BV(INTF0);
    EIMSK |= _BV(INT0);
}
#define UART_RX_VECT USART_RX_vect
#define UART_UDRE_VECT USART_UDRE_vect
#else
#error "unsupported MCU: build for mega2560 or uno"
#endif

static const h2_board_t board = {
    H2_MCU_ID, F_CPU, 5000u, H2_BAUD, 2u, H2_BOARD_NAME,
    H2_FW_MAJOR, H2_FW_MINOR, H2_FW_PATCH,
};

static h2_meter_t meter;

/* AVcc reference (REFS0); the mux bits select A0..A7. */
#define ADMUX_BASE _BV(REFS0)
static uint8_t adcsra_run; /* ADEN | ADIE | prescaler bits, set at START */

static uint8_t prescaler_bits(uint8_t prescaler)
{
    switch (prescaler) {
    case 32:
        return _BV(ADPS2) | _BV(ADPS0);
    case 64:
        return _BV(ADPS2) | _BV(ADPS1);
    default:
        return _BV(ADPS2) | _BV(ADPS1) | _BV(ADPS0);
    }
}

static void i2c_configure(const h2_meter_t *m);

static void hw_start(h2_meter_t *m)
{
    i2c_configure(m);
    uint8_t divider;
    uint16_t ocr;
    h2_timer_config(F_CPU, m->rate_hz, &divider, &ocr);
    adcsra_run = (uint8_t)(_BV(ADEN) | _BV(ADIE) | prescaler_bits(m->adc_prescaler));
    ADCSRA = adcsra_run;
    ADMUX = (uint8_t)(ADMUX_BASE | (m->channel_count ? m->channels[0] : 0u));
    TCCR1B = 0;
    TCCR1A = 0;
    TCNT1 = 0;
    OCR1A = ocr;
    TIFR1 = _BV(OCF1A);
    TIMSK1 = _BV(OCIE1A);
    /* CTC on OCR1A; the first sample (index 0) is taken one period after START */
    TCCR1B = (uint8_t)(_BV(WGM12) | (divider == 1 ? _BV(CS10) : _BV(CS11)));
}

static void hw_stop(h2_meter_t *m)
{
    (void)m;
    TCCR1B = 0;
    TIMSK1 = 0;
    TIFR1 = _BV(OCF1A);
}

/* ---- I2C (TWI) master, polled from the main loop: INA219 / INA226 register access -----------
 * Mega: SDA = D20 (PD1), SCL = D21 (PD0). Uno: SDA = A4 (PC4), SCL = A5 (PC5). 400 kHz. */
#define TWI_HZ 400000UL
#define TWI_SPINS 4000u /* a byte takes 23 us at 400 kHz: give up after ~1 ms */

/* Completion comes from the TWI interrupt, not by polling TWINT: simavr 1.6 keeps TWINT set
 * once raised (it never clears it on the write of a one), so a polled master would run ahead
 * of the bus there. The interrupt turns itself off (a write of TWCR with TWINT = 0 leaves
 * TWINT alone) and the main loop waits for its flag. */
static volatile uint8_t twi_done;

ISR(TWI_vect)
{
    TWCR = _BV(TWEN);
    twi_done = 1;
}

static uint8_t twi_cmd(uint8_t bits)
{
    twi_done = 0;
    TWCR = (uint8_t)(_BV(TWINT) | _BV(TWEN) | _BV(TWIE) | bits);
    for (uint16_t n = 0; n < TWI_SPINS; n++) {
        if (twi_done) {
            return TW_STATUS;
        }
    }
    TWCR = _BV(TWEN);
    return 0xFFu;
}

static void twi_stop(void)
{
    TWCR = (uint8_t)(_BV(TWINT) | _BV(TWEN) | _BV(TWSTO));
    for (uint16_t n = 0; n < TWI_SPINS && (TWCR & _BV(TWSTO)); n++) {
    }
}

/* START and the address byte; 0 when the device acknowledged. */
static uint8_t twi_begin(uint8_t addr, uint8_t read)
{
    uint8_t st = twi_cmd(_BV(TWSTA));
    if (st != TW_START && st != TW_REP_START) {
        return 1;
    }
    TWDR = (uint8_t)(addr << 1 | read);
    st = twi_cmd(0);
    if (read) {
        return st != TW_MR_SLA_ACK;
    }
    /* simavr 1.6 reports an acknowledged SLA+W as 0x28 (data ACK), the silicon as 0x18; a
     * NACK is 0x20 (or 0x30 in simavr) either way */
    return st != TW_MT_SLA_ACK && st != TW_MT_DATA_ACK;
}

static uint8_t twi_write(uint8_t byte)
{
    TWDR = byte;
    return twi_cmd(0) != TW_MT_DATA_ACK;
}

/* Register pointer write, then (if `value` is NULL) nothing or (else) a 16-bit big-endian read;
 * `data` non-NULL writes those two bytes after the pointer. 0 on success. */
static uint8_t ina219_access(uint8_t addr, uint8_t reg, const uint8_t *data, uint16_t *value)
{
    uint8_t fail = twi_begin(addr, 0) || twi_write(reg);
    if (!fail && data) {
        fail = twi_write(data[0]) || twi_write(data[1]);
    }
    twi_stop();
    if (fail || !value) {
        return fail;
    }
    if (twi_begin(addr, 1)) {
        twi_stop();
        return 1;
    }
    uint8_t hi, lo;
    fail = twi_cmd(_BV(TWEA)) != TW_MR_DATA_ACK;
    hi = TWDR;
    fail = fail || twi_cmd(0) != TW_MR_DATA_NACK;
    lo = TWDR;
    twi_stop();
    *value = (uint16_t)(hi << 8 | lo);
    return fail;
}

/* Bit n: the chip at 0x40 + n failed its check at START (an INA226 with the wrong identity or
 * no conversion); its samples carry the failure marks until the next START. */
static uint8_t i2c_failed;

static uint8_t hw_read_ina219(h2_meter_t *m, uint8_t addr, uint16_t *shunt, uint16_t *bus)
{
    (void)m;
    if (i2c_failed & (uint8_t)(1u << (addr - H2_INA219_ADDR_BASE))) {
        return 1;
    }
    /* both chips keep the shunt voltage in 0x01 and the bus voltage in 0x02 */
    return ina219_access(addr, H2_INA219_REG_SHUNT, NULL, shunt) ||
           ina219_access(addr, H2_INA219_REG_BUS, NULL, bus);
}

static void twi_setup(void)
{
    /* the internal pull-ups (20-50 kOhm) are a fallback: breakout boards carry 4.7-10 kOhm */
    pinMode(SDA, INPUT_PULLUP);
    pinMode(SCL, INPUT_PULLUP);
    TWSR = 0; /* prescaler 1 */
    TWBR = (uint8_t)((F_CPU / TWI_HZ - 16UL) / 2UL);
    TWCR = _BV(TWEN);
}

/* Polls of the conversion-ready flag before an INA226 counts as not converting: about 150 ms on
 * the bus (and 50 ms in simavr), well beyond the 9 ms a configuration's result may take. */
#define INA226_READY_POLLS 1024u

/* An INA226 at START: it must name itself (a wrong chip at the address would be misread by the
 * host's scales), take the configuration for the sample rate, and finish a conversion under
 * it, so that sample 0 already holds a result of the new configuration (writing it clears
 * CVRF; a result of the previous one may have taken up to 9 ms). 0 when all of that held. */
static uint8_t ina226_configure(uint8_t addr, uint32_t rate_hz)
{
    uint16_t id = 0, die = 0;
    if (ina219_access(addr, H2_INA226_REG_MANUFACTURER, NULL, &id) ||
        id != H2_INA226_MANUFACTURER_ID || ina219_access(addr, H2_INA226_REG_DIE, NULL, &die) ||
        die != H2_INA226_DIE_ID) {
        return 1;
    }
    uint16_t config = h2_ina226_config_for_rate(rate_hz);
    const uint8_t bytes[2] = {(uint8_t)(config >> 8), (uint8_t)config};
    if (ina219_access(addr, H2_INA226_REG_CONFIG, bytes, NULL)) {
        return 1;
    }
    for (uint16_t n = 0; n < INA226_READY_POLLS; n++) {
        uint16_t flags = 0;
        if (ina219_access(addr, H2_INA226_REG_MASK_ENABLE, NULL, &flags)) {
            return 1;
        }
        if (flags & H2_INA226_CVRF) {
            return 0;
        }
    }
    return 1;
}

/* At START: each enabled INA219 gets the configuration of PROTOCOL.md (one that does not
 * answer shows up as failed samples, not here); each INA226 is checked and configured. */
static void i2c_configure(const h2_meter_t *m)
{
    static const uint8_t config[2] = {H2_INA219_CONFIG >> 8, H2_INA219_CONFIG & 0xFFu};
    i2c_failed = 0;
    for (uint8_t i = 0; i < m->i2c_count; i++) {
        uint8_t addr = m->i2c_addrs[i];
        uint8_t n = (uint8_t)(addr - H2_INA219_ADDR_BASE);
        if (m->i2c_mask & (uint8_t)(1u << (n + H2_I2C_CHANNELS))) {
            if (ina226_configure(addr, m->rate_hz)) {
                i2c_failed |= (uint8_t)(1u << n);
            }
        } else {
            (void)ina219_access(addr, H2_INA219_REG_CONFIG, config, NULL);
        }
    }
}

static const h2_hooks_t hooks = {hw_start, hw_stop, hw_read_ina219};

ISR(TIMER1_COMPA_vect)
{
    uint8_t mux = h2_meter_isr_first_input(&meter);
    if (mux != H2_ADC_NONE) {
        ADMUX = (uint8_t)(ADMUX_BASE | mux);
        ADCSRA = (uint8_t)(adcsra_run | _BV(ADSC));
    }
    h2_meter_isr_tick(&meter);
}

ISR(ADC_vect)
{
    /* Read the result before touching the mux: simavr samples the input when ADCL is read. */
    uint16_t value = ADC;
    uint8_t mux = h2_meter_isr_next_input(&meter);
    if (mux != H2_ADC_NONE) {
        ADMUX = (uint8_t)(ADMUX_BASE | mux);
        ADCSRA = (uint8_t)(adcsra_run | _BV(ADSC));
    }
    h2_meter_isr_adc(&meter, value);
}

ISR(MARKER_VECT)
{
    h2_meter_isr_marker(&meter, MARKER_LEVEL());
}

ISR(UART_RX_VECT)
{
    uint8_t status = UCSR0A;
    uint8_t byte = UDR0;
    if (!(status & (_BV(FE0) | _BV(DOR0)))) {
        h2_meter_isr_rx(&meter, byte);
    }
}

ISR(UART_UDRE_VECT)
{
    uint8_t byte;
    if (h2_meter_isr_tx(&meter, &byte)) {
        UDR0 = byte;
    } else {
        UCSR0B &= (uint8_t)~_BV(UDRIE0);
    }
}

static void uart_setup(void)
{
    /* double speed: 500000 and 1000000 baud are exact at 16 MHz (UBRR 3 and 1) */
    UCSR0A = _BV(U2X0);
    UBRR0 = (uint16_t)((F_CPU / 4UL / H2_BAUD - 1UL) / 2UL);
    UCSR0C = _BV(UCSZ01) | _BV(UCSZ00);
    UCSR0B = _BV(RXEN0) | _BV(TXEN0) | _BV(RXCIE0);
}

void setup(void)
{
    cli();
    TIMSK0 = 0; /* no millis(): see the note at the top */
    /* init() set Timer1 up for analogWrite(); the sample timer starts only at START. */
    TCCR1A = 0;
    TCCR1B = 0;
    TIMSK1 = 0;
    h2_meter_init(&meter, &board, &hooks);
    uart_setup();
    twi_setup();
    /* One throw-away conversion: the first after enabling the ADC takes 25 ADC clocks. */
    ADMUX = ADMUX_BASE;
    ADCSRA = _BV(ADEN) | _BV(ADSC) | _BV(ADPS2) | _BV(ADPS1) | _BV(ADPS0);
    while (ADCSRA & _BV(ADSC)) {
    }
    marker_setup();
    set_sleep_mode(SLEEP_MODE_IDLE);
    sei();
}

void loop(void)
{
    /* Sleep until an interrupt brings work: most wake-ups (a UART byte sent, a conversion
     * done) bring none, and must cost only this check. */
    cli();
    if (!h2_meter_has_work(&meter)) {
        sleep_enable();
        sei();
        sleep_cpu();
        sleep_disable();
        return;
    }
    sei();
    if (h2_meter_poll(&meter)) {
        UCSR0B |= _BV(UDRIE0); /* the UDRE interrupt turns itself off when the ring runs dry */
    }
}
