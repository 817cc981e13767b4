/*
 * subs.c — the subscription module's life cycle and its engine observer.
 * See subs.h; the data model is described in subs_int.h.
 *
 * Start: keys, then the state file, then reconciliation with the engine's
 * streams (links whose stream vanished or was re-created while the state
 * file lagged behind the log, and pattern matches created meanwhile), then
 * the observer, then resumption of wakes. In cluster mode the state comes
 * from the replicated log instead, loaded whenever this node takes the
 * lead of its group (replica.c), and the observer acts only then. Engine
 * events:
 *   created  pattern-matching subscriptions gain a glob link at the new
 *            stream's start (everything written to it is news — this is how
 *            a stream created with data, or discovered by its first append,
 *            is linked before that data for wake purposes); links to a path
 *            that held another stream start over there too. A fork's start
 *            is its fork offset: the bytes it shares with its source are
 *            not news.
 *   changed  each link to the path may wake its subscription
 *   removed  glob-only links go away; explicit links stay, reset to 0
 * A stream event touching no subscription costs one map lookup. The
 * streams of groups this node does not host make the same events from
 * their leaders' answers (elsewhere.c).
 */
#include "subs/subs_int.h"
#include "subs/url.h"
#include "protocol/routing.h"
#include "util/files.h"
#include "util/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static void reset_link(rn_sub_link *l, const rn_seen *s) {
    l->acked = s ? s->start : 0;
    l->stream_id = s ? s->id : 0;
    l->snapshot = -1;
}

void rn_subs_seen_created(rn_subs *S, const rn_seen *s) {
    int dirty = 0;
    size_t i = 0;
    void *v;
    while (S->pattern_subs && rn_map_next(&S->subs, &i, &v)) {
        rn_sub *sub = v;
        if (!rn_sub_matches(sub, s->path, s->path_len))
            continue;
        rn_sub_link *l = rn_sub_link_get(sub, s->path, s->path_len);
        if (!l)
            l = rn_sub_link_add(S, sub, s->path, s->path_len, s->start, s->id);
        l->is_glob = 1;
        dirty = 1;
    }
    rn_watch *w = rn_watch_get(S, s->path, s->path_len);
    for (rn_list_node *n = w ? w->links.first : NULL; n; n = n->next) {
        rn_sub_link *l = rn_list_entry(n, rn_sub_link, watch_link);
        if (l->stream_id != s->id) {
            reset_link(l, s);
            dirty = 1;
        }
    }
    if (dirty)
        rn_durable_changed(S->state);
    for (rn_list_node *n = w ? w->links.first : NULL; n; n = n->next) {
        rn_sub_link *l = rn_list_entry(n, rn_sub_link, watch_link);
        rn_wake_maybe(S, l->sub, l, s->tail);
    }
}

void rn_subs_seen_removed(rn_subs *S, const char *path, size_t len) {
    rn_watch *w = rn_watch_get(S, path, len);
    if (!w)
        return;
    for (rn_list_node *n = w->links.first, *next; n; n = next) {
        next = n->next;
        rn_sub_link *l = rn_list_entry(n, rn_sub_link, watch_link);
        if (l->is_explicit)
            reset_link(l, NULL);
        else
            rn_sub_link_remove(S, l);
    }
    rn_durable_changed(S->state);
}

void rn_subs_seen_changed(rn_subs *S, const rn_seen *s) {
    rn_watch *w = rn_watch_get(S, s->path, s->path_len);
    for (rn_list_node *n = w ? w->links.first : NULL; n; n = n->next) {
        rn_sub_link *l = rn_list_entry(n, rn_sub_link, watch_link);
        rn_wake_maybe(S, l->sub, l, s->tail);
    }
}

static void on_stream(rn_stream *s, rn_stream_event ev, void *arg) {
    rn_subs *S = arg;
    if (S->subs.count == 0 || !S->active)
        return;
    rn_seen seen = rn_seen_of(s);
    if (ev == RN_STREAM_CREATED)
        rn_subs_seen_created(S, &seen);
    else if (ev == RN_STREAM_REMOVED)
        rn_subs_seen_removed(S, s->path, s->path_len);
    else
        rn_subs_seen_changed(S, &seen);
}

typedef struct {
    rn_subs *S;
    rn_sub *sub;
    int dirty;
} reconcile_ctx;

static void link_missed(rn_stream *s, void *arg) {
    reconcile_ctx *c = arg;
    if (rn_sub_matches(c->sub, s->path, s->path_len) &&
        !rn_sub_link_get(c->sub, s->path, s->path_len)) {
        rn_sub_link_add(c->S, c->sub, s->path, s->path_len, s->fork_offset, s->id)->is_glob = 1;
        c->dirty = 1;
    }
}

void rn_subs_reconcile(rn_subs *S) {
    reconcile_ctx c = {S, NULL, 0};
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->subs, &i, &v)) {
        c.sub = v;
        rn_sub_link **all = rn_sub_links_sorted(c.sub);
        size_t n = c.sub->links.count;
        for (size_t k = 0; k < n; k++) {
            rn_sub_link *l = all[k];
            rn_stream *s = rn_engine_find(S->engine, l->path, l->path_len);
            rn_group_route r;
            if (rn_routing_route(l->path, l->path_len, &r) && !r.caught_up)
                continue; /* cluster mode: this replica may not hold the stream yet */
            if (!s && !l->is_explicit) {
                rn_sub_link_remove(S, l);
                c.dirty = 1;
            } else if (l->stream_id != (s ? s->id : 0)) {
                rn_seen seen = s ? rn_seen_of(s) : (rn_seen){0};
                reset_link(l, s ? &seen : NULL);
                c.dirty = 1;
            }
        }
        free(all);
        if (c.sub->cfg.pattern)
            rn_engine_foreach(S->engine, link_missed, &c);
    }
    if (c.dirty)
        rn_durable_changed(S->state);
}

void rn_subs_clear(rn_subs *S) {
    size_t n = 0, i = 0;
    void *v;
    rn_sub **all = rn_xcalloc(S->subs.count ? S->subs.count : 1, sizeof *all);
    while (rn_map_next(&S->subs, &i, &v))
        all[n++] = v;
    for (size_t k = 0; k < n; k++)
        rn_sub_remove(S, all[k]);
    free(all);
}

static void free_subs(rn_subs *S) {
    rn_subs_clear(S);
    rn_elsewhere_close(S);
    rn_map_free(&S->subs);
    rn_map_free(&S->watch);
}

static void free_module(rn_subs *S) {
    free_subs(S);
    rn_subs_keys_free(S->keys);
    rn_outbound_free(S->out);
    rn_outbound_free(S->peer_out);
    free(S->dir);
    free(S->public_url);
    free(S->tls_ca);
    free(S);
}

/* Creates <data>/subs and loads keys and state: everything that can fail,
 * before any handle exists. */
/* Webhook deliveries connect only where the SSRF rules allow (url.h). */
static int webhook_policy(void *arg, const struct sockaddr *addr) {
    rn_subs *S = arg;
    return rn_webhook_addr_allowed(addr, S->allow_loopback);
}

static int load(rn_subs *S, const rn_subs_config *cfg, char *err, size_t errcap) {
    rn_buf dir = {0};
    rn_buf_appendf(&dir, "%s/subs", cfg->data_dir);
    rn_buf_append_byte(&dir, 0);
    S->dir = (char *)rn_buf_steal(&dir, NULL);
    if (mkdir(S->dir, 0700) < 0 && errno != EEXIST) {
        snprintf(err, errcap, "cannot create %s: %s", S->dir, strerror(errno));
        return -1;
    }
    if (!(S->keys = rn_subs_keys_open(S->dir, err, errcap)))
        return -1;
    if (cfg->replicated) /* the keys until the replicated state brings the cluster's */
        return 0;
    rn_buf state = {0};
    int rc = rn_read_file(S->dir, RN_SUBS_STATE_FILE, &state);
    if (rc == 0)
        rc = rn_state_load(S, state.data, state.len, err, errcap);
    else if (rc == -ENOENT)
        rc = 0;
    else
        snprintf(err, errcap, "cannot read %s/%s: %s", S->dir, RN_SUBS_STATE_FILE, strerror(-rc));
    rn_buf_free(&state);
    return rc < 0 ? -1 : 0;
}

rn_subs *rn_subs_open(uv_loop_t *loop, rn_engine *engine, const rn_subs_config *cfg, char *err,
                      size_t errcap) {
    rn_subs *S = rn_xcalloc(1, sizeof *S);
    S->loop = loop;
    S->engine = engine;
    S->public_url = rn_xstrdup(cfg->public_url);
    S->allow_loopback = cfg->allow_loopback;
    S->webhook_timeout_ms = cfg->webhook_timeout_ms;
    assert(cfg->max_subs > 0 && cfg->max_explicit_links > 0);
    S->max_subs = (size_t)cfg->max_subs;
    S->max_explicit_links = (size_t)cfg->max_explicit_links;
    S->replicated = cfg->replicated;
    S->tls_ca = cfg->tls_ca && cfg->tls_ca[0] ? rn_xstrdup(cfg->tls_ca) : NULL;
    S->active = !cfg->replicated;
    if (load(S, cfg, err, errcap) < 0) {
        free_module(S);
        return NULL;
    }
    S->state =
        rn_durable_open(loop, S->dir, RN_SUBS_STATE_FILE, rn_state_encode, rn_wake_on_written, S);
    rn_outbound_config out = {.user_agent = cfg->user_agent,
                              .policy = webhook_policy,
                              .policy_arg = S,
                              .policy_refusal =
                                  "the host resolved only to addresses the webhook policy refuses",
                              .max_running = 256, /* one delivery per subscription at most */
                              .max_queued = SIZE_MAX};
    S->out = rn_outbound_new(loop, &out);
    uv_timer_init(loop, &S->timer);
    S->timer.data = S;
    rn_engine_observe(engine, on_stream, S);
    if (S->replicated) {
        rn_subs_replica_start(S); /* loads and resumes where this node leads */
        return S;
    }
    rn_subs_reconcile(S);
    rn_wake_resume(S);
    return S;
}

void rn_subs_quiesce(rn_subs *S) {
    if (S->quiesced)
        return;
    S->quiesced = 1;
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->subs, &i, &v)) {
        rn_sub *sub = v;
        if (sub->fetch) {
            rn_fetch_cancel(sub->fetch);
            sub->fetch = NULL;
        }
    }
    uv_timer_stop(&S->timer);
    rn_outbound_stop(S->out);
    if (S->peer_out)
        rn_outbound_stop(S->peer_out);
}

void rn_subs_stop(rn_subs *S) {
    rn_subs_quiesce(S);
    if (S->replicated)
        rn_subs_replica_stop(S);
    rn_durable_stop(S->state);
    uv_close((uv_handle_t *)&S->timer, NULL);
}

void rn_subs_close(rn_subs *S) {
    if (rn_durable_close(S->state) < 0)
        rn_log(RN_LOG_ERROR, "subs_state_write",
               "the final write failed; changes since the last successful write are lost");
    free_module(S);
}
