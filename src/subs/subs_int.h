/*
 * subs_int.h — the subscription module's shared state, private to
 * src/subs/. subs.h is the public face; this header is what the files of
 * the module (registry, wake, webhook, wakestream, view, state, api,
 * replica, elsewhere) share.
 *
 * Data model. A subscription (rn_sub) has a configuration, a set of links
 * (one per stream path it follows, rn_sub_link, keyed by path in
 * sub->links) and its wake state. Every link is also on a per-path list in
 * the module's watch index (rn_watch), so an engine event for a path finds
 * the links to it with one map lookup and costs nothing for unwatched
 * streams.
 *
 * Offsets are byte positions (the engine's tails); acked = N means
 * everything before position N was processed, i.e. the next read starts at
 * the offset token of N — the protocol's "last processed, inclusive" for
 * our position-between-bytes tokens. A link records the engine id of the
 * stream its acked position belongs to, so a stream that is deleted and
 * created again under the same path starts over at 0.
 *
 * Wake state (persisted unless marked runtime):
 *   no wake          wake_id[0] == 0
 *   webhook wake     next_attempt_ms > 0: a delivery attempt is due (or in
 *                    flight: fetch != NULL); attempts counts failed ones;
 *                    lease_expires_ms > 0: the receiver accepted it (2xx
 *                    or a callback) and holds it until then
 *   pull-wake wake   announced: its wake event was written to the wake
 *                    stream; holder != NULL: claimed, lease_expires_ms set;
 *                    next_attempt_ms > 0: the event is to be tried again
 * Side effects that reveal a wake (the webhook request, the wake event)
 * happen only after the state that issued it is on disk: a new wake joins
 * the announce list and rn_wake_on_written() releases it.
 */
#ifndef RN_SUBS_INT_H
#define RN_SUBS_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "net/outbound.h"
#include "subs/durable.h"
#include "subs/keys.h"
#include "subs/sub_config.h"
#include "subs/subs.h"
#include "subs/token.h"
#include "protocol/errors.h"
#include "protocol/routing.h"
#include "util/list.h"
#include "util/map.h"

#define RN_TOKEN_TTL_S 3600 /* backstop expiry of callback and claim tokens */
#define RN_SUBS_STATE_FILE "state.json"

typedef struct rn_sub rn_sub;
typedef struct rn_sub_link rn_sub_link;

/* A stream as the subscriptions see it: one of the engine's, or one of a
 * group this node does not host, as its leader last told (elsewhere.c).
 * The pointers are borrowed. */
typedef struct {
    const char *path;
    size_t path_len;
    uint64_t id, tail;
    uint64_t start; /* where a link to it starts when it appears: its fork offset */
    const char *content_type;
    size_t content_type_len;
} rn_seen;

/* A stream of a group another node hosts (elsewhere.c). */
typedef struct {
    char *path; /* key in rn_subs.far */
    size_t path_len;
    unsigned group;
    uint64_t id, tail, start;
    char *content_type;
    uint64_t round; /* the last round whose answer named it */
} rn_far_stream;

struct rn_sub_link {
    char *path; /* key in sub->links and in the watch index */
    size_t path_len;
    rn_sub *sub;
    int is_explicit, is_glob;
    uint64_t acked;
    uint64_t stream_id;      /* engine id of the stream `acked` belongs to; 0: none */
    int64_t snapshot;        /* tail sent with the current wake; -1: none */
    rn_list_node watch_link; /* in its path's rn_watch */
};

/* All links to one stream path. */
typedef struct {
    char *path;
    size_t path_len;
    rn_list links; /* rn_sub_link.watch_link */
} rn_watch;

struct rn_sub {
    rn_subs *owner;
    char *id; /* key in owner->subs */
    size_t id_len;
    rn_sub_config cfg;
    uint8_t hash[32];
    int64_t created_ms;
    rn_map links; /* path -> rn_sub_link */
    /* wake state */
    uint64_t generation;
    char wake_id[RN_WAKE_ID_MAX];
    char *trigger; /* stream named by the wake (pull-wake event) */
    int announced;
    char *holder;
    int64_t lease_expires_ms;
    uint32_t attempts;
    int64_t next_attempt_ms;
    /* runtime only */
    int announcing; /* on the announce list, waiting for announce_seq */
    uint64_t announce_seq;
    rn_list_node announce_link; /* in owner->announcing while announcing */
    rn_fetch *fetch;            /* webhook: the delivery attempt; pull-wake: a wake event sent to
                                   another node (cluster mode) */
};

struct rn_subs {
    uv_loop_t *loop;
    rn_engine *engine;
    char *dir; /* <data>/subs */
    char *public_url;
    int allow_loopback;
    uint64_t webhook_timeout_ms;
    rn_subs_keys *keys;
    rn_durable *state;
    rn_outbound *out;
    rn_map subs;                         /* id -> rn_sub */
    rn_map watch;                        /* path -> rn_watch */
    size_t pattern_subs;                 /* subscriptions with a pattern */
    size_t explicit_links;               /* links with is_explicit set, of every subscription */
    size_t max_subs, max_explicit_links; /* rn_subs_config's bounds */
    uv_timer_t timer;                    /* leases and delivery retries */
    int64_t timer_due_ms;                /* 0: not armed */
    rn_list announcing; /* rn_sub.announce_link: wakes waiting for their state write */
    int quiesced;
    /* cluster mode (replica.c) */
    int replicated;
    int active;            /* this node leads the state's group and delivers (always, alone) */
    unsigned group;        /* the group whose log carries the state */
    uint64_t term;         /* the leadership's term this node took over in */
    rn_outbound *peer_out; /* wake events to other nodes' wake streams */
    char *tls_ca;          /* its CA file (--tls-ca; NULL: the system's) */
    uv_timer_t role_timer; /* follows the group's leadership */
    int load_failed;       /* the replicated state did not load: logged once */
    /* cluster mode: the streams of groups this node does not host (elsewhere.c) */
    rn_map far;                 /* path -> rn_far_stream */
    uv_timer_t far_timer;       /* asks again every RN_ELSEWHERE_MS while delivering */
    rn_elsewhere_ask *asking;   /* the round in flight */
    uint64_t round;             /* rounds started */
    rn_list far_waiting;        /* rn_far_waiter: for the round after the one in flight */
    rn_list far_covered;        /* rn_far_waiter: covered by the round in flight */
    rn_list far_again;          /* rn_far_waiter: after an incomplete round, for the next tick */
    rn_group_set round_far;     /* groups placed elsewhere when the round in flight started */
    rn_group_set round_covered; /* groups its answers covered so far */
    rn_elsewhere_cursor cursors[RN_GROUPS_MAX]; /* where the view of each group stands */
};

/* ---- registry.c: subscriptions, links and the watch index ---- */

rn_sub *rn_sub_find(rn_subs *S, const char *id, size_t len);
/* Adds a subscription without links; takes over cfg. */
rn_sub *rn_sub_add(rn_subs *S, const char *id, size_t id_len, rn_sub_config *cfg,
                   int64_t created_ms);
/* Removes and frees a subscription: cancels its delivery, drops its links. */
void rn_sub_remove(rn_subs *S, rn_sub *sub);
rn_sub_link *rn_sub_link_get(const rn_sub *sub, const char *path, size_t len);
/* Adds a link with no link type set; the path must not be linked yet. */
rn_sub_link *rn_sub_link_add(rn_subs *S, rn_sub *sub, const char *path, size_t len, uint64_t acked,
                             uint64_t stream_id);
void rn_sub_link_remove(rn_subs *S, rn_sub_link *l);
/* Sets or clears the link's explicit type (counted in S->explicit_links). */
void rn_sub_link_set_explicit(rn_subs *S, rn_sub_link *l, int on);
/* Links path (explicit or glob) at the stream's current tail (0 when it
 * does not exist); an existing link only gains the link type. */
rn_sub_link *rn_sub_link_at_tail(rn_subs *S, rn_sub *sub, const char *path, size_t len, int glob);
/* Glob-links every existing stream the pattern matches, at its tail. */
void rn_sub_backfill(rn_subs *S, rn_sub *sub);
/* True when the subscription's pattern covers path (never its own wake
 * stream, which would wake itself with every wake event). */
int rn_sub_matches(const rn_sub *sub, const char *path, size_t len);
rn_watch *rn_watch_get(rn_subs *S, const char *path, size_t len);
/* The stream's current tail, 0 when it does not exist. */
uint64_t rn_link_tail(rn_subs *S, const rn_sub_link *l);
/* The first link (in path order) with data past its acked position. */
rn_sub_link *rn_sub_first_pending(rn_subs *S, const rn_sub *sub);
/* The links sorted by path; the caller frees the array. */
rn_sub_link **rn_sub_links_sorted(const rn_sub *sub);

/* ---- wake.c: wakes, leases, retries, fencing, acks ---- */

/* Issues a wake if sub is idle and has pending work. With a trigger link,
 * pending means trigger_tail > trigger->acked (no stream lookups: safe
 * inside engine observers); without one, all links are checked. */
void rn_wake_maybe(rn_subs *S, rn_sub *sub, const rn_sub_link *trigger, uint64_t trigger_tail);
/* Ends the current wake (done, release, lease expiry) and issues the next
 * one if work is pending. Returns 1 when it did. */
int rn_wake_finish(rn_subs *S, rn_sub *sub);
/* Records a webhook attempt's outcome for the current wake. */
void rn_wake_delivered(rn_subs *S, rn_sub *sub, int done);
void rn_wake_delivery_failed(rn_subs *S, rn_sub *sub);
/* Checks a callback/ack/release request against the current wake: token
 * (401), then generation and wake id (409 FENCED). Returns RN_E_COUNT when
 * it may proceed. */
rn_error rn_wake_check(rn_subs *S, rn_sub *sub, const char *token, size_t token_len,
                       const char *wake_id, uint64_t generation);
/* Applies acks (already shape-checked: an array of {stream|path, offset}
 * string pairs), then ends the wake (done) or extends its lease. Nothing
 * is applied when an ack is invalid (RN_E_SUB_ACK_INVALID). */
rn_error rn_wake_progress(rn_subs *S, rn_sub *sub, const json_t *acks, int done, int *next_wake);
/* Pull-wake claim by worker. Returns RN_E_COUNT on success. */
rn_error rn_wake_claim(rn_subs *S, rn_sub *sub, const char *worker);
/* A pull-wake event that could not be written yet (wakestream.c): tried
 * again a second later (next_attempt_ms, in memory and persisted). */
void rn_wake_announce_again(rn_subs *S, rn_sub *sub);
/* Durable-write hook: announces the wakes whose state is now on disk. */
void rn_wake_on_written(void *arg);
/* Restart: re-arms leases and retries, re-announces unannounced wakes,
 * wakes subscriptions with pending work. */
void rn_wake_resume(rn_subs *S);
/* Removes sub from the announce list (if on it). */
void rn_wake_unannounce(rn_subs *S, rn_sub *sub);

/* ---- webhook.c / wakestream.c: announcing a wake ---- */

/* POSTs body (taken over) to url through out with the webhook timeout;
 * the fetch handle (NULL when out refused it: fn will not run). */
rn_fetch *rn_subs_post(rn_subs *S, rn_outbound *out, const char *url, const char *const *headers,
                       size_t nheaders, rn_buf *body, rn_fetch_fn fn, void *arg);
/* Starts a delivery attempt of sub's current wake. */
void rn_webhook_deliver(rn_subs *S, rn_sub *sub);
/* Appends sub's current wake event to its wake stream. */
void rn_wakestream_announce(rn_subs *S, rn_sub *sub);

/* ---- view.c: JSON renderings ---- */

/* The subscription as GET returns it (§6.3). */
json_t *rn_view_sub(rn_subs *S, const rn_sub *sub);
/* The streams array of a wake or claim (§7.1, §7.2); records each link's
 * tail as its snapshot. */
json_t *rn_view_wake_streams(rn_subs *S, rn_sub *sub);
/* A new string with the URL of a subscription action (e.g. "callback"). */
char *rn_view_action_url(const rn_subs *S, const rn_sub *sub, const char *action);

/* ---- elsewhere.c: streams of groups this node does not host ---- */

#define RN_ELSEWHERE_MS 250       /* how often the deliverer asks their leaders */
#define RN_ELSEWHERE_WAIT_MS 5000 /* how long a change waits for a complete round */

typedef struct {
    void (*fn)(void *arg, int complete);
    void *arg;
    int all_groups;      /* it looks up streams of every group (a pattern's backfill) */
    rn_group_set groups; /* else those of these groups (rn_elsewhere_need) */
    uint64_t give_up_ms; /* set by rn_elsewhere_wait */
    rn_list_node link;
} rn_far_waiter;

/* What the subscriptions see of an engine stream. */
rn_seen rn_seen_of(const rn_stream *s);
/* Finds the stream at path: the engine's when its group is hosted here (or
 * on a single node), else the last answer's of its group's leader. */
int rn_subs_stream(rn_subs *S, const char *path, size_t len, rn_seen *out);
/* Calls fn for every stream rn_subs_stream would find. */
void rn_subs_foreach(rn_subs *S, void (*fn)(const rn_seen *s, void *arg), void *arg);
/* Starts (delivering) or stops (not, or stopping) asking. Stopping drops
 * what was learnt and runs every waiter. */
void rn_elsewhere_start(rn_subs *S);
void rn_elsewhere_stop(rn_subs *S);
/* Adds the group of the stream at path to w->groups when it is placed
 * elsewhere (the engine holds the streams of the others). */
void rn_elsewhere_need(rn_subs *S, rn_far_waiter *w, const char *path, size_t len);
/* w->fn(w->arg, 1) once a round that started after this call ended with
 * every group w needs (w->all_groups: every group placed elsewhere; else
 * w->groups) covered by its leader's answer; at once, before returning,
 * when w needs no group or there is nothing to ask. w->fn(w->arg, 0) when
 * no such round came within RN_ELSEWHERE_WAIT_MS, or this node stopped
 * delivering. */
void rn_elsewhere_wait(rn_subs *S, rn_far_waiter *w);
/* Frees the view (the module closes; after rn_elsewhere_stop in cluster
 * mode). */
void rn_elsewhere_close(rn_subs *S);

/* ---- subs.c: life cycle ---- */

/* What a stream's appearance, growth or removal does to the links (the
 * engine's observer, and elsewhere.c for the streams of other groups). */
void rn_subs_seen_created(rn_subs *S, const rn_seen *s);
void rn_subs_seen_changed(rn_subs *S, const rn_seen *s);
void rn_subs_seen_removed(rn_subs *S, const char *path, size_t len);
/* Removes every subscription (memory only). */
void rn_subs_clear(rn_subs *S);
/* Brings links in line with the engine's streams (after a load). */
void rn_subs_reconcile(rn_subs *S);

/* ---- replica.c: cluster mode ---- */

/* The key whose group carries the subscriptions. */
#define RN_SUBS_KEY "__ds/subscriptions"
/* Starts following the leadership of the state's group: its leader loads
 * the replicated state and delivers; any other node holds nothing. */
void rn_subs_replica_start(rn_subs *S);
/* Takes up or gives up delivery as the group's leadership says now;
 * returns S->active. */
int rn_subs_replica_sync(rn_subs *S);
void rn_subs_replica_stop(rn_subs *S);

/* ---- state.c: the state file ---- */

void rn_state_encode(void *arg, rn_buf *out);
/* Loads the state file's content into S. Returns 0, or -1 with a message. */
int rn_state_load(rn_subs *S, const uint8_t *data, size_t len, char *err, size_t errcap);

#endif
