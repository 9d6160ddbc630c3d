/* CRC-16/CCITT-FALSE: poly 0x1021, init 0xFFFF, no reflection, no final xor. */
#ifndef H2_CRC_H
#define H2_CRC_H

#include <stdint.h>

#define H2_CRC_INIT 0xFFFFu

#ifdef __cplusplus
extern "C" {
#endif

uint16_t h2_crc_update(uint16_t crc, uint8_t byte);
uint16_t h2_crc(const uint8_t *data, uint16_t len);

#ifdef __cplusplus
}
#endif

#endif
