#include "h2_crc.h"

uint16_t h2_crc(const uint8_t *data, uint16_t len)
{
    uint16_t crc = H2_CRC_INIT;
    while (len--) {
        crc = h2_crc_update(crc, *data++);
    }
    return crc;
}
