/* Wire protocol version 2 constants; firmware/PROTOCOL.md is the normative text. */
#ifndef H2_PROTOCOL_H
#define H2_PROTOCOL_H

#define H2_PROTOCOL_VERSION 2u

#define H2_SYNC0 0xA5u
#define H2_SYNC1 0x5Au
#define H2_HEADER_LEN 7u   /* sync(2) length(2) type(1) seq(2) */
#define H2_OVERHEAD 9u     /* header + crc(2) */
#define H2_MAX_PAYLOAD 1024u

/* device -> host */
#define H2_T_INFO 0x01u
#define H2_T_SAMPLES 0x02u
#define H2_T_MARKER 0x03u
#define H2_T_STATUS 0x04u
#define H2_T_ACK 0x05u

/* host -> device */
#define H2_C_IDENTIFY 0x81u
#define H2_C_START 0x82u
#define H2_C_STOP 0x83u
#define H2_C_SET_RATE 0x84u
#define H2_C_SET_CHANNELS 0x85u
#define H2_C_GET_STATUS 0x86u
#define H2_C_SET_OVERSAMPLING 0x87u
#define H2_C_SET_I2C_CHANNELS 0x88u

/* ACK results */
#define H2_R_OK 0u
#define H2_R_BAD_LENGTH 1u
#define H2_R_BAD_VALUE 2u
#define H2_R_UNKNOWN 3u
#define H2_R_BUSY 4u

#define H2_INFO_FIXED_LEN 24u
#define H2_BOARD_NAME_MAX 16u
#define H2_SAMPLES_HEADER_LEN 5u
#define H2_MARKER_LEN 6u
#define H2_STATUS_LEN 15u
#define H2_ACK_LEN 4u

#define H2_MCU_ATMEGA2560 1u
#define H2_MCU_ATMEGA328P 2u

#define H2_RATE_MIN_HZ 100u
#define H2_RATE_MAX_HZ 10000u
#define H2_CHANNELS_MAX 4u /* analog inputs and I2C monitors together */
#define H2_COLUMNS_MAX 8u  /* values per sample: 1 per analog input, 2 per INA219 or INA226 */
#define H2_I2C_CHANNELS 4u /* INA219s or INA226s at I2C addresses 0x40 .. 0x43 */
#define H2_I2C_CHIPS 0x0Fu /* I2C mask bits 0..3: the chip at 0x40 + n is sampled; bit 4 + n: it
                              is an INA226 (else an INA219) */
#define H2_OVERSAMPLING_MAX 16u

#endif
