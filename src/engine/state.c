/*
 * state.c — the state machine's tables and objects: streams by path and id,
 * producers, namespaces, and the pure rules on them (expiry at a given
 * time, incarnation tokens, content types). See state.h; apply.c changes
 * the state by commands.
 */
#include "engine/state.h"
#include "util/buf.h"
#include "util/text.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

void rn_state_init(rn_state *st) {
    memset(st, 0, sizeof *st);
    st->next_id = 1;
}

static void producer_free(rn_producer *p) {
    free(p->id);
    free(p);
}

void rn_state_free_stream(rn_stream *s) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v))
        producer_free(v);
    rn_map_free(&s->producers);
    free(s->path);
    free(s->content_type);
    free(s->last_seq);
    free(s->snapshot.content_type);
    free(s->snapshot.key);
    free(s->pins);
    free(s);
}

void rn_state_free(rn_state *st) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&st->by_id, &i, &v))
        rn_state_free_stream(v);
    rn_map_free(&st->by_path);
    rn_map_free(&st->by_id);
    rn_map_free_values(&st->namespaces);
    rn_state_free_fences(st);
    rn_buf_free(&st->subs);
}

static int cmp_stream_id(const void *a, const void *b) {
    uint64_t x = (*(rn_stream *const *)a)->id, y = (*(rn_stream *const *)b)->id;
    return x < y ? -1 : x > y;
}

rn_stream **rn_state_streams_by_id(const rn_state *st, size_t *n) {
    rn_stream **out = rn_xcalloc(st->by_id.count ? st->by_id.count : 1, sizeof *out);
    size_t i = 0;
    void *v;
    *n = 0;
    while (rn_map_next(&st->by_id, &i, &v))
        out[(*n)++] = v;
    qsort(out, *n, sizeof *out, cmp_stream_id);
    return out;
}

rn_stream *rn_state_stream(const rn_state *st, uint64_t id) {
    return rn_map_get(&st->by_id, &id, sizeof id);
}

rn_stream *rn_state_at(const rn_state *st, const char *path, size_t len) {
    return rn_map_get(&st->by_path, path, len);
}

void rn_state_adopt(rn_state *st, rn_stream *s) {
    assert(!rn_state_stream(st, s->id) && !rn_state_at(st, s->path, s->path_len));
    rn_map_put(&st->by_path, s->path, s->path_len, s);
    rn_map_put(&st->by_id, &s->id, sizeof s->id, s);
    if (s->id >= st->next_id)
        st->next_id = s->id + 1;
}

rn_stream *rn_state_add(rn_state *st, uint64_t id, const char *path, size_t path_len,
                        const char *ct, size_t ct_len) {
    rn_stream *s = rn_xcalloc(1, sizeof *s);
    s->id = id;
    s->path = rn_xstrndup(path, path_len);
    s->path_len = path_len;
    s->content_type = rn_xstrndup(ct, ct_len);
    s->content_type_len = ct_len;
    s->json = rn_content_type_is_json(ct, ct_len);
    s->ttl_s = -1;
    s->expires_at_ms = -1;
    rn_state_adopt(st, s);
    return s;
}

void rn_state_destroy(rn_state *st, rn_stream *s, const rn_effects *fx) {
    assert(rn_state_stream(st, s->id) == s);
    rn_map_remove(&st->by_path, s->path, s->path_len);
    rn_map_remove(&st->by_id, &s->id, sizeof s->id);
    if (!s->pending_create && !s->soft_deleted)
        fx->removed(fx->ctx, s);
    fx->destroyed(fx->ctx, s);
    rn_stream *source = s->source;
    rn_state_free_stream(s);
    if (source && --source->refcount == 0 && source->soft_deleted)
        rn_state_destroy(st, source, fx);
}

rn_producer *rn_stream_add_producer(rn_stream *s, const char *id, size_t len) {
    assert(!rn_map_get(&s->producers, id, len));
    rn_producer *p = rn_xcalloc(1, sizeof *p);
    p->id = rn_xstrndup(id, len);
    p->id_len = len;
    rn_map_put(&s->producers, p->id, p->id_len, p);
    return p;
}

void rn_stream_remove_producer(rn_stream *s, rn_producer *p) {
    rn_map_remove(&s->producers, p->id, p->id_len);
    producer_free(p);
}

int rn_stream_above_floor(const rn_stream *s, uint64_t epoch) {
    return !s->has_floor || epoch > s->epoch_floor;
}

int rn_stream_expired(const rn_stream *s, int64_t now) {
    if (s->soft_deleted)
        return 0;
    if (s->expires_at_ms >= 0 && now >= s->expires_at_ms)
        return 1;
    if (s->ttl_s >= 0 && now >= s->last_access_ms + s->ttl_s * 1000)
        return 1;
    return 0;
}

void rn_state_add_namespace(rn_state *st, const char *ns, size_t len) {
    assert(len > 0);
    if (!rn_map_get(&st->namespaces, ns, len)) {
        char *copy = rn_xstrndup(ns, len);
        rn_map_put(&st->namespaces, copy, len, copy);
    }
}

int rn_state_namespace_exists(const rn_state *st, const char *ns, size_t len) {
    return len && rn_map_get(&st->namespaces, ns, len) != NULL;
}

/* A 52-bit Feistel permutation of n: distinct serials give distinct
 * tokens, so a token never repeats within a data directory (ids and
 * rewrite serials are never reused), and tokens do not reveal how many
 * streams were created. The key's bits enter every round's key (32 of
 * them a round, overlapping), so two deployments' tokens for one serial
 * differ; key 0 leaves the round keys of the former fixed permutation. */
uint64_t rn_incarnation_for(uint64_t key, uint64_t n) {
    uint64_t left = (n >> 26) & 0x3ffffff, right = n & 0x3ffffff;
    static const uint64_t keys[4] = {0x9e3779b9, 0x7f4a7c15, 0x94d049bb, 0xbf58476d};
    for (int i = 0; i < 4; i++) {
        uint64_t round_key = keys[i] ^ (uint32_t)(key >> (16 * i));
        uint64_t f = ((right ^ round_key) * 0x2545f4914f6cdd1dull) >> 38;
        uint64_t next = left ^ (f & 0x3ffffff);
        left = right;
        right = next;
    }
    return RN_INCARNATION_MIN + ((left << 26) | right);
}

/* ---- content types ---- */

static size_t media_type_len(const char *s, size_t len) {
    size_t n = 0;
    while (n < len && s[n] != ';')
        n++;
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    return n;
}

static void trim(const char **s, size_t *len) {
    while (*len && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*len)--;
    }
}

int rn_content_type_equal(const char *a, size_t alen, const char *b, size_t blen) {
    trim(&a, &alen);
    trim(&b, &blen);
    size_t an = media_type_len(a, alen), bn = media_type_len(b, blen);
    if (an != bn)
        return 0;
    char tmp[256];
    if (an >= sizeof tmp)
        return an == bn && strncasecmp(a, b, an) == 0;
    memcpy(tmp, b, bn);
    tmp[bn] = 0;
    return rn_ieq(a, an, tmp);
}

int rn_content_type_is_json(const char *ct, size_t len) {
    return rn_content_type_equal(ct, len, "application/json", 16);
}
