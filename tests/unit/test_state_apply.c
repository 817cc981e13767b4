/*
 * test_state_apply.c - unit tests for the engine's state machine
 * (src/engine/state.h: rn_state_apply), one command kind at a time, with
 * no I/O: CREATE (a stream, a fork, a path taken over on replay), APPEND
 * (the tail, the append index, Stream-Seq, closure, producers and their
 * epochs), DELETE (for good, or soft while forks read the stream),
 * PUBLISH, RETAIN, REWRITE, EXPIRE_PRODUCERS, TIER and SUBS (the
 * subscriptions' state a replicated log carries), and what each
 * reports (rn_applied) and asks of its effects (rn_effects), as state.h
 * and docs/ARCHITECTURE.md ("The state machine and its effects") state
 * them.
 *
 * How: commands built as the pipeline logs them, applied to a fresh
 * rn_state through effects that record every call (and can fail a store);
 * the state, the result and the recorded effects are checked after each.
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
#include "engine/state.h"

/* What the effects were asked, in order of kind. */
typedef struct {
    int stores, retains, tiers, cuts, drops, removed, destroyed;
    int fail_store;                 /* the next store() fails with this (0: none) */
    uint64_t id, off, len, k, from; /* the last store(), retain() or tiered() */
    uint64_t keep;                  /* the last cut() */
    uint64_t appends_after_cut;     /* what cut() returns */
    char dropped_key[64];           /* the last drop_body() */
    uint64_t removed_id, destroyed_id;
} record;

static int fx_store(void *ctx, uint64_t id, const rn_cmd *c, uint64_t k) {
    record *r = ctx;
    assert_true(c->stored_ahead ? c->block_sums != NULL : c->data != NULL);
    size_t len = c->data_len;
    uint64_t off = c->offset;
    if (r->fail_store) {
        int rc = r->fail_store;
        r->fail_store = 0;
        return rc;
    }
    r->stores++;
    r->id = id;
    r->len = len;
    r->off = off;
    r->k = k;
    return 0;
}

static void fx_retain(void *ctx, uint64_t id, uint64_t from, uint64_t len) {
    record *r = ctx;
    r->retains++;
    r->id = id;
    r->from = from;
    r->len = len;
}

static void fx_tiered(void *ctx, uint64_t id, uint64_t from, uint64_t len) {
    record *r = ctx;
    r->tiers++;
    r->id = id;
    r->from = from;
    r->len = len;
}

static uint64_t fx_cut(void *ctx, const rn_stream *s, uint64_t keep) {
    record *r = ctx;
    assert_true(keep < s->tail);
    r->cuts++;
    r->keep = keep;
    return r->appends_after_cut;
}

static void fx_drop_body(void *ctx, const rn_stream *s, int cold, const char *key) {
    record *r = ctx;
    (void)s, (void)cold;
    r->drops++;
    snprintf(r->dropped_key, sizeof r->dropped_key, "%s", key);
}

static void fx_removed(void *ctx, rn_stream *s) {
    record *r = ctx;
    r->removed++;
    r->removed_id = s->id;
}

static void fx_destroyed(void *ctx, rn_stream *s) {
    record *r = ctx;
    r->destroyed++;
    r->destroyed_id = s->id;
}

static rn_state st;
static record rec;
static rn_effects fx;
static rn_applied out;

static int setup(void **state) {
    (void)state;
    rn_state_init(&st);
    memset(&rec, 0, sizeof rec);
    fx = (rn_effects){.ctx = &rec,
                      .store = fx_store,
                      .retain = fx_retain,
                      .tiered = fx_tiered,
                      .cut = fx_cut,
                      .drop_body = fx_drop_body,
                      .removed = fx_removed,
                      .destroyed = fx_destroyed};
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rn_state_free(&st);
    return 0;
}

static int apply(const rn_cmd *c) {
    return rn_state_apply(&st, c, &fx, &out);
}

/* An APPEND of data to stream id at offset. */
static rn_cmd append(uint64_t id, uint64_t offset, const char *data) {
    return (rn_cmd){.type = RN_CMD_APPEND,
                    .stream_id = id,
                    .time_ms = 2000,
                    .offset = offset,
                    .data = (const uint8_t *)data,
                    .data_len = strlen(data)};
}

/* The same by a producer (epoch, seq). */
static rn_cmd produce(uint64_t id, uint64_t offset, const char *data, uint64_t epoch,
                      uint64_t seq) {
    rn_cmd c = append(id, offset, data);
    c.has_producer = 1;
    c.producer_id = "p1";
    c.producer_id_len = 2;
    c.producer_epoch = epoch;
    c.producer_seq = seq;
    return c;
}

static rn_cmd of_type(uint8_t type, uint64_t id) {
    return (rn_cmd){.type = type, .stream_id = id, .time_ms = 3000};
}

static rn_stream *stream(uint64_t id) {
    return rn_state_stream(&st, id);
}

/* Creates stream 1, "a", holding ten bytes. */
static void ten_bytes(void) {
    rn_cmd c = cmd_create(1, "a", "0123456789");
    assert_int_equal(apply(&c), 0);
}

static void test_create_makes_a_stream_with_its_data(void **state) {
    (void)state;
    rn_cmd c = cmd_create(7, "ns/a", "hello");
    c.ttl_s = 60;
    c.expires_at_ms = 99000;
    assert_int_equal(apply(&c), 0);
    rn_stream *s = stream(7);
    assert_non_null(s);
    assert_ptr_equal(rn_state_at(&st, "ns/a", 4), s);
    assert_int_equal(s->incarnation, INC + 7);
    assert_int_equal(s->ttl_s, 60);
    assert_int_equal(s->expires_at_ms, 99000);
    assert_int_equal(s->created_ms, 1000);
    assert_int_equal(s->tail, 5);
    assert_int_equal(s->appends, 1);
    assert_false(s->closed);
    assert_int_equal(rec.stores, 1);
    assert_int_equal(rec.id, 7);
    assert_int_equal(rec.off, 0);
    assert_int_equal(rec.len, 5);
    assert_int_equal(rec.k, 0);
    assert_true(st.next_id > 7);
    assert_true(rn_state_namespace_exists(&st, "ns", 2));
    assert_false(rn_state_namespace_exists(&st, "ns/a", 4));
    assert_int_equal(out.stream_id, 7);
    assert_true(out.notify);
    assert_int_equal(out.event, RN_STREAM_CREATED);
    assert_int_equal(out.tail, 5);
    /* without data nothing is stored; closed at creation */
    c = cmd_create(8, "b", NULL);
    c.close = 1;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(rec.stores, 1);
    assert_int_equal(stream(8)->tail, 0);
    assert_true(stream(8)->closed);
    assert_true(out.closed);
}

static void test_create_takes_over_a_path_on_replay(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", "old");
    assert_int_equal(apply(&c), 0);
    c = cmd_create(2, "a", "new!");
    assert_int_equal(apply(&c), 0);
    assert_null(stream(1));
    assert_int_equal(rec.removed, 1);
    assert_int_equal(rec.destroyed, 1);
    assert_int_equal(rec.destroyed_id, 1);
    assert_ptr_equal(rn_state_at(&st, "a", 1), stream(2));
    assert_int_equal(stream(2)->tail, 4);
}

static void test_create_of_a_fork_reads_through_its_source(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "src", "0123456789");
    assert_int_equal(apply(&c), 0);
    stream(1)->retained = 4;
    c = cmd_create(2, "fork", "ab");
    c.source_id = 1;
    c.offset = 6;
    assert_int_equal(apply(&c), 0);
    rn_stream *f = stream(2);
    assert_ptr_equal(f->source, stream(1));
    assert_int_equal(f->fork_offset, 6);
    assert_int_equal(f->fork_depth, 1);
    assert_int_equal(f->retained, 4); /* the source's, below the fork point */
    assert_int_equal(f->tail, 8);     /* its own bytes start at the fork offset */
    assert_int_equal(rec.off, 6);
    assert_int_equal(stream(1)->refcount, 1);
    c = cmd_create(3, "fork2", NULL);
    c.source_id = 2;
    c.offset = 2;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(stream(3)->fork_depth, 2);
    assert_int_equal(stream(3)->retained, 2);
    /* a fork of a source that does not exist is refused */
    c = cmd_create(4, "orphan", NULL);
    c.source_id = 99;
    assert_int_equal(apply(&c), -EINVAL);
}

static void test_append_advances_the_tail_and_the_index(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", "abc");
    assert_int_equal(apply(&c), 0);
    c = append(1, 3, "defg");
    c.has_seq = 1;
    c.seq = "0005";
    c.seq_len = 4;
    assert_int_equal(apply(&c), 0);
    rn_stream *s = stream(1);
    assert_int_equal(s->tail, 7);
    assert_int_equal(s->appends, 2);
    assert_int_equal(rec.off, 3);
    assert_int_equal(rec.k, 1);
    assert_int_equal(s->last_seq_len, 4);
    assert_memory_equal(s->last_seq, "0005", 4);
    assert_int_equal(out.event, RN_STREAM_CHANGED);
    assert_true(out.notify);
    assert_int_equal(out.tail, 7);
    assert_false(out.has_producer);
    c = append(1, 7, "h");
    c.close = 1;
    assert_int_equal(apply(&c), 0);
    assert_true(s->closed);
    assert_true(out.closed);
    assert_memory_equal(s->last_seq, "0005", 4); /* kept without a new one */
    /* a stream that does not exist: nothing changes */
    c = append(2, 0, "x");
    int stores = rec.stores;
    assert_int_equal(apply(&c), -ENOENT);
    assert_int_equal(rec.stores, stores);
}

/* A large append written ahead of its record: the record carries the
 * data's block checksums in place of the bytes, decodes to the same
 * append (data absent) and applies as one. */
static void test_a_record_stored_ahead_carries_checksums_not_data(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", "abc");
    assert_int_equal(apply(&c), 0);
    c = append(1, 3, "0123456789");
    c.data_len = 3 * 4096; /* [3, 12291) touches blocks 0..3 */
    c.stored_ahead = 1;
    uint8_t sums[4 * 4];
    for (size_t i = 0; i < sizeof sums; i++)
        sums[i] = (uint8_t)(i + 1);
    c.block_sums = sums;
    assert_int_equal(rn_cmd_block_sums_len(&c), sizeof sums);
    rn_buf rec_bytes = {0};
    rn_cmd_encode_head(&c, &rec_bytes);
    assert_int_equal(rec_bytes.data[0], RN_CMD_APPEND | RN_CMD_STORED_AHEAD);
    rn_buf_append(&rec_bytes, sums, sizeof sums);
    rn_cmd d;
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len, &d), 0);
    assert_int_equal(d.type, RN_CMD_APPEND);
    assert_true(d.stored_ahead);
    assert_null(d.data);
    assert_int_equal(d.data_len, 3 * 4096);
    assert_int_equal(d.offset, 3);
    assert_memory_equal(d.block_sums, sums, sizeof sums);
    assert_int_equal(apply(&d), 0);
    assert_int_equal(stream(1)->tail, 3 + 3 * 4096);
    assert_int_equal(rec.off, 3);
    assert_int_equal(rec.len, 3 * 4096);
    assert_int_equal(rec.k, 1);
    /* checksums short by one byte, or one too many: not a record */
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len - 1, &d), -1);
    rn_buf_append_u8(&rec_bytes, 0);
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len, &d), -1);
    /* the flag on a command without data is not a record either */
    rec_bytes.len = 0;
    rn_cmd del = of_type(RN_CMD_DELETE, 1);
    rn_cmd_encode_head(&del, &rec_bytes);
    rec_bytes.data[0] |= RN_CMD_STORED_AHEAD;
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len, &d), -1);
    rn_buf_free(&rec_bytes);
}

static void test_a_failed_store_leaves_the_stream_as_it_was(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", "abc");
    assert_int_equal(apply(&c), 0);
    rec.fail_store = -EIO;
    c = produce(1, 3, "def", 0, 0);
    c.close = 1;
    assert_int_equal(apply(&c), -EIO);
    rn_stream *s = stream(1);
    assert_int_equal(s->tail, 3);
    assert_int_equal(s->appends, 1);
    assert_false(s->closed);
    assert_int_equal(s->producers.count, 0);
}

static void test_producer_writes_and_epoch_claims(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", NULL);
    assert_int_equal(apply(&c), 0);
    c = produce(1, 0, "aa", 3, 0);
    assert_int_equal(apply(&c), 0);
    assert_true(out.has_producer);
    assert_int_equal(out.producer.epoch, 3);
    assert_int_equal(out.producer.last_seq, 0);
    assert_int_equal(out.producer.newest_start, 0);
    assert_int_equal(out.producer.newest_end, 2);
    assert_null(out.producer.id);
    c = produce(1, 2, "bbb", 3, 1);
    assert_int_equal(apply(&c), 0);
    rn_producer *p = rn_map_get(&stream(1)->producers, "p1", 2);
    assert_non_null(p);
    assert_int_equal(p->epoch, 3);
    assert_int_equal(p->last_seq, 1);
    assert_int_equal(p->last_ms, 2000);
    assert_int_equal(p->newest_start, 2);
    assert_int_equal(p->newest_end, 5);
    assert_false(p->closes_epoch);
    /* a claim of a new epoch closes the previous one at its last seq */
    c = produce(1, 5, "c", 4, 0);
    assert_int_equal(apply(&c), 0);
    assert_int_equal(p->epoch, 4);
    assert_int_equal(p->last_seq, 0);
    assert_true(p->closes_epoch);
    assert_int_equal(p->closed_epoch, 3);
    assert_int_equal(p->closed_seq, 1);
    assert_int_equal(out.producer.closed_epoch, 3);
}

static void test_expiring_producers_raises_the_epoch_floor(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", NULL);
    assert_int_equal(apply(&c), 0);
    c = produce(1, 0, "x", 5, 0);
    assert_int_equal(apply(&c), 0);
    c = produce(1, 1, "y", 2, 0);
    c.producer_id = "p2";
    assert_int_equal(apply(&c), 0);
    rn_buf ids = {0};
    rn_buf_append_lstr(&ids, "p1", 2);
    rn_buf_append_lstr(&ids, "p2", 2);
    rn_buf_append_lstr(&ids, "gone", 4); /* not there: skipped */
    c = of_type(RN_CMD_EXPIRE_PRODUCERS, 1);
    c.producer_ids = ids.data;
    c.producer_ids_len = ids.len;
    assert_int_equal(apply(&c), 0);
    rn_buf_free(&ids);
    rn_stream *s = stream(1);
    assert_int_equal(s->producers.count, 0);
    assert_true(s->has_floor);
    assert_int_equal(s->epoch_floor, 5);
    assert_false(rn_stream_above_floor(s, 5));
    assert_true(rn_stream_above_floor(s, 6));
    assert_false(out.notify); /* nothing a reader sees changed */
}

static void test_delete_for_good_or_soft_while_forks_read(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", "abc");
    assert_int_equal(apply(&c), 0);
    c = of_type(RN_CMD_DELETE, 1);
    assert_int_equal(apply(&c), 0);
    assert_null(stream(1));
    assert_null(rn_state_at(&st, "a", 1));
    assert_int_equal(rec.removed, 1);
    assert_int_equal(rec.destroyed, 1);
    assert_int_equal(apply(&c), 0); /* a stream already gone: nothing to do */
    /* a source with a fork is only hidden, until its last fork goes */
    c = cmd_create(2, "src", "abc");
    assert_int_equal(apply(&c), 0);
    c = cmd_create(3, "fork", NULL);
    c.source_id = 2;
    c.offset = 3;
    assert_int_equal(apply(&c), 0);
    c = of_type(RN_CMD_DELETE, 2);
    assert_int_equal(apply(&c), 0);
    assert_non_null(stream(2));
    assert_true(stream(2)->soft_deleted);
    assert_int_equal(rec.removed, 2);
    assert_int_equal(rec.removed_id, 2);
    assert_int_equal(rec.destroyed, 1);
    c = of_type(RN_CMD_DELETE, 3);
    assert_int_equal(apply(&c), 0);
    assert_null(stream(3));
    assert_null(stream(2));
    assert_int_equal(rec.removed, 3); /* the fork; the source was removed before */
    assert_int_equal(rec.destroyed, 3);
    assert_int_equal(rec.destroyed_id, 2);
}

static rn_cmd publish(uint64_t id, uint64_t offset, const char *key) {
    static const uint8_t digest[32] = {1, 2, 3};
    rn_cmd c = of_type(RN_CMD_PUBLISH, id);
    c.offset = offset;
    c.content_type = "application/json";
    c.content_type_len = 16;
    c.digest = digest;
    c.snapshot_size = 42;
    c.object_key = key;
    c.object_key_len = strlen(key);
    return c;
}

static void test_publish_supersedes_the_snapshot_and_its_body(void **state) {
    (void)state;
    ten_bytes();
    rn_cmd c = publish(1, 4, "k1");
    assert_int_equal(apply(&c), 0);
    rn_stream *s = stream(1);
    assert_true(s->snapshot.present);
    assert_int_equal(s->snapshot.offset, 4);
    assert_int_equal(s->snapshot.size, 42);
    assert_string_equal(s->snapshot.key, "k1");
    assert_string_equal(s->snapshot.content_type, "application/json");
    assert_int_equal(s->snapshot.digest[2], 3);
    assert_int_equal(rec.drops, 0);
    c = publish(1, 4, "k1"); /* a repeat keeps its body */
    assert_int_equal(apply(&c), 0);
    assert_int_equal(rec.drops, 0);
    c = publish(1, 8, "k2");
    assert_int_equal(apply(&c), 0);
    assert_int_equal(rec.drops, 1);
    assert_string_equal(rec.dropped_key, "k1");
    assert_int_equal(s->snapshot.offset, 8);
    assert_true(out.notify);
}

static void test_retain_only_advances(void **state) {
    (void)state;
    ten_bytes();
    rn_cmd c = of_type(RN_CMD_RETAIN, 1);
    c.offset = 4;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(stream(1)->retained, 4);
    assert_int_equal(rec.retains, 1);
    assert_int_equal(rec.from, 0);
    assert_int_equal(rec.len, 4);
    c.offset = 3; /* below: nothing */
    assert_int_equal(apply(&c), 0);
    assert_int_equal(stream(1)->retained, 4);
    assert_int_equal(rec.retains, 1);
    /* while a fork reads the bytes, none may be given back */
    rn_cmd f = cmd_create(2, "fork", NULL);
    f.source_id = 1;
    f.offset = 10;
    assert_int_equal(apply(&f), 0);
    c.offset = 6;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(stream(1)->retained, 6);
    assert_int_equal(rec.retains, 2);
    assert_int_equal(rec.len, 0);
}

static void test_rewrite_gives_a_new_history_below_the_kept_offset(void **state) {
    (void)state;
    ten_bytes();
    rn_cmd c = produce(1, 10, "abcd", 1, 0);
    c.close = 1;
    assert_int_equal(apply(&c), 0);
    c = publish(1, 12, "k1");
    assert_int_equal(apply(&c), 0);
    c = of_type(RN_CMD_RETAIN, 1);
    c.offset = 11;
    assert_int_equal(apply(&c), 0);
    rec.appends_after_cut = 1;
    c = of_type(RN_CMD_REWRITE, 1);
    c.offset = 10;
    c.serial = 500;
    c.incarnation = INC + 500;
    assert_int_equal(apply(&c), 0);
    rn_stream *s = stream(1);
    assert_int_equal(s->incarnation, INC + 500);
    assert_true(s->has_previous);
    assert_int_equal(s->previous_incarnation, INC + 1);
    assert_int_equal(s->inherited_offset, 10);
    assert_int_equal(rec.cuts, 1);
    assert_int_equal(rec.keep, 10);
    assert_int_equal(s->tail, 10);
    assert_int_equal(s->appends, 1);
    assert_false(s->closed);
    assert_false(s->snapshot.present); /* above the new tail */
    assert_int_equal(rec.drops, 1);
    assert_int_equal(s->retained, 10);
    assert_true(st.next_id > 500); /* the serial is never issued again */
    assert_int_equal(out.event, RN_STREAM_REWRITTEN);
    assert_int_equal(out.tail, 10);
    /* the producer's write was cut: which of its seqs survived is unknown */
    rn_producer *p = rn_map_get(&s->producers, "p1", 2);
    assert_int_equal(p->history, RN_EPOCH_LOST);
    /* a second rewrite with nothing written since keeps the first report */
    c.serial = 501;
    c.incarnation = INC + 501;
    c.offset = 8;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(s->previous_incarnation, INC + 1);
    assert_int_equal(s->inherited_offset, 8);
    /* a rewrite at the tail cuts nothing */
    c.serial = 502;
    c.incarnation = INC + 502;
    c.offset = 8;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(rec.cuts, 2);
}

static void test_tier_moves_whole_history_below_the_tail(void **state) {
    (void)state;
    ten_bytes();
    rn_cmd c = of_type(RN_CMD_TIER, 1);
    c.offset = 8;
    assert_int_equal(apply(&c), 0);
    assert_int_equal(stream(1)->cold_end, 8);
    assert_int_equal(rec.tiers, 1);
    assert_int_equal(rec.from, 0);
    assert_int_equal(rec.len, 8);
    assert_false(out.notify); /* the bytes read the same */
    c.offset = 4;             /* stale: at or below the cold end */
    assert_int_equal(apply(&c), 0);
    c.offset = 11; /* past the tail */
    assert_int_equal(apply(&c), 0);
    assert_int_equal(stream(1)->cold_end, 8);
    assert_int_equal(rec.tiers, 1);
}

static void test_subs_replaces_the_subscriptions_state(void **state) {
    (void)state;
    ten_bytes();
    rn_cmd c = of_type(RN_CMD_SUBS, 3); /* the stream id field names the carrying group */
    c.path = "{\"v\":1}";
    c.path_len = strlen(c.path);
    /* as the log carries it: encoded, then decoded */
    rn_buf rec_bytes = {0};
    rn_cmd_encode_head(&c, &rec_bytes);
    rn_cmd d;
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len, &d), 0);
    assert_int_equal(d.type, RN_CMD_SUBS);
    assert_int_equal(apply(&d), 0);
    rn_buf_free(&rec_bytes);
    assert_int_equal(st.subs.len, c.path_len);
    assert_memory_equal(st.subs.data, c.path, c.path_len);
    assert_int_equal(st.subs_group, 3);
    assert_false(out.notify);
    assert_int_equal(stream(1)->tail, 10); /* no stream changes */
    c.path = "{}";
    c.path_len = 2;
    assert_int_equal(apply(&c), 0); /* the next one replaces it whole */
    assert_int_equal(st.subs.len, 2);
    assert_memory_equal(st.subs.data, "{}", 2);
    /* a record naming no group, or an empty state, does not decode */
    c.stream_id = 0x100;
    rn_cmd_encode_head(&c, &rec_bytes);
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len, &d), -1);
    rn_buf_free(&rec_bytes);
    c.stream_id = 3;
    c.path_len = 0;
    rn_cmd_encode_head(&c, &rec_bytes);
    assert_int_equal(rn_cmd_decode(rec_bytes.data, rec_bytes.len, &d), -1);
    rn_buf_free(&rec_bytes);
}

static void test_unknown_commands_are_refused(void **state) {
    (void)state;
    rn_cmd c = cmd_create(1, "a", "x");
    assert_int_equal(apply(&c), 0);
    c = of_type(99, 1);
    assert_int_equal(apply(&c), -EINVAL);
    c = of_type(RN_CMD_PUBLISH, 5);
    assert_int_equal(apply(&c), -ENOENT);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_create_makes_a_stream_with_its_data),
        T(test_create_takes_over_a_path_on_replay),
        T(test_create_of_a_fork_reads_through_its_source),
        T(test_append_advances_the_tail_and_the_index),
        T(test_a_record_stored_ahead_carries_checksums_not_data),
        T(test_a_failed_store_leaves_the_stream_as_it_was),
        T(test_producer_writes_and_epoch_claims),
        T(test_expiring_producers_raises_the_epoch_floor),
        T(test_delete_for_good_or_soft_while_forks_read),
        T(test_publish_supersedes_the_snapshot_and_its_body),
        T(test_retain_only_advances),
        T(test_rewrite_gives_a_new_history_below_the_kept_offset),
        T(test_tier_moves_whole_history_below_the_tail),
        T(test_subs_replaces_the_subscriptions_state),
        T(test_unknown_commands_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
