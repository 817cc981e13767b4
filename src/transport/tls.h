/*
 * tls.h — the server's TLS contexts: certificate and key loaded, checked and
 * reloaded (OpenSSL 3), and optionally the CA whose client certificates
 * the server asks for. Connections accepted on a listener with a context
 * (rn_http_config.tls, .peer_tls) speak TLS through the byte transport of
 * tls.c.
 */
#ifndef RN_TRANSPORT_TLS_H
#define RN_TRANSPORT_TLS_H

#include <stddef.h>

typedef struct rn_tls_context rn_tls_context;
struct x509_st;

/* What a context is made of (the strings are copied). */
typedef struct {
    const char *cert_path, *key_path;
    /* The settings that name them, for messages (NULL: --tls-cert and
     * --tls-key). */
    const char *cert_flag, *key_flag;
    /* NULL: no client certificate is asked for. Else a PEM file of CA
     * certificates: every client is asked for a certificate issued by one
     * of them (a client without one still connects), and the one it
     * presents is verified against them (rn_request_client_certificate,
     * http.h, tells a handler what it presented and whether it verified). */
    const char *client_ca_path;
    const char *client_ca_flag; /* its setting, for messages */
} rn_tls_files;

/* Loads a certificate chain (PEM, leaf first) and its private key (PEM),
 * and the client CA when given, into a new context: TLS 1.2 and 1.3,
 * forward-secret AEAD ciphers only, session tickets, ALPN from the
 * connection's protocols (conn.h). Returns NULL with a message naming the
 * setting, the file and the reason in err when a file cannot be read or
 * parsed, the certificate has expired or is not yet valid, or the key does
 * not match it. */
rn_tls_context *rn_tls_context_new(const rn_tls_files *files, char *err, size_t errcap);

/* Loads the same files again. On success new handshakes use them (and the
 * ticket keys carry over, so sessions still resume), while connections
 * already accepted keep what they started with; returns 0. On failure
 * nothing changes and err says why; returns -1. */
int rn_tls_context_reload(rn_tls_context *t, char *err, size_t errcap);

/* Frees the context (connections still open keep their own reference). */
void rn_tls_context_free(rn_tls_context *t);

/* Helpers for whoever loads certificates (here and cluster/peer_tls.c):
 * the reason of OpenSSL's last error on this thread ("unknown error" when
 * there is none); 0 when path can be opened for reading, else -1 with err
 * "cannot read FLAG PATH: why"; 0 when the certificate is within its
 * validity period, else -1 with err naming the setting, the file and the
 * date it expired or starts. */
const char *rn_tls_error_reason(void);
int rn_tls_check_readable(const char *flag, const char *path, char *err, size_t errcap);
int rn_tls_check_validity(const char *flag, const char *path, struct x509_st *leaf, char *err,
                          size_t errcap);

#endif
