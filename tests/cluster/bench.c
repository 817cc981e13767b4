/*
 * bench.c — the test node's measurements, run inside the leader so the
 * driver's pipe is not part of what is measured:
 *
 *   bench G COUNT INFLIGHT SIZE   COUNT proposals of SIZE bytes, INFLIGHT
 *                                 outstanding at a time; answers {count, ok,
 *                                 failed, seconds, per_sec, p50_us, p99_us,
 *                                 max_us} (latency: propose to callback)
 *   readbench G COUNT CONCURRENCY COUNT read barriers, CONCURRENCY at a
 *                                 time; the same figures, plus rounds (the
 *                                 confirmation rounds they shared)
 *
 * One measurement at a time; another is answered {"error":"busy"}.
 */
#include "node.h"

#include <stdlib.h>
#include <string.h>

#include "hist.h"
#include "util/text.h"

typedef struct {
    bool running, reads;
    json_t *tag;
    unsigned group;
    uint64_t count, started, finished, ok, failed;
    uint64_t t0;
    uint64_t *sent_at; /* per request, by its slot number */
    uint8_t *payload;
    size_t size;
    uint64_t rounds_before, barriers_before;
    bn_hist hist;
} bench_run;

static bench_run B;

static void issue(void);

static void finish(void) {
    double seconds = (double)(uv_hrtime() - B.t0) / 1e9;
    json_t *o =
        json_pack("{s:I, s:I, s:I, s:f, s:f, s:I, s:I, s:I}", "count", (json_int_t)B.count, "ok",
                  (json_int_t)B.ok, "failed", (json_int_t)B.failed, "seconds", seconds, "per_sec",
                  seconds > 0 ? (double)B.ok / seconds : 0.0, "p50_us",
                  (json_int_t)bn_hist_percentile(&B.hist, 50), "p99_us",
                  (json_int_t)bn_hist_percentile(&B.hist, 99), "max_us", (json_int_t)B.hist.max_us);
    if (B.reads) {
        consensus_group_info i;
        consensus_group_info_get(N.c, B.group, &i);
        json_object_set_new(o, "rounds",
                            json_integer((json_int_t)(i.read_rounds - B.rounds_before)));
        json_object_set_new(o, "barrier_rounds",
                            json_integer((json_int_t)(i.read_barriers - B.barriers_before)));
    }
    json_object_set_new(o, "tag", B.tag);
    node_print(o);
    B.running = false;
    B.tag = NULL;
}

static void record(uint64_t slot, bool ok) {
    bn_hist_add(&B.hist, (uv_hrtime() - B.sent_at[slot]) / 1000);
    if (ok)
        B.ok++;
    else
        B.failed++;
    B.finished++;
    if (B.finished == B.count)
        finish();
    else
        issue();
}

static void proposed(void *arg, consensus_status st, uint64_t index, void *result) {
    (void)index;
    free(result);
    record((uint64_t)(uintptr_t)arg, st == CONSENSUS_OK);
}

static void read_done(void *arg, consensus_status st, uint64_t applied) {
    (void)applied;
    record((uint64_t)(uintptr_t)arg, st == CONSENSUS_OK);
}

/* Issues the next request, if any are left. */
static void issue(void) {
    if (B.started == B.count)
        return;
    uint64_t slot = B.started++;
    B.sent_at[slot] = uv_hrtime();
    void *arg = (void *)(uintptr_t)slot;
    if (B.reads) {
        consensus_read_barrier(N.c, B.group, read_done, arg);
        return;
    }
    memcpy(B.payload, &slot, sizeof slot); /* every payload differs */
    consensus_propose(N.c, B.group, B.payload, B.size, proposed, arg);
}

static void start(json_t *tag, unsigned group, uint64_t count, uint64_t inflight, bool reads) {
    free(B.sent_at);
    B.sent_at = rn_xcalloc(count, sizeof *B.sent_at);
    B.running = true;
    B.reads = reads;
    B.tag = tag;
    B.group = group;
    B.count = count;
    B.started = B.finished = B.ok = B.failed = 0;
    bn_hist_init(&B.hist);
    consensus_group_info i;
    consensus_group_info_get(N.c, group, &i);
    B.rounds_before = i.read_rounds;
    B.barriers_before = i.read_barriers;
    B.t0 = uv_hrtime();
    for (uint64_t k = 0; k < inflight && k < count; k++)
        issue();
}

static int arg_u64(char **args, int n, int i, uint64_t max, uint64_t *out) {
    return i < n ? rn_parse_strict_u64(args[i], strlen(args[i]), max, out) : -1;
}

static void refuse(json_t *tag, const char *why) {
    json_t *o = json_pack("{s:s}", "error", why);
    json_object_set_new(o, "tag", tag);
    node_print(o);
}

void node_bench(json_t *tag, unsigned group, char **args, int n) {
    uint64_t count, inflight, size;
    if (n != 3 || arg_u64(args, n, 0, 10000000, &count) || count == 0 ||
        arg_u64(args, n, 1, 100000, &inflight) || inflight == 0 ||
        arg_u64(args, n, 2, 64u << 20, &size) || size < 8) {
        refuse(tag, "usage: bench G COUNT INFLIGHT SIZE(>=8)");
        return;
    }
    if (B.running) {
        refuse(tag, "busy");
        return;
    }
    free(B.payload);
    B.payload = rn_xmalloc(size);
    memset(B.payload, 'b', size);
    B.size = size;
    start(tag, group, count, inflight, false);
}

void node_readbench(json_t *tag, unsigned group, char **args, int n) {
    uint64_t count, concurrency;
    if (n != 2 || arg_u64(args, n, 0, 10000000, &count) || count == 0 ||
        arg_u64(args, n, 1, 100000, &concurrency) || concurrency == 0) {
        refuse(tag, "usage: readbench G COUNT CONCURRENCY");
        return;
    }
    if (B.running) {
        refuse(tag, "busy");
        return;
    }
    start(tag, group, count, concurrency, true);
}

void node_bench_free(void) {
    free(B.sent_at);
    free(B.payload);
    if (B.tag)
        json_decref(B.tag);
    memset(&B, 0, sizeof B);
}
