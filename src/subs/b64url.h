/*
 * b64url.h — unpadded base64url (RFC 4648 §5), the encoding of JWK
 * members, JWT-style tokens and webhook signatures.
 */
#ifndef RN_SUBS_B64URL_H
#define RN_SUBS_B64URL_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

/* Appends the unpadded base64url text of data to out. */
void rn_b64url_append(rn_buf *out, const uint8_t *data, size_t len);

/* Decodes unpadded base64url text into out, which must hold len * 3 / 4
 * bytes. Returns the decoded length, or -1 for a character outside the
 * alphabet, padding, or an impossible length (len % 4 == 1), or non-zero
 * trailing bits (so every byte string has exactly one accepted text). */
long rn_b64url_decode(const char *s, size_t len, uint8_t *out);

#endif
