/*
 * identity.c — a node's incarnation: made once per data directory, reported
 * to and recorded by its peers, checked with them at every start. See
 * identity.h.
 */
#include "cluster/identity.h"
#include "cluster/cluster_config.h"
#include "cluster/cluster_int.h"
#include "consensus/peer_auth.h"
#include "protocol/reply.h"
#include "util/clock.h"
#include "util/files.h"
#include "util/text.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define OWN_FILE "cluster-incarnation"
#define PEERS_FILE "cluster-incarnations"
#define ASK_TIMEOUT_MS 2000
#define LINE_PREFIX "incarnation "

/* 16 lowercase hex digits at text (len bytes there) into *out; -1 when
 * they are not. */
static int parse_hex(const char *text, size_t len, uint64_t *out) {
    return len >= 16 ? rn_parse_hex_u64(text, out) : -1;
}

/* ---- the files ---- */

static int load_own(rn_cluster *cl, int *made, char *err, size_t cap) {
    rn_buf b = {0};
    int rc = rn_read_file(cl->cfg.data_dir, OWN_FILE, &b);
    *made = rc == -ENOENT;
    if (rc == 0 && parse_hex((const char *)b.data, b.len, &cl->incarnation) == 0 &&
        cl->incarnation) {
        rn_buf_free(&b);
        return 0;
    }
    rn_buf_free(&b);
    if (rc != -ENOENT) {
        snprintf(err, cap, "%s/%s is unreadable or damaged (%s); refusing to start",
                 cl->cfg.data_dir, OWN_FILE, rc < 0 ? strerror(-rc) : "not 16 hex digits");
        return -1;
    }
    do
        if (RAND_bytes((unsigned char *)&cl->incarnation, sizeof cl->incarnation) != 1) {
            snprintf(err, cap, "no random bytes for this node's incarnation");
            return -1;
        }
    while (!cl->incarnation);
    return 0;
}

static int load_peers(rn_cluster *cl, char *err, size_t cap) {
    rn_buf b = {0};
    int rc = rn_read_file(cl->cfg.data_dir, PEERS_FILE, &b);
    if (rc == -ENOENT)
        return 0;
    if (rc < 0) {
        snprintf(err, cap, "cannot read %s/%s: %s", cl->cfg.data_dir, PEERS_FILE, strerror(-rc));
        return -1;
    }
    const char *p = (const char *)b.data, *end = p + b.len;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *sp = memchr(p, ' ', (size_t)((nl ? nl : end) - p));
        uint64_t id, inc;
        if (!nl || !sp || rn_parse_strict_u64(p, (size_t)(sp - p), 255, &id) != 0 ||
            parse_hex(sp + 1, (size_t)(nl - sp - 1), &inc) != 0) {
            snprintf(err, cap, "%s/%s is damaged; refusing to start", cl->cfg.data_dir, PEERS_FILE);
            rn_buf_free(&b);
            return -1;
        }
        cl->incarnations[id] = inc;
        p = nl + 1;
    }
    rn_buf_free(&b);
    return 0;
}

static int save_own(const rn_cluster *cl) {
    char text[24];
    int n = snprintf(text, sizeof text, "%016" PRIx64 "\n", cl->incarnation);
    return rn_atomic_write_file(cl->cfg.data_dir, OWN_FILE, text, (size_t)n, 0644);
}

static int save_peers(const rn_cluster *cl) {
    rn_buf b = {0};
    for (unsigned id = 1; id < 256; id++)
        if (cl->incarnations[id])
            rn_buf_appendf(&b, "%u %016" PRIx64 "\n", id, cl->incarnations[id]);
    int rc = rn_atomic_write_file(cl->cfg.data_dir, PEERS_FILE, b.data ? (char *)b.data : "", b.len,
                                  0644);
    rn_buf_free(&b);
    return rc;
}

/* ---- asking the peers at the start ---- */

static size_t collect(char *data, size_t size, size_t n, void *arg) {
    rn_buf *b = arg;
    if (b->len + size * n <= 256)
        rn_buf_append(b, data, size * n);
    return size * n;
}

/* The incarnation peer p knows for this node's id: 0 with *answered set
 * when it knows none, or *answered 0 when it did not answer. */
static uint64_t ask(const rn_cluster *cl, const rn_peer_config *p, int *answered) {
    char url[700];
    snprintf(url, sizeof url, "%s/__runnel/cluster/incarnation?id=%llu", rn_cluster_peer_url(p),
             (unsigned long long)cl->cfg.node_id);
    rn_buf lines = {0}, body = {0};
    if (cl->key.len)
        rn_peer_http_sign(&cl->key, cl->cfg.node_id, (uint64_t)rn_now_ms(), "GET", url, NULL, 0,
                          &lines);
    struct curl_slist *headers = NULL;
    for (size_t at = 0; at < lines.len;) {
        const char *line = (const char *)lines.data + at;
        const char *crlf = memchr(line, '\r', lines.len - at);
        size_t n = crlf ? (size_t)(crlf - line) : lines.len - at;
        char *one = rn_xstrndup(line, n);
        headers = curl_slist_append(headers, one);
        free(one);
        at += n + 2;
    }
    CURL *c = curl_easy_init();
    long status = 0;
    if (c) {
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
        curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)ASK_TIMEOUT_MS);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
        const char *ca = cluster_peer_request_ca(&cl->cfg);
        if (ca)
            curl_easy_setopt(c, CURLOPT_CAINFO, ca);
        if (cl->peer_tls) { /* the peer listener asks for this node's certificate */
            curl_easy_setopt(c, CURLOPT_SSLCERT, cl->cfg.peer_cert);
            curl_easy_setopt(c, CURLOPT_SSLKEY, cl->cfg.peer_key);
        }
        if (curl_easy_perform(c) == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        curl_easy_cleanup(c);
    }
    curl_slist_free_all(headers);
    rn_buf_free(&lines);
    size_t pl = sizeof LINE_PREFIX - 1;
    uint64_t known = 0;
    *answered = status == 200 && body.len >= pl && memcmp(body.data, LINE_PREFIX, pl) == 0 &&
                parse_hex((const char *)body.data + pl, body.len - pl, &known) == 0;
    rn_buf_free(&body);
    return *answered ? known : 0;
}

int rn_identity_start(rn_cluster *cl, char *err, size_t cap) {
    cl->incarnations = rn_xcalloc(256, sizeof *cl->incarnations);
    cl->replaced = rn_xcalloc(256, 1);
    int made = 0;
    if (load_own(cl, &made, err, cap) != 0 || load_peers(cl, err, cap) != 0)
        return -1;
    for (int i = 0; i < cl->cfg.n_peers; i++) {
        const rn_peer_config *p = &cl->cfg.peers[i];
        if (p->id == cl->cfg.node_id)
            continue;
        int answered;
        uint64_t known = ask(cl, p, &answered);
        if (answered && known && known != cl->incarnation) {
            snprintf(err, cap,
                     "node %llu (%s) knows node %llu with another data directory (incarnation "
                     "%016" PRIx64 ", this one's is %016" PRIx64
                     "%s): a wiped or replaced data directory cannot rejoin under its old id, "
                     "whose votes and log it lost. Replace the node instead: remove id %llu from "
                     "the cluster (DELETE /__runnel/cluster/members/%llu), then start it with a "
                     "new id, this empty data directory and --join, and add it (docs/CLUSTER.md, "
                     "\"Membership\")",
                     (unsigned long long)p->id, p->url, (unsigned long long)cl->cfg.node_id, known,
                     cl->incarnation, made ? ", new" : "", (unsigned long long)cl->cfg.node_id,
                     (unsigned long long)cl->cfg.node_id);
            return -1;
        }
    }
    int rc = made ? save_own(cl) : 0;
    if (rc < 0) {
        snprintf(err, cap, "cannot write %s/%s: %s", cl->cfg.data_dir, OWN_FILE, strerror(-rc));
        return -1;
    }
    if (made)
        rn_log(RN_LOG_INFO, "cluster_identity", "this data directory's incarnation is %016" PRIx64,
               cl->incarnation);
    cl->incarnations[cl->cfg.node_id] = cl->incarnation;
    return 0;
}

/* ---- while running ---- */

void rn_identity_status_line(const rn_cluster *cl, rn_buf *out) {
    rn_buf_appendf(out, LINE_PREFIX "%016" PRIx64 "\n", cl->incarnation);
}

void rn_identity_seen(rn_cluster *cl, uint64_t peer_id, const char *line, size_t len) {
    size_t pl = sizeof LINE_PREFIX - 1;
    uint64_t inc;
    if (peer_id == 0 || peer_id > 255 || peer_id == cl->cfg.node_id || len < pl ||
        memcmp(line, LINE_PREFIX, pl) != 0 || parse_hex(line + pl, len - pl, &inc) != 0 || !inc)
        return;
    uint64_t *known = &cl->incarnations[peer_id];
    if (*known == inc) {
        cl->replaced[peer_id] = 0;
        return;
    }
    if (!*known) {
        *known = inc;
        int rc = save_peers(cl);
        if (rc < 0)
            rn_log(RN_LOG_ERROR, "cluster_identity",
                   "cannot record node %llu's incarnation in %s/%s: %s",
                   (unsigned long long)peer_id, cl->cfg.data_dir, PEERS_FILE, strerror(-rc));
        return;
    }
    if (!cl->replaced[peer_id])
        rn_log(RN_LOG_ERROR, "cluster_identity",
               "node %llu answers with incarnation %016" PRIx64 ", but it was %016" PRIx64
               ": its data directory was wiped or replaced, and it must not take part under "
               "its old id; replace it (DELETE /__runnel/cluster/members/%llu, then a new id "
               "with --join)",
               (unsigned long long)peer_id, inc, *known, (unsigned long long)peer_id);
    cl->replaced[peer_id] = 1;
}

int rn_identity_replaced(const rn_cluster *cl, uint64_t peer_id) {
    return peer_id < 256 && cl->replaced && cl->replaced[peer_id];
}

void rn_identity_answer(rn_cluster *cl, rn_request *req, uint64_t id) {
    rn_buf h = {0}, body = {0};
    rn_reply_common(&h);
    rn_buf_append_str(&h, "Content-Type: text/plain\r\nCache-Control: no-store\r\n");
    rn_buf_appendf(&body, LINE_PREFIX "%016" PRIx64 "\n", id < 256 ? cl->incarnations[id] : 0);
    rn_http_respond(req, 200, &h, &body);
}
