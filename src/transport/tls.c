/*
 * tls.c — TLS (OpenSSL 3) as a byte transport (rn_byte_transport, conn.h)
 * and the server's TLS context (tls.h): certificate and key, their checks
 * at start, their reload.
 *
 * Each connection's SSL object works on two memory BIOs, so OpenSSL never
 * touches the socket and nothing blocks the loop: ciphertext read from the
 * socket goes into the read BIO, the handshake advances as far as it can,
 * and plaintext is SSL_read into c->input; whatever OpenSSL writes
 * (handshake, records, alerts, close_notify) is taken from the write BIO at
 * once and written with uv_write. The protocol is attached once the
 * handshake completes, by the ALPN name agreed (conn_attach_protocol).
 *
 * Memory per connection: the SSL object (its record buffers released while
 * idle: SSL_MODE_RELEASE_BUFFERS), at most one partial record in the read
 * BIO (ciphertext is read into one buffer of the loop thread and handed
 * over at once), and the ciphertext of queued writes, which counts in the
 * answer budget (answer_bytes_held) and in queued(), so the send watch and
 * write backpressure see it as they see a cleartext connection's queue.
 * try_write encrypts and offers the records to the socket at once when
 * nothing is queued on it, so an answer the socket takes whole costs no
 * queued write, callback or send watch (as in cleartext); records it does
 * not take whole stay in the write BIO for the write that follows. Writes
 * are never collected by a batch (direct_sends 0): the fan-out threads
 * would send plaintext.
 *
 * A first byte that cannot start a TLS handshake record is plain text:
 * an HTTP request (a capital letter) is answered 400, anything else closes
 * the connection.
 */
#include "transport/tls.h"
#include "transport/conn.h"

#include <assert.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READ_BYTES 65536    /* ciphertext read from the socket at once */
#define RECORD_BYTES 16384  /* the most plaintext one record carries */
#define TLS_HANDSHAKE 0x16  /* the content type of a record starting a handshake */
#define TICKET_KEY_BYTES 80 /* SSL_CTRL_GET_TLSEXT_TICKET_KEYS: name, HMAC and AES keys */

/* TLS 1.2 suites: ECDHE with an AEAD only (TLS 1.3's defaults are all AEAD). */
#define TLS12_CIPHERS                                                                              \
    "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"     \
    "ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

struct rn_tls_context {
    SSL_CTX *ctx; /* for new handshakes; an SSL holds a reference to its own */
    char *cert_path, *key_path, *cert_flag, *key_flag, *client_ca_path, *client_ca_flag;
};

/* The TLS state of one connection (c->bytes_state). */
typedef struct {
    SSL *ssl;
    BIO *rbio, *wbio; /* ciphertext from the client, ciphertext to it (owned by ssl) */
    int started;      /* the first byte was a handshake record */
    int established;  /* the handshake completed and the protocol is attached */
    /* try_write encrypted a write the socket did not take whole: the write
     * BIO holds its records, of which the socket took the first held_sent
     * bytes, and the write of the same bytes that follows sends the rest */
    int held;
    size_t held_sent;
} tls_conn;

/* Ciphertext (or, for a refused plain-text client, a plain answer) handed
 * to uv_write, with the write it completes: the caller's (write), or none
 * for the transport's own bytes. */
typedef struct {
    uv_write_t w;
    rn_conn *conn;
    uv_write_t *caller;
    uv_write_cb cb;
    int pending; /* counted in c->pending_writes (the last bytes before conn_end) */
    size_t len;
    char bytes[];
} cipher_write;

static _Thread_local char read_buf[READ_BYTES];    /* ciphertext read */
static _Thread_local char plain_buf[RECORD_BYTES]; /* plaintext decrypted */

static tls_conn *tls_of(const rn_conn *c) {
    return c->bytes_state;
}

/* ---- writing ---- */

static void on_cipher_written(uv_write_t *w, int status) {
    cipher_write *cw = (cipher_write *)w;
    rn_conn *c = cw->conn;
    c->srv->answer_bytes_held -= cw->len;
    if (cw->caller)
        cw->cb(cw->caller, status);
    else if (cw->pending) {
        c->pending_writes--;
        conn_finish_when_written(c);
    } else if (status < 0)
        conn_close(c);
    free(cw);
}

/* A write of len bytes (to be filled in) completing caller with cb once
 * they are out (caller NULL: the transport's own bytes; pending: counted
 * as a pending write of c). */
static cipher_write *cipher_write_new(rn_conn *c, size_t len, uv_write_t *caller, uv_write_cb cb,
                                      int pending) {
    cipher_write *cw = rn_xmalloc(sizeof *cw + len);
    *cw = (cipher_write){.conn = c, .caller = caller, .cb = cb, .pending = pending, .len = len};
    return cw;
}

/* Queues cw's bytes on the socket behind everything written before; they
 * count in the answer budget until written. Returns 0, or a libuv error
 * (cw freed, its callback not run). */
static int cipher_write_queue(cipher_write *cw) {
    rn_conn *c = cw->conn;
    uv_buf_t buf = uv_buf_init(cw->bytes, (unsigned)cw->len);
    int rc = uv_write(&cw->w, (uv_stream_t *)&c->tcp, &buf, 1, on_cipher_written);
    if (rc < 0) {
        free(cw);
        return rc;
    }
    c->srv->answer_bytes_held += cw->len;
    if (cw->pending)
        c->pending_writes++;
    return 0;
}

/* Sends what OpenSSL wrote into the write BIO (caller, cb and pending as
 * cipher_write_new: with any of them, a write is made even when there is
 * nothing). Returns 0 or a libuv error. */
static int flush_output(rn_conn *c, uv_write_t *caller, uv_write_cb cb, int pending) {
    tls_conn *t = tls_of(c);
    assert(!t->held);
    size_t len = BIO_ctrl_pending(t->wbio);
    if (len == 0 && !caller && !pending)
        return 0;
    cipher_write *cw = cipher_write_new(c, len, caller, cb, pending);
    int got = len ? BIO_read(t->wbio, cw->bytes, (int)len) : 0;
    assert(got == (int)len);
    (void)got;
    return cipher_write_queue(cw);
}

/* Ends c once the alert OpenSSL may have written is out. */
static void fail(rn_conn *c) {
    ERR_clear_error();
    if (flush_output(c, NULL, NULL, 1) < 0) {
        conn_close(c);
        return;
    }
    conn_end(c);
}

static const char PLAIN_REFUSAL[] = "HTTP/1.1 400 Bad Request\r\n"
                                    "Content-Type: text/plain\r\n"
                                    "Content-Length: 41\r\n"
                                    "Connection: close\r\n"
                                    "\r\n"
                                    "This port speaks TLS: use https:// URLs.\n";

/* A client sent plain text to the TLS port: an HTTP request is answered
 * 400 (the rest of its bytes are dropped by the lingering close), anything
 * else is closed. */
static void refuse_plain(rn_conn *c, unsigned char first) {
    if (first < 'A' || first > 'Z') {
        conn_close(c);
        return;
    }
    cipher_write *cw = cipher_write_new(c, sizeof PLAIN_REFUSAL - 1, NULL, NULL, 1);
    memcpy(cw->bytes, PLAIN_REFUSAL, cw->len);
    if (cipher_write_queue(cw) < 0) {
        conn_close(c);
        return;
    }
    conn_end(c);
}

/* ---- reading ---- */

/* Advances the handshake with the ciphertext received; attaches the
 * protocol ALPN chose once it completes. Returns 1 when established, 0
 * while it needs more bytes, -1 when the connection was ended. */
static int handshake(rn_conn *c) {
    tls_conn *t = tls_of(c);
    int r = SSL_do_handshake(t->ssl);
    if (r != 1) {
        if (SSL_get_error(t->ssl, r) == SSL_ERROR_WANT_READ) {
            if (flush_output(c, NULL, NULL, 0) < 0)
                conn_close(c);
            return c->closed ? -1 : 0;
        }
        fail(c);
        return -1;
    }
    if (flush_output(c, NULL, NULL, 0) < 0) {
        conn_close(c);
        return -1;
    }
    const unsigned char *alpn = NULL;
    unsigned alpn_len = 0;
    SSL_get0_alpn_selected(t->ssl, &alpn, &alpn_len);
    t->established = 1;
    conn_attach_protocol(c, alpn, alpn_len);
    return c->closed ? -1 : 1;
}

/* Decrypts what the read BIO holds into c->input and reports it. The
 * plaintext lands in a buffer of the loop thread first and is appended, so
 * the input grows by what arrived, not by a record's worth per read. */
static void deliver(rn_conn *c) {
    tls_conn *t = tls_of(c);
    size_t got = 0;
    int end = 0;
    for (;;) {
        int r = SSL_read(t->ssl, plain_buf, sizeof plain_buf);
        if (r > 0) { /* past c->input.len: conn_received counts them in */
            rn_buf_reserve(&c->input, got + (size_t)r);
            memcpy(c->input.data + c->input.len + got, plain_buf, (size_t)r);
            got += (size_t)r;
            if (!SSL_has_pending(t->ssl) && BIO_ctrl_pending(t->rbio) == 0)
                break; /* nothing left to decrypt: spare the call that would say so */
            continue;
        }
        int e = SSL_get_error(t->ssl, r);
        if (e == SSL_ERROR_ZERO_RETURN) /* close_notify: the client's input ended */
            end = 1;
        else if (e != SSL_ERROR_WANT_READ) {
            fail(c);
            return;
        }
        break;
    }
    if (flush_output(c, NULL, NULL, 0) < 0) { /* tickets, key updates */
        conn_close(c);
        return;
    }
    if (got)
        conn_received(c, (ssize_t)got);
    if (end && !c->closed && c->reading)
        conn_received(c, UV_EOF);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    (void)h;
    (void)suggested;
    *buf = uv_buf_init(read_buf, sizeof read_buf);
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
    rn_conn *c = s->data;
    tls_conn *t = tls_of(c);
    if (n == 0)
        return;
    if (n < 0 || c->lingering) { /* EOF, an error, or input dropped while lingering */
        conn_received(c, n < 0 ? n : 0);
        return;
    }
    if (!t->started) {
        unsigned char first = (unsigned char)buf->base[0];
        if (first != TLS_HANDSHAKE) {
            refuse_plain(c, first);
            return;
        }
        t->started = 1;
    }
    BIO_write(t->rbio, buf->base, (int)n);
    if (!t->established && handshake(c) <= 0)
        return;
    deliver(c);
}

/* ---- the byte transport ---- */

static int tls_read_start(rn_conn *c) {
    return uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
}

static void tls_read_stop(rn_conn *c) {
    uv_read_stop((uv_stream_t *)&c->tcp);
}

/* Encrypts bufs[0..n) into the write BIO. Returns 0, or UV_EPROTO. */
static int encrypt_bufs(tls_conn *t, const uv_buf_t *bufs, unsigned n) {
    for (unsigned i = 0; i < n; i++)
        if (bufs[i].len && SSL_write(t->ssl, bufs[i].base, (int)bufs[i].len) <= 0) {
            ERR_clear_error();
            return UV_EPROTO;
        }
    return 0;
}

/* Drops the first n bytes the write BIO holds (the socket took them),
 * read into read_buf, which is free once on_read gave it to the BIO. */
static void drop_output(tls_conn *t, size_t n) {
    while (n > 0) {
        int k = BIO_read(t->wbio, read_buf, (int)(n < sizeof read_buf ? n : sizeof read_buf));
        assert(k > 0);
        n -= (size_t)k;
    }
}

/* Encrypts the bytes and offers their records to the socket at once (when
 * nothing is queued on it): taken whole, the write is done; otherwise what
 * was sent is remembered, 0 is returned, and the write of the same bytes
 * that follows (write.c always makes it) queues the rest of the records. */
static size_t tls_try_write(rn_conn *c, const uv_buf_t *bufs, unsigned n) {
    tls_conn *t = tls_of(c);
    assert(t->established && !t->held && BIO_ctrl_pending(t->wbio) == 0);
    if (uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp) > 0 ||
        encrypt_bufs(t, bufs, n) < 0)
        return 0;
    char *records;
    long len = BIO_get_mem_data(t->wbio, &records);
    uv_buf_t out = uv_buf_init(records, (unsigned)len);
    int sent = len > 0 ? uv_try_write((uv_stream_t *)&c->tcp, &out, 1) : 0;
    if (sent == len) {
        (void)BIO_reset(t->wbio); /* all of it went out */
        size_t total = 0;
        for (unsigned i = 0; i < n; i++)
            total += bufs[i].len;
        return total;
    }
    t->held = 1;
    t->held_sent = sent > 0 ? (size_t)sent : 0;
    return 0;
}

static int tls_write(rn_conn *c, uv_write_t *w, const uv_buf_t *bufs, unsigned n, uv_write_cb cb) {
    tls_conn *t = tls_of(c);
    assert(t->established);
    if (t->held) { /* encrypted by try_write: its records past what the socket took */
        t->held = 0;
        drop_output(t, t->held_sent);
    } else if (encrypt_bufs(t, bufs, n) < 0)
        return UV_EPROTO;
    return flush_output(c, w, cb, 0);
}

static size_t tls_queued(const rn_conn *c) {
    return uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp);
}

static int tls_shutdown(rn_conn *c, uv_shutdown_t *sr, uv_shutdown_cb cb) {
    tls_conn *t = tls_of(c);
    if (t->established) {
        SSL_shutdown(t->ssl); /* close_notify */
        ERR_clear_error();
        if (flush_output(c, NULL, NULL, 0) < 0)
            return UV_EPIPE;
    }
    return uv_shutdown(sr, (uv_stream_t *)&c->tcp, cb);
}

static void tls_free(rn_conn *c) {
    tls_conn *t = tls_of(c);
    SSL_free(t->ssl); /* frees both BIOs */
    free(t);
    c->bytes_state = NULL;
}

const rn_byte_transport rn_tls_bytes = {
    .read_start = tls_read_start,
    .read_stop = tls_read_stop,
    .try_write = tls_try_write,
    .write = tls_write,
    .queued = tls_queued,
    .shutdown = tls_shutdown,
    .free = tls_free,
    .direct_sends = 0,
};

int tls_accept(rn_conn *c, rn_tls_context *ctx) {
    assert(!c->proto && !c->bytes_state);
    SSL *ssl = SSL_new(ctx->ctx);
    BIO *rbio = BIO_new(BIO_s_mem()), *wbio = BIO_new(BIO_s_mem());
    if (!ssl || !rbio || !wbio) {
        SSL_free(ssl);
        BIO_free(rbio);
        BIO_free(wbio);
        ERR_clear_error();
        return -1;
    }
    BIO_set_mem_eof_return(rbio, -1); /* empty: "retry", not EOF */
    SSL_set_bio(ssl, rbio, wbio);
    SSL_set_accept_state(ssl);
    tls_conn *t = rn_xcalloc(1, sizeof *t);
    *t = (tls_conn){.ssl = ssl, .rbio = rbio, .wbio = wbio};
    c->bytes = &rn_tls_bytes;
    c->bytes_state = t;
    return 0;
}

X509 *tls_client_certificate(const rn_conn *c, long *verify_result) {
    assert(c->bytes == &rn_tls_bytes && verify_result != NULL);
    const tls_conn *t = tls_of(c);
    X509 *cert = SSL_get0_peer_certificate(t->ssl);
    *verify_result = cert ? SSL_get_verify_result(t->ssl) : X509_V_OK;
    return cert;
}

/* ---- the context ---- */

static int alpn_select(SSL *ssl, const unsigned char **out, unsigned char *outlen,
                       const unsigned char *in, unsigned inlen, void *arg) {
    (void)ssl;
    (void)arg;
    size_t ours_len;
    const unsigned char *ours = conn_alpn_protocols(&ours_len);
    unsigned char *chosen = NULL;
    if (SSL_select_next_proto(&chosen, outlen, ours, (unsigned)ours_len, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK; /* none in common: the default protocol */
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

const char *rn_tls_error_reason(void) {
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unknown error";
}

/* A clearer message than OpenSSL's for a missing or unreadable file. */
int rn_tls_check_readable(const char *what, const char *path, char *err, size_t errcap) {
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errcap, "cannot read %s %s: %s", what, path, strerror(errno));
        return -1;
    }
    fclose(f);
    return 0;
}

int rn_tls_check_validity(const char *flag, const char *path, X509 *leaf, char *err,
                          size_t errcap) {
    const ASN1_TIME *after = X509_get0_notAfter(leaf), *before = X509_get0_notBefore(leaf);
    struct tm tm;
    if (X509_cmp_current_time(after) <= 0) {
        ASN1_TIME_to_tm(after, &tm);
        snprintf(err, errcap, "the certificate in %s %s expired on %04d-%02d-%02dT%02d:%02dZ", flag,
                 path, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
        return -1;
    }
    if (X509_cmp_current_time(before) >= 0) {
        ASN1_TIME_to_tm(before, &tm);
        snprintf(err, errcap,
                 "the certificate in %s %s is not valid before %04d-%02d-%02dT%02d:%02dZ", flag,
                 path, tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min);
        return -1;
    }
    return 0;
}

/* Accepts any client certificate at the handshake: whether it verified is
 * the handler's to judge (SSL_get_verify_result), so that a client with
 * none, or with another CA's, still gets an answer saying why. */
static int accept_any(int preverify_ok, X509_STORE_CTX *store) {
    (void)preverify_ok;
    (void)store;
    return 1;
}

/* Asks clients for a certificate of the CAs in f->client_ca_path. */
static int ask_clients(SSL_CTX *ctx, const rn_tls_files *f, char *err, size_t errcap) {
    STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(f->client_ca_path);
    if (!names || SSL_CTX_load_verify_locations(ctx, f->client_ca_path, NULL) != 1) {
        snprintf(err, errcap, "%s %s: no PEM CA certificate (%s)", f->client_ca_flag,
                 f->client_ca_path, rn_tls_error_reason());
        sk_X509_NAME_pop_free(names, X509_NAME_free);
        return -1;
    }
    SSL_CTX_set_client_CA_list(ctx, names);
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, accept_any);
    /* resumed sessions keep the certificate they verified; OpenSSL wants
     * a session id context whenever client certificates are asked for */
    static const unsigned char sid[] = "runnel";
    SSL_CTX_set_session_id_context(ctx, sid, sizeof sid - 1);
    return 0;
}

/* A server SSL_CTX with the files' certificate chain and key, checked. */
static SSL_CTX *ctx_load(const rn_tls_files *f, char *err, size_t errcap) {
    const char *cert = f->cert_path, *key = f->key_path;
    if (rn_tls_check_readable(f->cert_flag, cert, err, errcap) < 0 ||
        rn_tls_check_readable(f->key_flag, key, err, errcap) < 0 ||
        (f->client_ca_path &&
         rn_tls_check_readable(f->client_ca_flag, f->client_ca_path, err, errcap) < 0))
        return NULL;
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        snprintf(err, errcap, "TLS: %s", rn_tls_error_reason());
        goto fail;
    }
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE |
                                 SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_cipher_list(ctx, TLS12_CIPHERS);
    /* Resumption by tickets only: no server-side session cache to bound. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_alpn_select_cb(ctx, alpn_select, NULL);
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1) {
        snprintf(err, errcap, "%s %s: not a PEM certificate chain (%s)", f->cert_flag, cert,
                 rn_tls_error_reason());
        goto fail;
    }
    if (rn_tls_check_validity(f->cert_flag, cert, SSL_CTX_get0_certificate(ctx), err, errcap) < 0)
        goto fail;
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
        const char *why = rn_tls_error_reason();
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
            snprintf(err, errcap, "%s %s does not match the certificate in %s %s", f->key_flag, key,
                     f->cert_flag, cert);
        else
            snprintf(err, errcap, "%s %s: not a PEM private key (%s)", f->key_flag, key, why);
        goto fail;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        snprintf(err, errcap, "%s %s does not match the certificate in %s %s", f->key_flag, key,
                 f->cert_flag, cert);
        goto fail;
    }
    if (f->client_ca_path && ask_clients(ctx, f, err, errcap) < 0)
        goto fail;
    ERR_clear_error();
    return ctx;
fail:
    ERR_clear_error();
    SSL_CTX_free(ctx);
    return NULL;
}

/* t's files as ctx_load takes them. */
static rn_tls_files files_of(const rn_tls_context *t) {
    return (rn_tls_files){.cert_path = t->cert_path,
                          .key_path = t->key_path,
                          .cert_flag = t->cert_flag,
                          .key_flag = t->key_flag,
                          .client_ca_path = t->client_ca_path,
                          .client_ca_flag = t->client_ca_flag};
}

static char *dup_or_null(const char *s) {
    return s ? rn_xstrdup(s) : NULL;
}

rn_tls_context *rn_tls_context_new(const rn_tls_files *files, char *err, size_t errcap) {
    assert(files && files->cert_path && files->key_path);
    rn_tls_files f = *files;
    f.cert_flag = f.cert_flag ? f.cert_flag : "--tls-cert";
    f.key_flag = f.key_flag ? f.key_flag : "--tls-key";
    f.client_ca_flag = f.client_ca_flag ? f.client_ca_flag : "the client CA";
    SSL_CTX *ctx = ctx_load(&f, err, errcap);
    if (!ctx)
        return NULL;
    rn_tls_context *t = rn_xcalloc(1, sizeof *t);
    t->ctx = ctx;
    t->cert_path = rn_xstrdup(f.cert_path);
    t->key_path = rn_xstrdup(f.key_path);
    t->cert_flag = rn_xstrdup(f.cert_flag);
    t->key_flag = rn_xstrdup(f.key_flag);
    t->client_ca_path = dup_or_null(f.client_ca_path);
    t->client_ca_flag = rn_xstrdup(f.client_ca_flag);
    return t;
}

int rn_tls_context_reload(rn_tls_context *t, char *err, size_t errcap) {
    rn_tls_files f = files_of(t);
    SSL_CTX *ctx = ctx_load(&f, err, errcap);
    if (!ctx)
        return -1;
    unsigned char keys[TICKET_KEY_BYTES];
    if (SSL_CTX_get_tlsext_ticket_keys(t->ctx, keys, sizeof keys) == 1)
        SSL_CTX_set_tlsext_ticket_keys(ctx, keys, sizeof keys);
    OPENSSL_cleanse(keys, sizeof keys);
    SSL_CTX_free(t->ctx); /* connections using it hold their own reference */
    t->ctx = ctx;
    return 0;
}

void rn_tls_context_free(rn_tls_context *t) {
    if (!t)
        return;
    SSL_CTX_free(t->ctx);
    free(t->cert_path);
    free(t->key_path);
    free(t->cert_flag);
    free(t->key_flag);
    free(t->client_ca_path);
    free(t->client_ca_flag);
    free(t);
}
