/*
 * siphash.h — SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed 64-bit
 * hash of a byte string. Under a secret random key an attacker cannot
 * choose strings that collide, so tables keyed by names clients pick use
 * it (util/map.c); under a fixed key it is an ordinary deterministic hash.
 */
#ifndef RN_SIPHASH_H
#define RN_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

/* SipHash-2-4 of data under the 128-bit key (its bytes k0 then k1, each
 * little-endian, as the reference implementation reads them). */
uint64_t rn_siphash24(const uint8_t key[16], const void *data, size_t len);

#endif
