/*
 * peer_auth.c — the cluster key's proofs and signatures, and the counts of
 * refused peers. See peer_auth.h.
 */
#include "consensus/peer_auth.h"

#include <assert.h>
#include <inttypes.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <stdio.h>
#include <string.h>

#include "util/text.h"

static uint64_t refusals[RN_PEER_CHANNEL_COUNT][RN_PEER_REASON_COUNT];

static const char *const reason_names[RN_PEER_REASON_COUNT] = {
    [RN_PEER_OK] = "ok",
    [RN_PEER_MISSING] = "missing",
    [RN_PEER_MALFORMED] = "malformed",
    [RN_PEER_MODE] = "mode",
    [RN_PEER_STALE] = "stale",
    [RN_PEER_BAD_PROOF] = "bad_proof",
    [RN_PEER_WRONG_ID] = "wrong_id",
    [RN_PEER_UNTRUSTED] = "untrusted_cert",
    [RN_PEER_CERT_ID] = "cert_id",
};

static const char *const reason_texts[RN_PEER_REASON_COUNT] = {
    [RN_PEER_OK] = "authenticated",
    [RN_PEER_MISSING] = "no credential (is the peer started without --cluster-key-file or "
                        "--peer-cert?)",
    [RN_PEER_MALFORMED] = "the credential is malformed",
    [RN_PEER_MODE] = "the peer authenticates another way than this node (a cluster key, peer "
                     "certificates, or nothing: the two nodes' settings differ)",
    [RN_PEER_STALE] = "the signature's time is more than 30 s away from this node's clock",
    [RN_PEER_BAD_PROOF] = "the proof does not verify: the two nodes' cluster keys differ",
    [RN_PEER_WRONG_ID] = "the peer claims this node's own id",
    [RN_PEER_UNTRUSTED] = "the peer's certificate does not verify against this node's --peer-ca "
                          "(another CA's, expired or not yet valid)",
    [RN_PEER_CERT_ID] = "the peer's certificate names another node id than the peer claims, or "
                        "none (its URI SAN runnel-node:ID)",
};

const char *rn_peer_reason_name(rn_peer_reason r) {
    assert(r < RN_PEER_REASON_COUNT);
    return reason_names[r];
}

const char *rn_peer_reason_text(rn_peer_reason r) {
    assert(r < RN_PEER_REASON_COUNT);
    return reason_texts[r];
}

void rn_peer_refused(rn_peer_channel channel, rn_peer_reason reason) {
    assert(channel < RN_PEER_CHANNEL_COUNT && reason > RN_PEER_OK && reason < RN_PEER_REASON_COUNT);
    refusals[channel][reason]++;
}

void rn_peer_auth_metrics(rn_buf *out) {
    static const char *const channels[RN_PEER_CHANNEL_COUNT] = {"raft", "http"};
    rn_buf_append_str(out, "# HELP runnel_cluster_peer_refused_total Peer connections (raft) and "
                           "peer requests (http) refused, by reason.\n"
                           "# TYPE runnel_cluster_peer_refused_total counter\n");
    for (unsigned c = 0; c < RN_PEER_CHANNEL_COUNT; c++)
        for (unsigned r = RN_PEER_OK + 1; r < RN_PEER_REASON_COUNT; r++)
            rn_buf_appendf(out,
                           "runnel_cluster_peer_refused_total{channel=\"%s\",reason=\"%s\"} "
                           "%" PRIu64 "\n",
                           channels[c], reason_names[r], refusals[c][r]);
}

/* ---- HMAC over pieces ---- */

typedef struct {
    const void *p;
    size_t len;
} piece;

static void hmac_pieces(const rn_secret *key, const piece *pieces, size_t n,
                        uint8_t out[RN_PEER_MAC_BYTES]) {
    assert(key != NULL && key->len > 0);
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string("digest", digest, 0),
                           OSSL_PARAM_construct_end()};
    size_t len = 0;
    int ok = ctx && EVP_MAC_init(ctx, key->bytes, key->len, params);
    for (size_t i = 0; ok && i < n; i++)
        ok = EVP_MAC_update(ctx, pieces[i].p, pieces[i].len);
    ok = ok && EVP_MAC_final(ctx, out, &len, RN_PEER_MAC_BYTES) && len == RN_PEER_MAC_BYTES;
    EVP_MAC_CTX_free(ctx);
    EVP_MAC_free(mac);
    if (!ok)
        abort(); /* OpenSSL without HMAC-SHA256 cannot run a keyed cluster */
}

void rn_peer_raft_proof(const rn_secret *key, bool from_server, const uint8_t *hello,
                        size_t hello_len, const uint8_t ns[RN_PEER_NONCE_BYTES],
                        const uint8_t nc[RN_PEER_NONCE_BYTES], uint64_t server_id,
                        uint8_t out[RN_PEER_MAC_BYTES]) {
    assert(hello != NULL && hello_len > 0 && ns != NULL && nc != NULL);
    static const char client[] = "runnel raft client 1", server[] = "runnel raft server 1";
    uint8_t id[8];
    for (int i = 0; i < 8; i++)
        id[i] = (uint8_t)(server_id >> (8 * i));
    piece p[] = {{from_server ? server : client, sizeof client - 1},
                 {hello, hello_len},
                 {ns, RN_PEER_NONCE_BYTES},
                 {nc, RN_PEER_NONCE_BYTES},
                 {id, from_server ? sizeof id : 0}};
    hmac_pieces(key, p, sizeof p / sizeof p[0], out);
}

/* ---- HTTP signatures ---- */

static void hex(const uint8_t *in, size_t n, char *out) {
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[in[i] >> 4];
        out[2 * i + 1] = digits[in[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The signature of (method, target, time, id, body) as 64 hex digits. */
static void http_signature(const rn_secret *key, const char *method, size_t method_len,
                           const char *target, size_t target_len, uint64_t time_ms, uint64_t id,
                           const uint8_t *body, size_t body_len,
                           char out[2 * RN_PEER_MAC_BYTES + 1]) {
    uint8_t digest[32];
    unsigned dlen = 0;
    if (!EVP_Digest(body_len ? body : (const uint8_t *)"", body_len, digest, &dlen, EVP_sha256(),
                    NULL))
        abort();
    char digest_hex[65], middle[64];
    hex(digest, sizeof digest, digest_hex);
    int mlen = snprintf(middle, sizeof middle, "\n%" PRIu64 "\n%" PRIu64 "\n", time_ms, id);
    static const char label[] = "runnel http 1\n";
    piece p[] = {{label, sizeof label - 1}, {method, method_len},   {"\n", 1},
                 {target, target_len},      {middle, (size_t)mlen}, {digest_hex, 64}};
    uint8_t mac[RN_PEER_MAC_BYTES];
    hmac_pieces(key, p, sizeof p / sizeof p[0], mac);
    hex(mac, sizeof mac, out);
}

void rn_peer_http_sign(const rn_secret *key, uint64_t self_id, uint64_t now_ms, const char *method,
                       const char *url, const uint8_t *body, size_t body_len, rn_buf *lines) {
    assert(key && key->len > 0 && self_id > 0 && method && url && lines);
    const char *scheme_end = strstr(url, "://");
    const char *target = scheme_end ? strchr(scheme_end + 3, '/') : NULL;
    if (target == NULL)
        target = "/";
    char sig[2 * RN_PEER_MAC_BYTES + 1];
    http_signature(key, method, strlen(method), target, strlen(target), now_ms, self_id, body,
                   body_len, sig);
    rn_buf_appendf(lines,
                   RN_PEER_HEADER_ID ": %" PRIu64 "\r\n" RN_PEER_HEADER_TIME ": %" PRIu64
                                     "\r\n" RN_PEER_HEADER_SIGNATURE ": %s\r\n",
                   self_id, now_ms, sig);
}

/* The value of header name as an unsigned decimal; -1 when absent,
 * repeated or not canonical. */
static int header_u64(const rn_request *req, const char *name, uint64_t *out) {
    size_t count = 0;
    const rn_header *h = rn_request_header(req, name, &count);
    if (h == NULL || count != 1)
        return -1;
    return rn_parse_strict_u64(h->value, h->value_len, UINT64_MAX, out);
}

rn_peer_reason rn_peer_http_verify(const rn_secret *key, uint64_t self_id, uint64_t now_ms,
                                   const rn_request *req, uint64_t *peer) {
    assert(key && key->len > 0 && req && peer);
    size_t nid = 0, ntime = 0, nsig = 0;
    rn_request_header(req, RN_PEER_HEADER_ID, &nid);
    rn_request_header(req, RN_PEER_HEADER_TIME, &ntime);
    const rn_header *sig = rn_request_header(req, RN_PEER_HEADER_SIGNATURE, &nsig);
    if (nid == 0 && ntime == 0 && nsig == 0)
        return RN_PEER_MISSING;
    uint64_t id, time_ms;
    if (header_u64(req, RN_PEER_HEADER_ID, &id) != 0 ||
        header_u64(req, RN_PEER_HEADER_TIME, &time_ms) != 0 || nsig != 1 ||
        sig->value_len != 2 * RN_PEER_MAC_BYTES || id == 0 || id > 255)
        return RN_PEER_MALFORMED;
    if (time_ms + RN_PEER_HTTP_WINDOW_MS < now_ms || time_ms > now_ms + RN_PEER_HTTP_WINDOW_MS)
        return RN_PEER_STALE;
    const char *method = req->method_name ? req->method_name : "";
    char want[2 * RN_PEER_MAC_BYTES + 1];
    http_signature(key, method, strlen(method), req->target, req->target_len, time_ms, id,
                   req->body.data, req->body.len, want);
    if (!rn_equal_const_time(want, sig->value, 2 * RN_PEER_MAC_BYTES))
        return RN_PEER_BAD_PROOF;
    if (id == self_id)
        return RN_PEER_WRONG_ID;
    *peer = id;
    return RN_PEER_OK;
}
