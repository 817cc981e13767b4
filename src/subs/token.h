/*
 * token.h — callback and claim tokens (PROTOCOL.md §7.1–7.3, §12.9).
 *
 * A token is a compact HS256 JWT: base64url(header) "." base64url(claims)
 * "." base64url(HMAC-SHA256(key, first two parts)), with the claims
 * {"sub": subscription id, "gen": generation, "wid": wake id, "exp": Unix
 * seconds}. The key is the server's token key (keys.h), so tokens survive
 * restarts. A token is only ever accepted for the wake it was minted for:
 * the caller compares gen and wid with the subscription's current wake
 * (generation fencing), so the expiry is a backstop, not the main limit.
 */
#ifndef RN_SUBS_TOKEN_H
#define RN_SUBS_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "util/buf.h"

#define RN_TOKEN_KEY_LEN 32
#define RN_WAKE_ID_MAX 64 /* buffer size for a wake id and its terminator */

typedef enum { RN_TOKEN_VALID, RN_TOKEN_INVALID, RN_TOKEN_EXPIRED } rn_token_status;

/* Appends a token for (sub, gen, wake_id) that expires at exp_s. */
void rn_token_mint(const uint8_t key[RN_TOKEN_KEY_LEN], const char *sub, uint64_t gen,
                   const char *wake_id, int64_t exp_s, rn_buf *out);

/* Checks a token's form and signature and that it names subscription sub.
 * On RN_TOKEN_VALID (and on RN_TOKEN_EXPIRED) *gen and wake_id receive the
 * claims. RN_TOKEN_INVALID for anything malformed, a bad signature or
 * another subscription; RN_TOKEN_EXPIRED when now_s is past exp. */
rn_token_status rn_token_verify(const uint8_t key[RN_TOKEN_KEY_LEN], const char *token, size_t len,
                                const char *sub, int64_t now_s, uint64_t *gen,
                                char wake_id[RN_WAKE_ID_MAX]);

#endif
