/*
 * nodes.c — the nodes behind a standalone gateway and their probes. See
 * nodes.h.
 */
#include "gateway/nodes.h"
#include "util/log.h"
#include "util/text.h"

#include <stdlib.h>
#include <string.h>

#define PROBE_DOWN_MS 1000
#define PROBE_UP_MS 10000
#define PROBE_TIMEOUT_MS 2000

typedef struct {
    rn_nodes *ns;
    char origin[256];
    char authority[256];
    int usable;
    rn_up_call *probe;
    uint64_t limit; /* its Ursula-Max-Request-Bytes (0: none heard) */
    int ok;         /* the probe's answer was 200 */
    int refused;    /* its limit is below the gateway's */
    uint64_t next_probe_ms;
} node;

struct rn_nodes {
    uv_loop_t *loop;
    rn_upstreams *up;
    node *nodes;
    size_t n;
    size_t next; /* round robin */
    uint64_t request_limit;
    uv_timer_t timer;
    int stopped;
    /* a probe of every node (rn_nodes_probe) */
    size_t round_left;
    void (*round_done)(void *arg, size_t usable, const char *why);
    void *round_arg;
    char why[512];
};

static void probe(node *nd);

static size_t usable_count(const rn_nodes *ns) {
    size_t k = 0;
    for (size_t i = 0; i < ns->n; i++)
        k += (size_t)ns->nodes[i].usable;
    return k;
}

static void on_tick(uv_timer_t *t) {
    rn_nodes *ns = t->data;
    uint64_t now = uv_now(ns->loop);
    for (size_t i = 0; i < ns->n; i++)
        if (!ns->nodes[i].probe && now >= ns->nodes[i].next_probe_ms)
            probe(&ns->nodes[i]);
}

rn_nodes *rn_nodes_new(uv_loop_t *loop, rn_upstreams *up, const char *const *urls, size_t n,
                       uint64_t request_limit) {
    rn_nodes *ns = rn_xcalloc(1, sizeof *ns);
    ns->loop = loop;
    ns->up = up;
    ns->request_limit = request_limit;
    ns->nodes = rn_xcalloc(n ? n : 1, sizeof *ns->nodes);
    ns->n = n;
    for (size_t i = 0; i < n; i++) {
        node *nd = &ns->nodes[i];
        nd->ns = ns;
        size_t len = strlen(urls[i]);
        while (len && urls[i][len - 1] == '/')
            len--;
        snprintf(nd->origin, sizeof nd->origin, "%.*s", (int)len, urls[i]);
        snprintf(nd->authority, sizeof nd->authority, "%s", nd->origin + 7 /* http:// */);
    }
    uv_timer_init(loop, &ns->timer);
    ns->timer.data = ns;
    uv_timer_start(&ns->timer, on_tick, PROBE_DOWN_MS, PROBE_DOWN_MS);
    return ns;
}

/* A probe ended: the node's state, and the end of a round. */
static void probe_done(node *nd) {
    rn_nodes *ns = nd->ns;
    int was = nd->usable;
    nd->usable = nd->ok && !nd->refused;
    if (nd->usable != was)
        rn_log(nd->usable ? RN_LOG_INFO : RN_LOG_WARN, "gateway", "node %s is %s", nd->origin,
               nd->usable ? "usable" : "not usable");
    nd->next_probe_ms = uv_now(ns->loop) + (nd->usable ? PROBE_UP_MS : PROBE_DOWN_MS);
    if (ns->round_left && --ns->round_left == 0 && ns->round_done) {
        void (*fn)(void *, size_t, const char *) = ns->round_done;
        ns->round_done = NULL;
        fn(ns->round_arg, usable_count(ns), ns->why);
    }
}

static void probe_head(void *arg, int status, const rn_header *h, size_t n, uint64_t length) {
    (void)length;
    node *nd = arg;
    nd->ok = status == 200;
    nd->refused = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t v;
        if (rn_ieq(h[i].name, h[i].name_len, "ursula-max-request-bytes") &&
            !rn_parse_strict_u64(h[i].value, h[i].value_len, UINT64_MAX, &v)) {
            nd->limit = v;
            nd->refused = v < nd->ns->request_limit;
        }
    }
    if (nd->refused) {
        rn_nodes *ns = nd->ns;
        rn_log(RN_LOG_ERROR, "gateway",
               "node %s accepts request bodies up to %llu bytes, below the gateway's %llu: it is "
               "not used (lower --max-body-bytes)",
               nd->origin, (unsigned long long)nd->limit, (unsigned long long)ns->request_limit);
        if (!ns->why[0])
            snprintf(ns->why, sizeof ns->why,
                     "node %s accepts request bodies up to %llu bytes, below --max-body-bytes "
                     "%llu",
                     nd->origin, (unsigned long long)nd->limit,
                     (unsigned long long)ns->request_limit);
    }
}

static int probe_data(void *arg, const uint8_t *b, size_t len) {
    (void)arg, (void)b, (void)len;
    return 0;
}

static void probe_nothing(void *arg) {
    (void)arg;
}

static void probe_end(void *arg, rn_up_end how, int sent_any) {
    (void)sent_any;
    node *nd = arg;
    nd->probe = NULL;
    if (how != RN_UP_DONE)
        nd->ok = 0;
    probe_done(nd);
}

static void probe(node *nd) {
    rn_nodes *ns = nd->ns;
    if (ns->stopped)
        return;
    static const rn_up_callbacks cb = {.head = probe_head,
                                       .data = probe_data,
                                       .go_on = probe_nothing,
                                       .drained = probe_nothing,
                                       .end = probe_end};
    rn_buf head = {0};
    rn_buf_appendf(&head, "GET /__runnel/livez HTTP/1.1\r\nHost: %s\r\n\r\n", nd->authority);
    nd->ok = 0;
    nd->probe = rn_up_call_start(ns->up, nd->origin, &head, 0, PROBE_TIMEOUT_MS, &cb, nd);
    if (!nd->probe)
        probe_done(nd);
}

void rn_nodes_probe(rn_nodes *ns, void (*done)(void *arg, size_t usable, const char *why),
                    void *arg) {
    ns->round_done = done;
    ns->round_arg = arg;
    ns->round_left = ns->n;
    ns->why[0] = 0;
    if (!ns->n) {
        ns->round_done = NULL;
        done(arg, 0, "");
        return;
    }
    for (size_t i = 0; i < ns->n; i++)
        if (!ns->nodes[i].probe)
            probe(&ns->nodes[i]);
        else
            ns->round_left--; /* its probe in flight answers for it */
    if (ns->round_left == 0 && ns->round_done) {
        ns->round_done = NULL;
        done(arg, usable_count(ns), ns->why);
    }
}

int rn_nodes_pick(rn_nodes *ns, const char *avoid, char *origin, size_t cap) {
    for (size_t k = 0; k < ns->n; k++) {
        node *nd = &ns->nodes[(ns->next + k) % ns->n];
        if (!nd->usable || (avoid && strcmp(avoid, nd->origin) == 0) || strlen(nd->origin) >= cap)
            continue;
        ns->next = (ns->next + k + 1) % ns->n;
        memcpy(origin, nd->origin, strlen(nd->origin) + 1);
        return 1;
    }
    return 0;
}

int rn_nodes_usable(const rn_nodes *ns) {
    return usable_count(ns) > 0;
}

void rn_nodes_failed(rn_nodes *ns, const char *origin) {
    for (size_t i = 0; i < ns->n; i++) {
        node *nd = &ns->nodes[i];
        if (strcmp(nd->origin, origin) == 0 && nd->usable) {
            nd->usable = 0;
            nd->next_probe_ms = uv_now(ns->loop) + PROBE_DOWN_MS;
            rn_log(RN_LOG_WARN, "gateway", "node %s is not usable: a connection failed",
                   nd->origin);
        }
    }
}

void rn_nodes_metrics(const rn_nodes *ns, rn_buf *out) {
    rn_buf_append_str(out, "# TYPE runnel_gateway_node_usable gauge\n");
    for (size_t i = 0; i < ns->n; i++)
        rn_buf_appendf(out, "runnel_gateway_node_usable{node=\"%s\"} %d\n", ns->nodes[i].authority,
                       ns->nodes[i].usable);
}

void rn_nodes_stop(rn_nodes *ns) {
    ns->stopped = 1;
    uv_timer_stop(&ns->timer);
    uv_close((uv_handle_t *)&ns->timer, NULL);
    for (size_t i = 0; i < ns->n; i++)
        if (ns->nodes[i].probe) {
            rn_up_call_cancel(ns->nodes[i].probe);
            ns->nodes[i].probe = NULL;
        }
}

void rn_nodes_free(rn_nodes *ns) {
    if (!ns)
        return;
    free(ns->nodes);
    free(ns);
}
