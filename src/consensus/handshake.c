/*
 * handshake.c — the hello, and the cluster key's proofs or the verdict on
 * a certificate's claim, at the start of a Raft port connection. See
 * handshake.h.
 */
#include "consensus/handshake.h"

#include <assert.h>
#include <openssl/rand.h>
#include <raft.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "consensus/wire.h"
#include "util/buf.h"

#define MSG_BYTES RN_HANDSHAKE_MESSAGE_BYTES
#define PROOF_BYTES (RN_PEER_NONCE_BYTES + RN_PEER_MAC_BYTES)
#define KIND_CHALLENGE 0x48434e52u /* "RNCH" */
#define KIND_OK 0x4b4f4e52u        /* "RNOK" */
#define KIND_REFUSED 0x4f4e4e52u   /* "RNNO" */

typedef enum {
    WRITE_HELLO,     /* connecting: the hello is being written */
    READ_CHALLENGE,  /* connecting: waiting for Ns */
    READ_VERDICT,    /* connecting: proof sent, waiting for the verdict */
    WRITE_CHALLENGE, /* listening: Ns is being written */
    READ_PROOF,      /* listening: waiting for Nc and the proof */
    WRITE_VERDICT,   /* listening: the verdict is being written */
} stage;

_Static_assert(RN_HANDSHAKE_MESSAGE_BYTES == 8u + RN_PEER_MAC_BYTES, "u32 kind, u32 reason, MAC");

struct rn_handshake {
    uv_stream_t *stream;
    rn_wire_auth auth; /* connecting: how the hello said it proves itself */
    stage stage;
    bool closing, writing, reading, finish_after_write;
    rn_peer_reason refusal; /* listening: the verdict being written refuses this */
    rn_peer_reason reason;  /* reported when the handle is closed */
    rn_secret key;
    uint64_t server_id;
    uint8_t hello[RN_WIRE_MAX_HELLO];
    size_t hello_len;
    uint8_t ns[RN_PEER_NONCE_BYTES], nc[RN_PEER_NONCE_BYTES];
    uv_write_t write;
    uint8_t out[RN_WIRE_MAX_HELLO + PROOF_BYTES];
    uint8_t in[PROOF_BYTES];
    size_t need, got;
    rn_handshake_fn done;
    void *arg;
};

static void put_u32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void nonce(uint8_t out[RN_PEER_NONCE_BYTES]) {
    if (RAND_bytes(out, RN_PEER_NONCE_BYTES) != 1)
        abort(); /* no randomness: no proof can be fresh */
}

/* The listening side's 40-byte message. */
static void message(uint8_t out[MSG_BYTES], uint32_t kind, rn_peer_reason reason,
                    const uint8_t body[RN_PEER_MAC_BYTES]) {
    put_u32(out, kind);
    put_u32(out + 4, (uint32_t)reason);
    if (body)
        memcpy(out + 8, body, RN_PEER_MAC_BYTES);
    else
        memset(out + 8, 0, RN_PEER_MAC_BYTES);
}

/* ---- ending ---- */

static void closed(uv_handle_t *handle) {
    rn_handshake *h = handle->data;
    raft_free(h->stream);
    rn_handshake_fn done = h->done;
    void *arg = h->arg;
    rn_peer_reason reason = h->reason;
    rn_secret_wipe(&h->key);
    free(h);
    done(arg, NULL, reason);
}

static void fail(rn_handshake *h, rn_peer_reason reason) {
    if (h->closing)
        return;
    h->closing = true;
    h->reason = reason;
    uv_close((uv_handle_t *)h->stream, closed);
}

static void finish(rn_handshake *h) {
    assert(!h->closing && !h->writing);
    uv_read_stop(h->stream);
    uv_stream_t *stream = h->stream;
    stream->data = NULL;
    rn_handshake_fn done = h->done;
    void *arg = h->arg;
    rn_secret_wipe(&h->key);
    free(h);
    done(arg, stream, RN_PEER_OK);
}

void rn_handshake_abort(rn_handshake *h) {
    assert(h != NULL);
    fail(h, RN_PEER_MISSING);
}

/* ---- reads and writes of exact sizes ---- */

static void on_written(uv_write_t *w, int status);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void send_bytes(rn_handshake *h, size_t len) {
    assert(!h->writing && len <= sizeof h->out);
    h->writing = true;
    h->write.data = h;
    uv_buf_t b = uv_buf_init((char *)h->out, (unsigned)len);
    if (uv_write(&h->write, h->stream, &b, 1, on_written) != 0) {
        h->writing = false;
        fail(h, RN_PEER_MISSING);
    }
}

static void alloc_in(uv_handle_t *handle, size_t suggested, uv_buf_t *buf) {
    (void)suggested;
    rn_handshake *h = handle->data;
    assert(h->got < h->need);
    buf->base = (char *)h->in + h->got;
    buf->len = h->need - h->got; /* never a byte past the handshake */
}

static void expect(rn_handshake *h, size_t n) {
    assert(n <= sizeof h->in);
    h->need = n;
    h->got = 0;
    if (h->reading)
        return; /* called from on_read: the next read fills the new need */
    h->reading = true;
    if (uv_read_start(h->stream, alloc_in, on_read) != 0)
        fail(h, RN_PEER_MISSING);
}

/* ---- the steps ---- */

/* connecting: true when the listening side's message is of kind want;
 * else fails h with the refusal's reason (or MALFORMED) and returns false. */
static bool message_is(rn_handshake *h, uint32_t want) {
    uint32_t kind = get_u32(h->in), reason = get_u32(h->in + 4);
    if (kind == want)
        return true;
    fail(h, kind == KIND_REFUSED && reason > RN_PEER_OK && reason < RN_PEER_REASON_COUNT
                ? (rn_peer_reason)reason
                : RN_PEER_MALFORMED);
    return false;
}

/* connecting: Ns arrived (or a refusal) */
static void got_challenge(rn_handshake *h) {
    if (!message_is(h, KIND_CHALLENGE))
        return;
    memcpy(h->ns, h->in + 8, RN_PEER_NONCE_BYTES);
    nonce(h->nc);
    memcpy(h->out, h->nc, RN_PEER_NONCE_BYTES);
    rn_peer_raft_proof(&h->key, false, h->hello, h->hello_len, h->ns, h->nc, 0,
                       h->out + RN_PEER_NONCE_BYTES);
    h->stage = READ_VERDICT;
    send_bytes(h, PROOF_BYTES);
    if (!h->closing)
        expect(h, MSG_BYTES);
}

/* connecting: the verdict arrived */
static void got_verdict(rn_handshake *h) {
    if (!message_is(h, KIND_OK))
        return;
    if (h->auth == RN_WIRE_AUTH_KEY) { /* with certificates, TLS proved the listening node */
        uint8_t want[RN_PEER_MAC_BYTES];
        rn_peer_raft_proof(&h->key, true, h->hello, h->hello_len, h->ns, h->nc, h->server_id, want);
        if (!rn_equal_const_time(want, h->in + 8, RN_PEER_MAC_BYTES)) {
            fail(h, RN_PEER_BAD_PROOF); /* not the node we meant, or not of this cluster */
            return;
        }
    }
    uv_read_stop(h->stream);
    h->reading = false;
    if (h->writing)
        h->finish_after_write = true;
    else
        finish(h);
}

/* listening: Nc and the proof arrived */
static void got_proof(rn_handshake *h) {
    memcpy(h->nc, h->in, RN_PEER_NONCE_BYTES);
    uint8_t want[RN_PEER_MAC_BYTES];
    rn_peer_raft_proof(&h->key, false, h->hello, h->hello_len, h->ns, h->nc, 0, want);
    bool ok = rn_equal_const_time(want, h->in + RN_PEER_NONCE_BYTES, RN_PEER_MAC_BYTES);
    uv_read_stop(h->stream);
    h->reading = false;
    h->stage = WRITE_VERDICT;
    if (ok) {
        rn_peer_raft_proof(&h->key, true, h->hello, h->hello_len, h->ns, h->nc, h->server_id, want);
        message(h->out, KIND_OK, RN_PEER_OK, want);
    } else {
        h->refusal = RN_PEER_BAD_PROOF;
        message(h->out, KIND_REFUSED, RN_PEER_BAD_PROOF, NULL);
    }
    send_bytes(h, MSG_BYTES);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    (void)buf;
    rn_handshake *h = s->data;
    if (nread == 0 || h->closing)
        return;
    if (nread < 0) {
        /* the peer closed: while waiting for a challenge, it refused the
         * hello without a word (it does not authenticate: a mode mismatch) */
        fail(h, h->stage == READ_CHALLENGE ? RN_PEER_MODE : RN_PEER_MISSING);
        return;
    }
    h->got += (size_t)nread;
    if (h->got < h->need)
        return;
    switch (h->stage) {
    case READ_CHALLENGE:
        got_challenge(h);
        break;
    case READ_VERDICT:
        got_verdict(h);
        break;
    case READ_PROOF:
        got_proof(h);
        break;
    default:
        assert(0 && "no read in this stage");
    }
}

static void on_written(uv_write_t *w, int status) {
    rn_handshake *h = w->data;
    h->writing = false;
    if (h->closing)
        return; /* closed: the close callback reports */
    if (status < 0) {
        fail(h, RN_PEER_MISSING);
        return;
    }
    switch (h->stage) {
    case WRITE_HELLO:
        if (h->auth == RN_WIRE_AUTH_NONE) {
            finish(h);
        } else {
            h->stage = h->auth == RN_WIRE_AUTH_KEY ? READ_CHALLENGE : READ_VERDICT;
            expect(h, MSG_BYTES);
        }
        break;
    case WRITE_CHALLENGE:
        h->stage = READ_PROOF;
        expect(h, PROOF_BYTES);
        break;
    case WRITE_VERDICT:
        if (h->refusal != RN_PEER_OK)
            fail(h, h->refusal);
        else
            finish(h);
        break;
    case READ_VERDICT:
        if (h->finish_after_write)
            finish(h);
        break;
    default:
        break; /* the proof was written while the verdict is awaited */
    }
}

/* ---- starting ---- */

static rn_handshake *start(uv_stream_t *stream, const rn_secret *key, const uint8_t *hello,
                           size_t hello_len, uint64_t server_id, rn_handshake_fn done, void *arg) {
    assert(stream != NULL && key != NULL && hello != NULL && done != NULL);
    assert(hello_len > 0 && hello_len <= RN_WIRE_MAX_HELLO);
    rn_handshake *h = rn_xcalloc(1, sizeof *h);
    h->stream = stream;
    stream->data = h;
    h->key = *key;
    memcpy(h->hello, hello, hello_len);
    h->hello_len = hello_len;
    h->server_id = server_id;
    h->done = done;
    h->arg = arg;
    return h;
}

rn_handshake *rn_handshake_connect(uv_stream_t *stream, rn_wire_auth auth, const rn_secret *key,
                                   const uint8_t *hello, size_t hello_len, uint64_t server_id,
                                   rn_handshake_fn done, void *arg) {
    assert(auth != RN_WIRE_AUTH_KEY || key->len > 0);
    rn_handshake *h = start(stream, key, hello, hello_len, server_id, done, arg);
    h->auth = auth;
    h->stage = WRITE_HELLO;
    memcpy(h->out, hello, hello_len);
    send_bytes(h, hello_len);
    return h;
}

rn_handshake *rn_handshake_serve(uv_stream_t *stream, const rn_secret *key, const uint8_t *hello,
                                 size_t hello_len, uint64_t self_id, rn_handshake_fn done,
                                 void *arg) {
    assert(key != NULL && key->len > 0);
    rn_handshake *h = start(stream, key, hello, hello_len, self_id, done, arg);
    h->stage = WRITE_CHALLENGE;
    nonce(h->ns);
    message(h->out, KIND_CHALLENGE, RN_PEER_OK, h->ns);
    send_bytes(h, MSG_BYTES);
    return h;
}

/* ---- refusing or admitting a hello ---- */

typedef struct {
    uv_write_t write;
    bool close; /* a refusal: the connection closes once it is written */
    uint8_t bytes[MSG_BYTES];
} verdict;

static void verdict_closed(uv_handle_t *handle) {
    free(handle->data);
    raft_free(handle);
}

static void verdict_written(uv_write_t *w, int status) {
    verdict *v = w->data;
    if (v->close)
        uv_close((uv_handle_t *)w->handle, verdict_closed);
    else
        free(v); /* a failed write: the stream's reader sees it fail too */
    (void)status;
}

void rn_handshake_refusal(uint8_t out[RN_HANDSHAKE_MESSAGE_BYTES], rn_peer_reason reason) {
    assert(reason > RN_PEER_OK && reason < RN_PEER_REASON_COUNT);
    message(out, KIND_REFUSED, reason, NULL);
}

/* Queues a verdict on stream; a refusal then closes it. */
static void send_verdict(uv_stream_t *stream, rn_peer_reason reason) {
    verdict *v = rn_xcalloc(1, sizeof *v);
    v->close = reason != RN_PEER_OK;
    v->write.data = v;
    message(v->bytes, v->close ? KIND_REFUSED : KIND_OK, reason, NULL);
    if (v->close) {
        uv_read_stop(stream);
        stream->data = v;
    }
    uv_buf_t b = uv_buf_init((char *)v->bytes, sizeof v->bytes);
    if (uv_write(&v->write, stream, &b, 1, verdict_written) == 0)
        return;
    if (v->close)
        uv_close((uv_handle_t *)stream, verdict_closed);
    else
        free(v);
}

void rn_handshake_refuse(uv_stream_t *stream, rn_peer_reason reason) {
    assert(stream != NULL && reason > RN_PEER_OK && reason < RN_PEER_REASON_COUNT);
    send_verdict(stream, reason);
}

void rn_handshake_admit(uv_stream_t *stream) {
    assert(stream != NULL);
    send_verdict(stream, RN_PEER_OK);
}
