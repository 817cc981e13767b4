/*
 * peer_tls.c — the peer certificates' context and the node id a certificate
 * binds. See peer_tls.h.
 */
#include "consensus/peer_tls.h"

#include <assert.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "transport/tls.h"
#include "util/buf.h"

struct rn_peer_tls {
    SSL_CTX *ctx;
    char *cert_path, *key_path, *ca_path;
    uint64_t self_id;
};

int rn_peer_cert_node_id(X509 *cert, uint64_t *id) {
    assert(cert != NULL && id != NULL);
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    static const char prefix[] = RN_PEER_URI_PREFIX;
    size_t pl = sizeof prefix - 1;
    int found = 0;
    for (int i = 0; names && i < sk_GENERAL_NAME_num(names) && found >= 0; i++) {
        const GENERAL_NAME *n = sk_GENERAL_NAME_value(names, i);
        if (n->type != GEN_URI)
            continue;
        const unsigned char *p = ASN1_STRING_get0_data(n->d.uniformResourceIdentifier);
        size_t len = (size_t)ASN1_STRING_length(n->d.uniformResourceIdentifier);
        if (len < pl || memcmp(p, prefix, pl) != 0)
            continue;
        uint64_t v = 0;
        size_t digits = len - pl;
        bool ok = found == 0 && digits >= 1 && digits <= 3 && p[pl] != '0';
        for (size_t k = pl; ok && k < len; k++) {
            ok = p[k] >= '0' && p[k] <= '9';
            v = v * 10 + (uint64_t)(p[k] - '0');
        }
        if (!ok || v > 255) {
            found = -1; /* a second id, or one that is no node id */
            break;
        }
        *id = v;
        found = 1;
    }
    GENERAL_NAMES_free(names);
    return found;
}

/* The node's own certificate: within its validity period, issued by the
 * CA, naming self_id. */
static int check_own(SSL_CTX *ctx, const char *cert_path, const char *ca_path, uint64_t self_id,
                     char *err, size_t errcap) {
    X509 *leaf = SSL_CTX_get0_certificate(ctx);
    if (rn_tls_check_validity("--peer-cert", cert_path, leaf, err, errcap) < 0)
        return -1;
    STACK_OF(X509) *chain = NULL;
    SSL_CTX_get0_chain_certs(ctx, &chain);
    X509_STORE_CTX *sc = X509_STORE_CTX_new();
    int verified = sc && X509_STORE_CTX_init(sc, SSL_CTX_get_cert_store(ctx), leaf, chain) == 1 &&
                   X509_verify_cert(sc) == 1;
    const char *why = sc ? X509_verify_cert_error_string(X509_STORE_CTX_get_error(sc)) : "memory";
    if (!verified)
        snprintf(err, errcap,
                 "the certificate in --peer-cert %s does not verify against --peer-ca %s: %s",
                 cert_path, ca_path, why);
    X509_STORE_CTX_free(sc);
    if (!verified)
        return -1;
    uint64_t id = 0;
    int named = rn_peer_cert_node_id(leaf, &id);
    if (named != 1 || id != self_id) {
        if (named == 1)
            snprintf(err, errcap,
                     "the certificate in --peer-cert %s is node %llu's, and this node is %llu "
                     "(--node-id)",
                     cert_path, (unsigned long long)id, (unsigned long long)self_id);
        else
            snprintf(err, errcap,
                     "the certificate in --peer-cert %s must name this node as exactly one URI "
                     "subject alternative name " RN_PEER_URI_PREFIX "%llu",
                     cert_path, (unsigned long long)self_id);
        return -1;
    }
    return 0;
}

static SSL_CTX *load(const char *cert, const char *key, const char *ca, uint64_t self_id, char *err,
                     size_t errcap) {
    if (rn_tls_check_readable("--peer-cert", cert, err, errcap) ||
        rn_tls_check_readable("--peer-key", key, err, errcap) ||
        rn_tls_check_readable("--peer-ca", ca, err, errcap))
        return NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_method());
    if (!ctx) {
        snprintf(err, errcap, "peer TLS: %s", rn_tls_error_reason());
        return NULL;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        snprintf(err, errcap, "--peer-cert %s: not a PEM certificate chain (%s)", cert,
                 rn_tls_error_reason());
    else if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 ||
             SSL_CTX_check_private_key(ctx) != 1)
        snprintf(err, errcap,
                 "--peer-key %s: not a PEM private key, or not the key of --peer-cert %s (%s)", key,
                 cert, rn_tls_error_reason());
    else if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1)
        snprintf(err, errcap, "--peer-ca %s: no PEM CA certificate (%s)", ca,
                 rn_tls_error_reason());
    else if (check_own(ctx, cert, ca, self_id, err, errcap) == 0) {
        ERR_clear_error();
        return ctx;
    }
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return NULL;
}

rn_peer_tls *rn_peer_tls_new(const char *cert_path, const char *key_path, const char *ca_path,
                             uint64_t self_id, char *err, size_t errcap) {
    assert(cert_path && key_path && ca_path && self_id > 0);
    SSL_CTX *ctx = load(cert_path, key_path, ca_path, self_id, err, errcap);
    if (!ctx)
        return NULL;
    rn_peer_tls *t = rn_xcalloc(1, sizeof *t);
    t->ctx = ctx;
    t->cert_path = rn_xstrdup(cert_path);
    t->key_path = rn_xstrdup(key_path);
    t->ca_path = rn_xstrdup(ca_path);
    t->self_id = self_id;
    return t;
}

int rn_peer_tls_reload(rn_peer_tls *t, char *err, size_t errcap) {
    assert(t != NULL);
    SSL_CTX *ctx = load(t->cert_path, t->key_path, t->ca_path, t->self_id, err, errcap);
    if (!ctx)
        return -1;
    SSL_CTX_free(t->ctx); /* connections made with it hold their own reference */
    t->ctx = ctx;
    return 0;
}

SSL_CTX *rn_peer_tls_ctx(const rn_peer_tls *t) {
    assert(t != NULL);
    return t->ctx;
}

void rn_peer_tls_free(rn_peer_tls *t) {
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t->cert_path);
    free(t->key_path);
    free(t->ca_path);
    free(t);
}
