/*
 * tls.h — the server's TLS context: certificate and key loaded, checked and
 * reloaded (OpenSSL 3). Connections accepted while a context is configured
 * (rn_http_config.tls) speak TLS through the byte transport of tls.c.
 */
#ifndef RN_TRANSPORT_TLS_H
#define RN_TRANSPORT_TLS_H

#include <stddef.h>

typedef struct rn_tls_context rn_tls_context;

/* Loads a certificate chain (PEM, leaf first) and its private key (PEM)
 * into a new context: TLS 1.2 and 1.3, forward-secret AEAD ciphers only,
 * session tickets, ALPN from the connection's protocols (conn.h). Returns
 * NULL with a message naming the file and the reason in err when a file
 * cannot be read or parsed, the certificate has expired or is not yet
 * valid, or the key does not match it. */
rn_tls_context *rn_tls_context_new(const char *cert_path, const char *key_path, char *err,
                                   size_t errcap);

/* Loads the same files again. On success new handshakes use them (and the
 * ticket keys carry over, so sessions still resume), while connections
 * already accepted keep what they started with; returns 0. On failure
 * nothing changes and err says why; returns -1. */
int rn_tls_context_reload(rn_tls_context *t, char *err, size_t errcap);

/* Frees the context (connections still open keep their own reference). */
void rn_tls_context_free(rn_tls_context *t);

#endif
