/*
 * keys.h — the server's subscription secrets: the Ed25519 webhook signing
 * key (PROTOCOL.md §6.5, §7.1) and the HMAC key of callback tokens.
 *
 * Both are generated with OpenSSL on first start and kept in the
 * subscriptions directory as 0600 files (webhook-signing-key.pem, PKCS#8;
 * token.key, 32 raw bytes), written atomically, so signatures and tokens
 * stay valid across restarts. The key id is "ds_" followed by the RFC 7638
 * JWK thumbprint of the public key, so it is stable for the key's lifetime
 * and derived from the key material.
 */
#ifndef RN_SUBS_KEYS_H
#define RN_SUBS_KEYS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "subs/token.h"
#include "util/buf.h"

typedef struct rn_subs_keys rn_subs_keys;

/* Loads the keys from dir, creating any that is missing. Returns NULL with
 * a message in err on failure (unreadable, corrupt, not Ed25519). */
rn_subs_keys *rn_subs_keys_open(const char *dir, char *err, size_t errcap);
void rn_subs_keys_free(rn_subs_keys *k);

/* Cluster mode: the keys travel in the replicated subscriptions' state so
 * that every node signs and checks with the same ones. rn_subs_keys_json
 * renders both secrets ({"signing": base64url Ed25519 private key,
 * "token": base64url token key}); rn_subs_keys_from_json reads them back,
 * NULL when o is not such an object. */
json_t *rn_subs_keys_json(const rn_subs_keys *k);
rn_subs_keys *rn_subs_keys_from_json(const json_t *o);

/* The signing key's id ("ds_<thumbprint>"). */
const char *rn_subs_keys_kid(const rn_subs_keys *k);
/* The HMAC key for callback and claim tokens. */
const uint8_t *rn_subs_keys_token_key(const rn_subs_keys *k);
/* Appends the JWK Set document with the public signing key. */
void rn_subs_keys_jwks(const rn_subs_keys *k, rn_buf *out);
/* Appends a Webhook-Signature value for body sent at Unix time ts:
 * "t=<ts>,kid=<kid>,ed25519=<base64url Ed25519 signature of "<ts>.<body>">". */
void rn_subs_keys_sign_webhook(const rn_subs_keys *k, int64_t ts, const uint8_t *body, size_t len,
                               rn_buf *out);

#endif
