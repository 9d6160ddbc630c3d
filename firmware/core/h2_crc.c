#include "h2_crc.h"

/* Byte-at-a-time form of the 0x1021 polynomial: no table, about 20 AVR cycles a byte, which
 * keeps a 270-byte SAMPLES frame well under the time the UART needs to send it. */
uint16_t h2_crc_update(uint16_t crc, uint8_t byte)
{
    uint8_t x = (uint8_t)((crc >> 8) ^ byte);
    x ^= (uint8_t)(x >> 4);
    return (uint16_t)((crc << 8) ^ ((uint16_t)x << 12) ^ ((uint16_t)x << 5) ^ x);
}

uint16_t h2_crc(const uint8_t *data, uint16_t len)
{
    uint16_t crc = H2_CRC_INIT;
    while (len--) {
        crc = h2_crc_update(crc, *data++);
    }
    return crc;
}
