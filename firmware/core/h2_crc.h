/* CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor. */
#ifndef H2_CRC_H
#define H2_CRC_H

#include <stdint.h>

#define H2_CRC_INIT 0xFFFFu

#ifdef __cplusplus
extern "C" {
#endif

/* Byte-at-a-time form of the 0x1021 polynomial: no table, about 20 AVR cycles a byte, which
 * keeps a 270-byte SAMPLES frame well under the time the UART needs to send it. */
static inline uint16_t h2_crc_update(uint16_t crc, uint8_t byte)
{
    uint8_t x = (uint8_t)((crc >> 8) ^ byte);
    x ^= (uint8_t)(x >> 4);
    return (uint16_t)((crc << 8) ^ ((uint16_t)x << 12) ^ ((uint16_t)x << 5) ^ x);
}

uint16_t h2_crc(const uint8_t *data, uint16_t len);

#ifdef __cplusplus
}
#endif

#endif
