/* Platform glue for the portable core: the same sources build with avr-gcc and the host gcc. */
#ifndef H2_PORT_H
#define H2_PORT_H

#include <stdint.h>

#if defined(__AVR__)
#include <avr/io.h>
/* Shared 16/32-bit values between an ISR and the main loop need their access made atomic on
 * an 8-bit core; this restores the interrupt flag instead of forcing it on. */
#define H2_ATOMIC_BEGIN \
    {                   \
        uint8_t h2_sreg_ = SREG; \
        __asm__ __volatile__("cli" ::: "memory");
#define H2_ATOMIC_END \
        SREG = h2_sreg_;   \
        __asm__ __volatile__("" ::: "memory"); \
    }
#else
#define H2_ATOMIC_BEGIN {
#define H2_ATOMIC_END }
#endif

#endif
