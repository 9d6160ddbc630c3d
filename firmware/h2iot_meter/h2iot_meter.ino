/* h2iot current meter: samples the ACS712 outputs on A0.. at a fixed rate and streams them in
 * the framed protocol of firmware/PROTOCOL.md. All logic lives in the portable core
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

static void hw_start(h2_meter_t *m)
{
    uint8_t divider;
    uint16_t ocr;
    h2_timer_config(F_CPU, m->rate_hz, &divider, &ocr);
    adcsra_run = (uint8_t)(_BV(ADEN) | _BV(ADIE) | prescaler_bits(m->adc_prescaler));
    ADCSRA = adcsra_run;
    ADMUX = (uint8_t)(ADMUX_BASE | m->channels[0]);
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

static const h2_hooks_t hooks = {hw_start, hw_stop, NULL};

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
