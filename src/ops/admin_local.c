/*
 * admin_local.c — the operator's plane's local answers: what this node
 * holds of the streams of a scope (admin_int.h), read from the engine, the
 * live-read registry, the subscriptions, the tiers' counts of staged parts
 * and the request counters. Field names are docs/ADMIN.md's.
 *
 * Pages are made with util/topk.h from one walk of the engine's tables
 * (O(streams) per page, as a metrics scrape; nothing but the page is held,
 * its names copied), over loop turns on a large store (ops/store_walk.h:
 * a million streams walked in one turn held every request for 80 ms per
 * page): a listing of streams walks them once and finds the page's
 * streams again by name at the end; one of buckets pages the bucket names
 * first, then sums their streams in the walk. Bytes
 * of a stream are its own (below a fork point they are its source's): the
 * retained ones in the local stream files ("hot") and in the cold store
 * ("cold", history tiering), and its latest snapshot's body, local or in
 * the cold store.
 */
#include "ops/admin_int.h"
#include "cluster/cluster.h"
#include "cluster/placement.h"
#include "ops/store_walk.h"
#include "protocol/offset.h"
#include "util/clock.h"
#include "util/map.h"
#include "util/metrics.h"
#include "util/text.h"
#include "util/topk.h"

#include <stdio.h>
#include <stdlib.h>
#include <assert.h>
#include <string.h>

/* ---- small pieces ---- */

static json_t *offset_json(uint64_t pos) {
    char tok[RN_OFFSET_LEN + 1];
    rn_offset_format(pos, tok);
    return json_string(tok);
}

static json_t *time_json(int64_t ms) {
    char t[48];
    if (ms < 0)
        return json_null();
    rn_format_rfc3339(ms, t);
    return json_string(t);
}

/* A JSON string of bytes that may not be UTF-8 (a header's value): a
 * byte past ASCII in text that is not UTF-8 is shown as "?". */
static json_t *text_json(const char *s, size_t len) {
    if (rn_utf8_valid((const uint8_t *)s, len))
        return json_stringn(s, len);
    char *copy = rn_xstrndup(s, len);
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)copy[i] >= 0x80)
            copy[i] = '?';
    json_t *j = json_stringn(copy, len);
    free(copy);
    return j;
}

static int in_scope(const rn_admin_plane *a, const admin_scope *sc, const rn_stream *s) {
    (void)a;
    return sc->all || admin_scope_has(sc, rn_placement_id_group(s->id));
}

/* The bucket (namespace) of a path: its bytes before the first "/". */
static size_t ns_len_of(const rn_stream *s) {
    const char *slash = memchr(s->path, '/', s->path_len);
    return slash && slash > s->path ? (size_t)(slash - s->path) : 0;
}

typedef struct {
    uint64_t hot, cold, snapshots, cold_snapshots;
} byte_counts;

static void count_bytes(const rn_stream *s, byte_counts *b) {
    uint64_t own = s->retained > s->fork_offset ? s->retained : s->fork_offset;
    uint64_t hot_start = s->cold_end > own ? s->cold_end : own;
    b->hot += s->tail > hot_start ? s->tail - hot_start : 0;
    b->cold += hot_start > own ? hot_start - own : 0;
    if (s->snapshot.present) {
        if (s->snapshot.cold)
            b->cold_snapshots += s->snapshot.size;
        else
            b->snapshots += s->snapshot.size;
    }
}

static json_t *bytes_json(const byte_counts *b) {
    return json_pack("{s:I, s:I, s:I, s:I}", "hot", (json_int_t)b->hot, "cold", (json_int_t)b->cold,
                     "snapshots", (json_int_t)b->snapshots, "cold_snapshots",
                     (json_int_t)b->cold_snapshots);
}

static uint64_t total(const byte_counts *b) {
    return b->hot + b->cold + b->snapshots + b->cold_snapshots;
}

/* ---- a local answer walked over the streams ---- */

/* What a page's bucket gathers in the walk over the streams. */
typedef struct {
    const char *ns; /* the page's copy of the name */
    size_t ns_len;
    uint64_t streams, left;
    byte_counts bytes, left_bytes;
    uint64_t (*parts)[2]; /* usage: staged parts and their bytes by group (256) */
} bucket_sum;

/* A local answer under way: its query, the page (keys copied: the walk may
 * take several loop turns, over which names can go), and for buckets the
 * sums of the page's buckets. */
typedef struct {
    rn_admin_plane *a;
    admin_query q;
    admin_scope sc;
    admin_local_cb cb;
    void *arg;
    int usage;
    rn_topk page;
    size_t listed;    /* buckets: the page's entries (the limit's and one more) */
    bucket_sum *sums; /* buckets: the first `shown` of them */
    size_t shown;
    rn_map by_ns; /* buckets: ns -> its bucket_sum */
} local_job;

static void job_end(local_job *j, json_t *local) {
    j->cb(j->arg, local);
    for (size_t k = 0; k < j->shown; k++)
        free(j->sums[k].parts);
    free(j->sums);
    rn_map_free(&j->by_ns);
    rn_topk_free(&j->page);
    free(j);
}

/* Starts j's walk over the visible streams. */
static void job_walk(local_job *j, void (*visit)(rn_stream *, void *), void (*restart)(void *),
                     void (*finish)(void *, int)) {
    rn_store_walk_job job = {.visit = visit,
                             .restart = restart,
                             .finish = finish,
                             .arg = j,
                             .slices = &rn_metric.admin_walk_slices};
    rn_metric.admin_walks++;
    rn_store_walk_run(j->a->cfg.walker, &job);
}

/* ---- buckets ---- */

static void offer_ns(const char *ns, size_t len, void *arg) {
    local_job *j = arg;
    if (len < 2 || ns[0] != '_' || ns[1] != '_') /* __ is the operational routes' */
        rn_topk_offer(&j->page, ns, len, NULL);
}

/* The page's entry of s's bucket when s is in the answer's scope, or NULL. */
static bucket_sum *page_entry(local_job *j, const rn_stream *s) {
    size_t nl = ns_len_of(s);
    bucket_sum *b = nl ? rn_map_get(&j->by_ns, s->path, nl) : NULL;
    return b && in_scope(j->a, &j->sc, s) ? b : NULL;
}

static void add_visible(rn_stream *s, void *arg) {
    local_job *j = arg;
    bucket_sum *b = page_entry(j, s);
    if (!b)
        return;
    b->streams++;
    count_bytes(s, &b->bytes);
    uint64_t count, bytes;
    if (b->parts && j->a->cfg.tiers &&
        rn_tiers_parts_known(j->a->cfg.tiers, s->id, &count, &bytes) == 0) {
        unsigned g = j->a->cfg.cluster ? rn_placement_id_group(s->id) : 0;
        b->parts[g][0] += count;
        b->parts[g][1] += bytes;
    }
}

static void add_fenced(rn_stream *s, void *arg) {
    local_job *j = arg;
    bucket_sum *b = page_entry(j, s);
    if (!b)
        return;
    b->left++;
    count_bytes(s, &b->left_bytes);
}

static void sums_restart(void *arg) {
    local_job *j = arg;
    for (size_t k = 0; k < j->shown; k++) {
        bucket_sum *b = &j->sums[k];
        b->streams = 0;
        b->bytes = (byte_counts){0};
        if (b->parts)
            memset(b->parts, 0, 256 * sizeof *b->parts);
    }
}

/* The groups of sc the fence of ns covers (1 for a single node's fence). */
static uint64_t groups_fenced(const rn_admin_plane *a, const admin_scope *sc, const rn_fence *f) {
    if (!a->cfg.cluster)
        return 1;
    uint64_t n = 0;
    for (unsigned g = 0; g < rn_cluster_groups(a->cfg.cluster); g++)
        n += admin_scope_has(sc, g) && rn_fence_covers(f, g);
    return n;
}

static json_t *bucket_json(rn_admin_plane *a, const admin_scope *sc, const bucket_sum *b,
                           int usage) {
    const rn_fence *f = rn_engine_fence_of(a->cfg.engine, b->ns, b->ns_len);
    json_t *o = json_object();
    json_object_set_new(o, "bucket", text_json(b->ns, b->ns_len));
    json_object_set_new(o, "streams", json_integer((json_int_t)b->streams));
    json_object_set_new(o, "bytes", bytes_json(&b->bytes));
    json_object_set_new(o, "erased", json_boolean(f != NULL));
    json_object_set_new(o, "erased_at", f ? time_json(f->time_ms) : json_null());
    json_object_set_new(o, "purge",
                        f ? json_pack("{s:I, s:I, s:I}", "streams_left", (json_int_t)b->left,
                                      "bytes_left", (json_int_t)total(&b->left_bytes),
                                      "groups_fenced", (json_int_t)groups_fenced(a, sc, f))
                          : json_null());
    if (!usage)
        return o;
    json_t *parts = json_array();
    for (unsigned g = 0; g < 256; g++) {
        uint64_t term = 0;
        int leading = 0;
        uint64_t leader = a->cfg.cluster && g < rn_cluster_groups(a->cfg.cluster)
                              ? rn_cluster_group_leader(a->cfg.cluster, g, &term, &leading)
                              : 0;
        if (b->parts[g][0] || b->parts[g][1] || !a->cfg.cluster)
            json_array_append_new(
                parts, json_pack("{s:i, s:o, s:I, s:I, s:I}", "group", (int)g, "leader",
                                 leader ? json_integer((json_int_t)leader) : json_null(), "term",
                                 (json_int_t)term, "parts", (json_int_t)b->parts[g][0], "bytes",
                                 (json_int_t)b->parts[g][1]));
        if (!a->cfg.cluster)
            break;
    }
    json_object_set_new(o, "staged_parts", parts);
    const rn_bucket_counters *c = rn_bucket_usage_of(a->cfg.usage, b->ns, b->ns_len);
    static const rn_bucket_counters none = {0};
    if (!c)
        c = &none;
    json_object_set_new(o, "requests",
                        json_pack("{s:I, s:I, s:I}", "reads", (json_int_t)c->reads, "writes",
                                  (json_int_t)c->writes, "other", (json_int_t)c->other));
    json_object_set_new(o, "bytes_in", json_integer((json_int_t)c->bytes_in));
    json_object_set_new(o, "bytes_out", json_integer((json_int_t)c->bytes_out));
    return o;
}

/* The page's figures once the walk ended: the streams purges left (the
 * fenced ones, a short list), then the answer. */
static void buckets_finish(void *arg, int whole) {
    local_job *j = arg;
    if (!whole) {
        job_end(j, NULL);
        return;
    }
    rn_admin_plane *a = j->a;
    if (j->shown)
        rn_engine_foreach_fenced(a->cfg.engine, add_fenced, j);
    json_t *out = json_object();
    if (j->q.kind != ADMIN_BUCKETS && j->q.kind != ADMIN_USAGE) { /* one bucket */
        json_object_set_new(out, "item",
                            j->shown ? bucket_json(a, &j->sc, &j->sums[0], j->usage) : json_null());
    } else {
        json_t *items = json_array();
        for (size_t k = 0; k < j->shown; k++)
            json_array_append_new(items, bucket_json(a, &j->sc, &j->sums[k], j->usage));
        json_object_set_new(out, "items", items);
        json_object_set_new(out, "more", json_boolean(j->listed > j->q.limit));
    }
    if (j->usage) { /* whose counters these are, since when */
        uint64_t id = a->cfg.cluster ? rn_cluster_self(a->cfg.cluster) : 0;
        json_object_set_new(out, "counters",
                            json_pack("[{s:o, s:s, s:o}]", "node",
                                      id ? json_integer((json_int_t)id) : json_null(), "instance",
                                      a->instance, "started_at", time_json(a->cfg.started_ms)));
    }
    job_end(j, out);
}

/* A page of buckets (one bucket: q->bucket with limit 1), summed over the
 * streams of the job's scope. */
static void buckets(local_job *j) {
    rn_admin_plane *a = j->a;
    const admin_query *q = &j->q;
    int one = q->kind == ADMIN_BUCKET || q->kind == ADMIN_PURGE;
    size_t limit = one ? 1 : q->limit;
    rn_topk_init_owned(&j->page, limit + 1, q->has_after ? q->after : NULL, q->after_len);
    if (one) {
        if (rn_engine_namespace_exists(a->cfg.engine, q->bucket, q->bucket_len))
            rn_topk_offer(&j->page, q->bucket, q->bucket_len, NULL);
    } else {
        rn_engine_foreach_namespace(a->cfg.engine, offer_ns, j);
    }
    j->listed = rn_topk_sort(&j->page);
    j->shown = j->listed < limit ? j->listed : limit;
    j->sums = rn_xcalloc(j->shown ? j->shown : 1, sizeof *j->sums);
    for (size_t k = 0; k < j->shown; k++) {
        j->sums[k].ns = j->page.heap[k].key;
        j->sums[k].ns_len = j->page.heap[k].len;
        if (j->usage)
            j->sums[k].parts = rn_xcalloc(256, sizeof *j->sums[k].parts);
        rn_map_put(&j->by_ns, j->sums[k].ns, j->sums[k].ns_len, &j->sums[k]);
    }
    if (j->shown)
        job_walk(j, add_visible, sums_restart, buckets_finish);
    else
        buckets_finish(j, 1);
}

/* ---- streams ---- */

static json_t *stream_summary(const rn_stream *s, size_t ns_len) {
    byte_counts b = {0};
    count_bytes(s, &b);
    int64_t expires = s->expires_at_ms;
    if (s->ttl_s >= 0) {
        int64_t by_ttl = s->last_access_ms + s->ttl_s * 1000;
        expires = expires < 0 || by_ttl < expires ? by_ttl : expires;
    }
    json_t *o = json_object();
    json_object_set_new(o, "stream", text_json(s->path + ns_len + 1, s->path_len - ns_len - 1));
    json_object_set_new(o, "path", text_json(s->path, s->path_len));
    json_object_set_new(o, "content_type", text_json(s->content_type, s->content_type_len));
    json_object_set_new(o, "tail", offset_json(s->tail));
    json_object_set_new(o, "bytes", json_integer((json_int_t)(b.hot + b.cold)));
    json_object_set_new(o, "closed", json_boolean(s->closed));
    json_object_set_new(o, "created_at", time_json(s->created_ms));
    json_object_set_new(o, "expires_at", time_json(expires));
    json_object_set_new(o, "forked", json_boolean(s->source || s->apart_source));
    json_object_set_new(o, "has_snapshot", json_boolean(s->snapshot.present));
    json_object_set_new(o, "producer_count", json_integer((json_int_t)s->producers.count));
    return o;
}

/* Is s listed by q (in its bucket, under its prefix, in its scope)? */
static int listed_stream(const local_job *j, const rn_stream *s) {
    const admin_query *q = &j->q;
    size_t head = q->bucket_len + 1 + q->prefix_len;
    return s->path_len >= head && s->path_len != q->bucket_len + 1 &&
           memcmp(s->path, q->bucket, q->bucket_len) == 0 && s->path[q->bucket_len] == '/' &&
           memcmp(s->path + q->bucket_len + 1, q->prefix, q->prefix_len) == 0 &&
           in_scope(j->a, &j->sc, s);
}

static void offer_stream(rn_stream *s, void *arg) {
    local_job *j = arg;
    if (listed_stream(j, s))
        rn_topk_offer(&j->page, s->path, s->path_len, NULL);
}

static void page_restart(void *arg) {
    local_job *j = arg;
    rn_topk_free(&j->page);
    rn_topk_init_owned(&j->page, j->q.limit + 1, j->q.has_after ? j->q.after : NULL,
                       j->q.after_len);
}

/* The page's streams, found again by name once the walk ended: one
 * removed meanwhile is left out. */
static void streams_finish(void *arg, int whole) {
    local_job *j = arg;
    if (!whole) {
        job_end(j, NULL);
        return;
    }
    size_t n = rn_topk_sort(&j->page);
    json_t *items = json_array();
    for (size_t k = 0; k < n && k < j->q.limit; k++) {
        const rn_topk_entry *e = &j->page.heap[k];
        const rn_stream *s = rn_engine_find(j->a->cfg.engine, e->key, e->len);
        if (s && listed_stream(j, s))
            json_array_append_new(items, stream_summary(s, j->q.bucket_len));
    }
    job_end(j, json_pack("{s:o, s:b}", "items", items, "more", n > j->q.limit));
}

static void streams(local_job *j) {
    rn_topk_init_owned(&j->page, j->q.limit + 1, j->q.has_after ? j->q.after : NULL,
                       j->q.after_len);
    job_walk(j, offer_stream, page_restart, streams_finish);
}

/* ---- one stream ---- */

static json_t *producers_json(const rn_stream *s) {
    json_t *all = json_array();
    size_t i = 0;
    void *v;
    while (rn_map_next(&s->producers, &i, &v)) {
        const rn_producer *p = v;
        json_array_append_new(
            all,
            json_pack("{s:o, s:I, s:I, s:o, s:b}", "id", text_json(p->id, p->id_len), "epoch",
                      (json_int_t)p->epoch, "last_seq", (json_int_t)p->last_seq, "last_write_at",
                      time_json(p->last_ms), "epoch_open", p->history == RN_EPOCH_OPEN));
    }
    return all;
}

/* The stream's state: what its group's leader holds (cluster mode). */
static void stream_state(rn_admin_plane *a, const rn_stream *s, size_t ns_len, json_t *o) {
    json_t *sum = stream_summary(s, ns_len);
    json_object_update(o, sum);
    json_decref(sum);
    byte_counts b = {0};
    count_bytes(s, &b);
    char id[17], inc[24];
    snprintf(id, sizeof id, "%016llx", (unsigned long long)s->id);
    snprintf(inc, sizeof inc, "%llu", (unsigned long long)s->incarnation);
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "group",
                        a->cfg.cluster ? json_integer((json_int_t)rn_placement_id_group(s->id))
                                       : json_null());
    json_object_set_new(o, "incarnation", json_string(inc));
    if (s->has_previous) {
        snprintf(inc, sizeof inc, "%llu", (unsigned long long)s->previous_incarnation);
        json_object_set_new(o, "previous_incarnation", json_string(inc));
        json_object_set_new(o, "inherited_offset", offset_json(s->inherited_offset));
    } else {
        json_object_set_new(o, "previous_incarnation", json_null());
        json_object_set_new(o, "inherited_offset", json_null());
    }
    json_object_set_new(o, "retained_offset", offset_json(s->retained));
    json_object_set_new(o, "ttl_seconds", s->ttl_s >= 0 ? json_integer(s->ttl_s) : json_null());
    json_object_set_new(o, "bytes_by_tier", bytes_json(&b));
    json_object_set_new(o, "appends", json_integer((json_int_t)s->appends));
    json_object_set_new(o, "last_seq",
                        s->last_seq ? text_json(s->last_seq, s->last_seq_len) : json_null());
    json_object_set_new(
        o, "snapshot",
        s->snapshot.present
            ? json_pack("{s:o, s:I, s:s, s:o}", "offset", offset_json(s->snapshot.offset), "size",
                        (json_int_t)s->snapshot.size, "tier", s->snapshot.cold ? "cold" : "local",
                        "content_type",
                        text_json(s->snapshot.content_type, s->snapshot.content_type_len))
            : json_null());
    /* a fork across groups: its source as this node's replica of its group holds it */
    const rn_stream *src =
        s->apart_source ? rn_engine_stream(a->cfg.engine, s->apart_source) : s->source;
    json_object_set_new(o, "fork_of",
                        s->source || s->apart_source
                            ? json_pack("{s:o, s:o}", "path",
                                        src ? text_json(src->path, src->path_len) : json_null(),
                                        "offset", offset_json(s->fork_offset))
                            : json_null());
    json_object_set_new(o, "forks", json_integer((json_int_t)(s->refcount + s->npins)));
    json_object_set_new(o, "producers", producers_json(s));
    json_object_set_new(o, "epoch_floor",
                        s->has_floor ? json_integer((json_int_t)s->epoch_floor) : json_null());
    uint64_t count = 0, bytes = 0;
    int known = a->cfg.tiers && rn_tiers_parts_known(a->cfg.tiers, s->id, &count, &bytes) == 0;
    json_object_set_new(
        o, "staged_parts",
        known ? json_pack("{s:I, s:I}", "parts", (json_int_t)count, "bytes", (json_int_t)bytes)
              : json_null());
}

static json_t *stream(rn_admin_plane *a, const admin_query *q, const admin_scope *sc) {
    char key[2 * ADMIN_NAME_MAX + 2];
    size_t len = q->bucket_len + 1 + q->stream_len;
    memcpy(key, q->bucket, q->bucket_len);
    key[q->bucket_len] = '/';
    memcpy(key + q->bucket_len + 1, q->stream, q->stream_len);
    rn_stream *s = rn_engine_find(a->cfg.engine, key, len);
    json_t *o = json_object();
    if (s && in_scope(a, sc, s))
        stream_state(a, s, q->bucket_len, o);
    /* what every node holds of it: its live readers and subscriptions */
    json_object_set_new(o, "live_readers", json_integer(s ? (json_int_t)s->live_readers : 0));
    json_t *subs = json_array();
    if (a->cfg.subs)
        rn_subs_admin_links(a->cfg.subs, key, len, subs);
    json_object_set_new(o, "subscriptions", subs);
    return json_pack("{s:o}", "item", s ? o : (json_decref(o), json_null()));
}

/* ---- subscriptions, the node ---- */

/* This node's listing keys: the id, after "NNN/" (the node) in a cluster,
 * where every node lists its own. */
static json_t *subscriptions(rn_admin_plane *a, const admin_query *q) {
    json_t *items = json_array();
    int more = 0;
    char prefix[24] = "";
    uint64_t node = a->cfg.cluster ? rn_cluster_self(a->cfg.cluster) : 0;
    if (node)
        snprintf(prefix, sizeof prefix, "%03llu/", (unsigned long long)node);
    size_t pl = strlen(prefix);
    const char *after = q->has_after ? q->after : NULL;
    size_t after_len = q->after_len;
    int none = 0; /* the cursor is past this node's keys */
    if (after && pl) {
        int c = rn_topk_cmp(after, after_len < pl ? after_len : pl, prefix, pl);
        if (c < 0 || (c == 0 && after_len < pl))
            after = NULL; /* before this node's keys: from its first */
        else if (c > 0)
            none = 1;
        else {
            after += pl;
            after_len -= pl;
        }
    }
    if (a->cfg.subs && !none)
        more = rn_subs_admin_page(a->cfg.subs, after, after_len, q->limit, items);
    size_t i;
    json_t *it;
    json_array_foreach(items, i, it) {
        json_object_set_new(it, "node", node ? json_integer((json_int_t)node) : json_null());
    }
    return json_pack("{s:o, s:b}", "items", items, "more", more);
}

static void count_ns(const char *ns, size_t len, void *arg) {
    (void)ns, (void)len;
    (*(uint64_t *)arg)++;
}

json_t *admin_node(rn_admin_plane *a, uint64_t streams) {
    uint64_t buckets = 0;
    rn_engine_foreach_namespace(a->cfg.engine, count_ns, &buckets);
    uint64_t id = a->cfg.cluster ? rn_cluster_self(a->cfg.cluster) : 0;
    json_t *o = json_object();
    json_object_set_new(o, "version", json_string(RUNNEL_VERSION));
    json_object_set_new(o, "node", id ? json_integer((json_int_t)id) : json_null());
    json_object_set_new(o, "cluster_id", json_string(a->cfg.cluster_id));
    json_object_set_new(o, "instance", json_string(a->instance));
    json_object_set_new(o, "started_at", time_json(a->cfg.started_ms));
    json_object_set_new(o, "uptime_ms",
                        json_integer((json_int_t)(rn_now_ms() - a->cfg.started_ms)));
    json_object_set_new(o, "ready", json_boolean(a->cfg.ready(a->cfg.ready_arg)));
    json_object_set_new(o, "streams", json_integer((json_int_t)streams));
    json_object_set_new(o, "buckets", json_integer((json_int_t)buckets));
    json_object_set_new(o, "live_readers", json_integer((json_int_t)rn_live_count(a->cfg.live)));
    json_object_set_new(o, "connections",
                        json_integer((json_int_t)rn_http_connections(a->cfg.http)));
    return json_pack("{s:o}", "item", o);
}

void admin_local(rn_admin_plane *a, const admin_query *q, const admin_scope *sc, admin_local_cb cb,
                 void *arg) {
    assert(q->kind != ADMIN_NODE); /* the overview is admin_answer_node's */
    if (q->kind == ADMIN_STREAM) {
        cb(arg, stream(a, q, sc));
        return;
    }
    if (q->kind == ADMIN_SUBSCRIPTIONS) {
        cb(arg, subscriptions(a, q));
        return;
    }
    local_job *j = rn_xcalloc(1, sizeof *j);
    *j = (local_job){.a = a, .q = *q, .sc = *sc, .cb = cb, .arg = arg};
    if (q->kind == ADMIN_STREAMS) {
        streams(j);
        return;
    }
    j->usage = q->kind == ADMIN_USAGE;
    buckets(j);
}

size_t admin_item_key(const admin_query *q, const json_t *item, char *key, size_t cap) {
    const char *field = q->kind == ADMIN_STREAMS ? "path" : "bucket";
    if (q->kind == ADMIN_SUBSCRIPTIONS) {
        const json_t *node = json_object_get(item, "node");
        const char *id = json_string_value(json_object_get(item, "id"));
        int n = json_is_integer(node)
                    ? snprintf(key, cap, "%03lld/%s", (long long)json_integer_value(node), id)
                    : snprintf(key, cap, "%s", id ? id : "");
        return n < 0 ? 0 : (size_t)n < cap ? (size_t)n : cap - 1;
    }
    const json_t *v = json_object_get(item, field);
    size_t len = json_string_length(v);
    if (len >= cap)
        len = cap - 1;
    memcpy(key, json_string_value(v) ? json_string_value(v) : "", len);
    key[len] = 0;
    return len;
}
