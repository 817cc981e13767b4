/*
 * crc32c.h — CRC-32C (Castagnoli), the checksum that frames log records.
 * Uses the SSE4.2 crc32 instruction when the CPU has it, else slicing-by-8.
 */
#ifndef RN_CRC32C_H
#define RN_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Extends crc (start with 0) over data; returns the new CRC. Any thread,
 * the first call included. */
uint32_t rn_crc32c(uint32_t crc, const void *data, size_t len);
/* The same function on the table path whatever the CPU (the tests compare
 * it with the hardware path rn_crc32c takes where there is one). */
uint32_t rn_crc32c_portable(uint32_t crc, const void *data, size_t len);

#endif
