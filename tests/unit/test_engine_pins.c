/*
 * test_engine_pins.c - unit tests for forks apart from their source
 * (src/engine/pins.c, the commands of command.h, the manifest of
 * replica.c): PIN and UNPIN encoded and decoded; a pin holds its source as
 * a fork of its group does (soft deletion, retention) and its release
 * removes a soft-deleted source; a CREATE apart from its source records
 * the source's id, the fork's retained offset and depth, and reads the
 * source only once this replica applied the pin; a group's manifest
 * carries pins and apart sources to another replica (rn_engine_manifest,
 * rn_engine_restore), and one without either is the same bytes as before.
 *
 * How: replicated engines (rn_engine_open_replicated) on the fixture's
 * loop, in two directories, fed commands through their applier as a
 * replicated log would; the state read back through rn_engine_stream.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmd_fixture.h"
#include "engine_fixture.h"

#define SRC 0x10100ull  /* ids of the cluster layout: group 0 ... */
#define FORK 0x20201ull /* ... and group 1 */

/* A replicated engine on dir, with its tiers (closed with it). */
typedef struct {
    rn_tiers *tiers;
    rn_engine *e;
    rn_cmdlog_applier applier;
} replica;

static void replica_open(fx *f, replica *r, const char *dir) {
    open_tiers(f, dir);
    r->tiers = f->tiers;
    f->tiers = NULL;
    rn_engine_config cfg = {.data_dir = dir, .tiers = r->tiers};
    r->e = rn_engine_open_replicated(&f->loop, &cfg);
    assert_non_null(r->e);
    r->applier = rn_engine_applier(r->e);
}

static void replica_close(fx *f, replica *r) {
    run(f);
    rn_engine_close(r->e);
    rn_tiers_close(r->tiers);
}

/* Encodes c as a log would, decodes it, and applies what was decoded. */
static void apply_cmd(replica *r, const rn_cmd *c) {
    rn_buf rec = {0};
    rn_cmd_encode_head(c, &rec);
    rn_buf_append(&rec, c->data, c->data_len);
    rn_cmd back;
    assert_int_equal(rn_cmd_decode(rec.data, rec.len, &back), 0);
    rn_applied out;
    r->applier.apply(r->applier.ctx, &back, 0, &out);
    rn_buf_free(&rec);
}

static rn_cmd pin(uint8_t type, uint64_t source, uint64_t fork, uint64_t offset) {
    return (rn_cmd){
        .type = type, .stream_id = source, .time_ms = 2000, .fork_id = fork, .offset = offset};
}

/* The fork of SRC at offset 4 apart from it, with its own "xy". */
static rn_cmd apart_fork(void) {
    rn_cmd c = cmd_create(FORK, "fk/fork", "xy");
    c.source_id = SRC | RN_CMD_SOURCE_APART;
    c.offset = 4;
    c.fork_retained = 2;
    c.fork_depth = 1;
    return c;
}

static void test_commands_round_trip(void **state) {
    (void)state;
    rn_cmd c = pin(RN_CMD_PIN, SRC, FORK, 4), back;
    rn_buf rec = {0};
    rn_cmd_encode_head(&c, &rec);
    assert_int_equal(rn_cmd_decode(rec.data, rec.len, &back), 0);
    assert_int_equal(back.type, RN_CMD_PIN);
    assert_int_equal(back.stream_id, SRC);
    assert_int_equal(back.fork_id, FORK);
    assert_int_equal(back.offset, 4);
    rec.len = 0;
    c = pin(RN_CMD_UNPIN, SRC, FORK, 0);
    rn_cmd_encode_head(&c, &rec);
    assert_int_equal(rn_cmd_decode(rec.data, rec.len, &back), 0);
    assert_int_equal(back.fork_id, FORK);
    rec.len = 0;
    c = pin(RN_CMD_UNPIN, SRC, 0, 0); /* a pin names its fork */
    rn_cmd_encode_head(&c, &rec);
    assert_int_equal(rn_cmd_decode(rec.data, rec.len, &back), -1);
    rec.len = 0;
    c = apart_fork();
    rn_cmd_encode_head(&c, &rec);
    rn_buf_append(&rec, c.data, c.data_len);
    assert_int_equal(rn_cmd_decode(rec.data, rec.len, &back), 0);
    assert_int_equal(back.source_id, SRC | RN_CMD_SOURCE_APART);
    assert_int_equal(back.fork_retained, 2);
    assert_int_equal(back.fork_depth, 1);
    assert_int_equal(back.data_len, 2);
    rn_buf_free(&rec);
}

static void test_a_pin_holds_its_source_as_a_fork_does(void **state) {
    fx *f = *state;
    close_engine(f, f->e);
    f->e = NULL;
    replica a;
    replica_open(f, &a, f->dir);
    rn_cmd c = cmd_create(SRC, "fk/src", "0123456789");
    apply_cmd(&a, &c);
    c = pin(RN_CMD_PIN, SRC, FORK, 4);
    apply_cmd(&a, &c);
    apply_cmd(&a, &c); /* a repeat changes nothing */
    const rn_stream *s = rn_engine_stream(a.e, SRC);
    assert_int_equal(s->npins, 1);
    assert_int_equal(s->pins[0].fork_id, FORK);
    assert_int_equal(s->pins[0].time_ms, 2000);
    assert_true(rn_stream_held(s));
    c = (rn_cmd){.type = RN_CMD_DELETE, .stream_id = SRC, .time_ms = 3000};
    apply_cmd(&a, &c);
    s = rn_engine_stream(a.e, SRC);
    assert_non_null(s);
    assert_true(s->soft_deleted); /* 410 while the pin holds it */
    c = pin(RN_CMD_UNPIN, SRC, FORK + 0x100, 0);
    apply_cmd(&a, &c); /* another fork's: nothing */
    assert_non_null(rn_engine_stream(a.e, SRC));
    c = pin(RN_CMD_UNPIN, SRC, FORK, 0);
    apply_cmd(&a, &c);
    assert_null(rn_engine_stream(a.e, SRC)); /* its last holder went */
    apply_cmd(&a, &c);                       /* a release of what is gone: nothing */
    replica_close(f, &a);
}

static void test_a_fork_apart_reads_its_source_once_pinned(void **state) {
    fx *f = *state;
    close_engine(f, f->e);
    f->e = NULL;
    replica a;
    replica_open(f, &a, f->dir);
    rn_cmd c = apart_fork(); /* its group applied ahead of the source's */
    apply_cmd(&a, &c);
    const rn_stream *k = rn_engine_stream(a.e, FORK);
    assert_int_equal(k->apart_source, SRC);
    assert_null(k->source);
    assert_int_equal(k->fork_offset, 4);
    assert_int_equal(k->retained, 2);
    assert_int_equal(k->fork_depth, 1);
    assert_int_equal(k->tail, 6);
    rn_buf got = {0};
    rn_stream *w = (rn_stream *)k;
    assert_int_equal(rn_engine_read(a.e, w, 2, 64, 0, &got), -EAGAIN);
    c = cmd_create(SRC, "fk/src", "0123456789");
    apply_cmd(&a, &c);
    assert_int_equal(rn_engine_read(a.e, w, 2, 64, 0, &got), -EAGAIN); /* no pin yet */
    c = pin(RN_CMD_PIN, SRC, FORK, 4);
    apply_cmd(&a, &c);
    assert_int_equal(rn_engine_read(a.e, w, 2, 64, 0, &got), 4);
    assert_memory_equal(got.data, "23xy", 4);
    rn_buf_free(&got);
    c = (rn_cmd){.type = RN_CMD_DELETE, .stream_id = FORK, .time_ms = 3000};
    apply_cmd(&a, &c);
    assert_null(rn_engine_stream(a.e, FORK));
    assert_int_equal(rn_engine_stream(a.e, SRC)->npins, 1); /* the source's group releases it */
    replica_close(f, &a);
}

static int pick_group(const rn_stream *s, void *arg) {
    return (s->id & 0xff) == *(const unsigned *)arg;
}

/* Group g's manifest of a, restored into b. */
static void carry(replica *a, replica *b, unsigned g, rn_buf *m) {
    m->len = 0;
    rn_engine_manifest(a->e, pick_group, &g, g, m);
    assert_int_equal(rn_engine_restore(b->e, pick_group, &g, g, m->data, m->len), 0);
}

static void test_manifests_carry_pins_and_apart_sources(void **state) {
    fx *f = *state;
    close_engine(f, f->e);
    f->e = NULL;
    char other[160];
    snprintf(other, sizeof other, "%s/other", f->root);
    assert_int_equal(mkdir(other, 0700), 0);
    replica a, b;
    replica_open(f, &a, f->dir);
    replica_open(f, &b, other);
    rn_cmd c = cmd_create(SRC, "fk/src", "0123456789");
    apply_cmd(&a, &c);
    rn_buf before = {0}, m = {0};
    unsigned g0 = 0;
    rn_engine_manifest(a.e, pick_group, &g0, 0, &before);
    c = pin(RN_CMD_PIN, SRC, FORK, 4);
    apply_cmd(&a, &c);
    c = apart_fork();
    apply_cmd(&a, &c);
    c = cmd_create(0x30301, "fk/local", NULL); /* a fork of the apart fork, in its group */
    c.source_id = FORK;
    c.offset = 5;
    apply_cmd(&a, &c);
    carry(&a, &b, 0, &m);
    carry(&a, &b, 1, &m);
    const rn_stream *s = rn_engine_stream(b.e, SRC), *k = rn_engine_stream(b.e, FORK);
    assert_int_equal(s->npins, 1);
    assert_int_equal(s->pins[0].fork_id, FORK);
    assert_int_equal(s->pins[0].time_ms, 2000);
    assert_int_equal(k->apart_source, SRC);
    assert_int_equal(k->fork_depth, 1);
    assert_int_equal(k->retained, 2);
    assert_int_equal(rn_engine_stream(b.e, 0x30301)->fork_depth, 2);
    /* without pins the source's record is what it was */
    c = pin(RN_CMD_UNPIN, SRC, FORK, 0);
    apply_cmd(&a, &c);
    m.len = 0;
    rn_engine_manifest(a.e, pick_group, &g0, 0, &m);
    assert_int_equal(m.len, before.len);
    assert_memory_equal(m.data, before.data, m.len);
    rn_buf_free(&before);
    rn_buf_free(&m);
    replica_close(f, &a);
    replica_close(f, &b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands_round_trip),
        T(test_a_pin_holds_its_source_as_a_fork_does),
        T(test_a_fork_apart_reads_its_source_once_pinned),
        T(test_manifests_carry_pins_and_apart_sources),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
