/*
 * phases.c — stream fill and replay (see phases.h). Each keeps its state in
 * the struct given as the connection's user pointer.
 */
#include "phases.h"

#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "report.h"
#include "run.h"

static void fill_next(bn_fill *f) {
    size_t n = f->remaining < f->chunk ? (size_t)f->remaining : f->chunk;
    char h[512];
    bn_conn_request(f->c, "POST", f->path, bn_append_headers(h, sizeof h, f->producer, f->seq),
                    f->body, n);
}

static void fill_done(bn_conn *c, int err) {
    static const int ok[] = {200, 204, 0};
    bn_fill *f = bn_conn_user(c);
    if (!bn_expect(c, err, "pre-fill append (POST)", ok))
        return;
    size_t n = f->remaining < f->chunk ? (size_t)f->remaining : f->chunk;
    f->remaining -= n;
    f->seq++;
    if (f->remaining == 0)
        f->done(f);
    else
        fill_next(f);
}

static const bn_handlers fill_handlers = {.on_done = fill_done};

void bn_fill_start(bn_fill *f, bn_conn *c, const char *path, int producer, uint64_t total,
                   size_t chunk, const char *body, void (*done)(bn_fill *f)) {
    f->c = c;
    f->path = path;
    f->producer = producer;
    f->seq = 0;
    f->remaining = total;
    f->chunk = chunk;
    f->body = body;
    f->done = done;
    bn_conn_rebind(c, &fill_handlers, f);
    if (total == 0)
        done(f);
    else
        fill_next(f);
}

static void replay_get(bn_replay *r, const char *offset) {
    char path[1024];
    snprintf(path, sizeof path, "%s?offset=%s", r->path, offset);
    r->requests++;
    bn_conn_request(r->c, "GET", path, NULL, NULL, 0);
}

static void replay_done(bn_conn *c, int err) {
    static const int ok[] = {200, 0};
    bn_replay *r = bn_conn_user(c);
    if (!bn_expect(c, err, "replay read (GET)", ok))
        return;
    const bn_resp *resp = bn_conn_resp(c);
    r->bytes += resp->body_bytes;
    if (resp->up_to_date) {
        r->t_end_ns = uv_hrtime();
        r->done(r);
        return;
    }
    if (!resp->next_offset[0] || resp->body_bytes == 0) {
        bn_report_error("replay read: no progress (next offset '%s', %llu body bytes)",
                        resp->next_offset, (unsigned long long)resp->body_bytes);
        bn_run_stop();
        return;
    }
    char next[sizeof resp->next_offset];
    memcpy(next, resp->next_offset, sizeof next);
    replay_get(r, next);
}

static const bn_handlers replay_handlers = {.on_done = replay_done};

void bn_replay_start(bn_replay *r, bn_conn *c, const char *path, void (*done)(bn_replay *r)) {
    r->c = c;
    r->path = path;
    r->bytes = r->requests = 0;
    r->t_start_ns = uv_hrtime();
    r->t_end_ns = 0;
    r->done = done;
    bn_conn_rebind(c, &replay_handlers, r);
    replay_get(r, "-1");
}
