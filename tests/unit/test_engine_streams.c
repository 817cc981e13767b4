/*
 * test_engine_streams.c - unit tests of a stream's life in the engine
 * (src/engine/engine.{h,c}): create (repeats, config mismatches, paths),
 * appends and reads back, refusals, observers, JSON streams and their
 * message boundaries, delete and recreate, namespaces, stream ids,
 * requests submitted from a delete's callback, and expiry.
 *
 * How: engine_fixture.h (a fresh data directory and engine per test).
 */
#define _GNU_SOURCE
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_fixture.h"
#include "util/clock.h"

/* ------------------------------------------------------------------------ */
/* Create                                                                    */

static void test_create_answers_created_then_exists_for_same_config(void **state) {
    fx *f = *state;
    outcome o = create(f, "/s", "text/plain; charset=utf-8", NULL);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(o.next_offset, 0);
    assert_int_equal(o.closed, 0);
    assert_true(o.stream_id != 0);
    rn_stream *s = find(f, "/s");
    assert_non_null(s);
    assert_int_equal(s->id, o.stream_id);
    assert_string_equal(s->content_type, "text/plain; charset=utf-8");
    assert_int_equal(s->json, 0);

    outcome again = create(f, "/s", "text/plain; charset=utf-8", NULL);
    assert_int_equal(again.result, RN_OK_EXISTS);
    assert_int_equal(again.stream_id, o.stream_id);
    /* The media type compares case-insensitively, parameters ignored. */
    assert_int_equal(create(f, "/s", "TEXT/Plain", NULL).result, RN_OK_EXISTS);
    /* A matching repeat with a body does not append it. */
    assert_int_equal(create(f, "/s", "text/plain", "ignored").result, RN_OK_EXISTS);
    assert_int_equal(find(f, "/s")->tail, 0);
}

static void test_create_with_different_config_is_a_mismatch(void **state) {
    fx *f = *state;
    int64_t exp = rn_now_ms() + 3600000;
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp, 0).result, RN_OK_EXISTS);
    assert_int_equal(create_full(f, "/s", "text/html", NULL, 600, exp, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", NULL, NULL, 600, exp, 0).result, RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 601, exp, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, -1, exp, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp + 1, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, -1, 0).result,
                     RN_ERR_CONFIG_MISMATCH);
    assert_int_equal(create_full(f, "/s", "text/plain", NULL, 600, exp, 1).result,
                     RN_ERR_CONFIG_MISMATCH);
    /* The mismatches changed nothing. */
    rn_stream *s = find(f, "/s");
    assert_string_equal(s->content_type, "text/plain");
    assert_int_equal(s->ttl_s, 600);
    assert_int_equal(s->expires_at_ms, exp);
    assert_int_equal(s->closed, 0);
}

static void test_create_without_content_type_defaults_to_octet_stream(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/d", NULL, NULL).result, RN_OK_CREATED);
    assert_string_equal(find(f, "/d")->content_type, OCTET);
    assert_int_equal(create(f, "/d", OCTET, NULL).result, RN_OK_EXISTS);
}

static void test_create_with_body_stores_it_and_closed_create_refuses_appends(void **state) {
    fx *f = *state;
    outcome o = create_full(f, "/c", OCTET, "initial", -1, -1, 1);
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(o.next_offset, 7);
    assert_int_equal(o.closed, 1);
    expect_bytes(f, "/c", "initial");
    assert_int_equal(append(f, "/c", "more").result, RN_ERR_CLOSED);
    expect_bytes(f, "/c", "initial");
}

static void test_paths_are_distinct_streams(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/a", NULL, "A").result, RN_OK_CREATED);
    assert_int_equal(create(f, "/a/", NULL, "B").result, RN_OK_CREATED);
    assert_int_equal(create(f, "/A", NULL, "C").result, RN_OK_CREATED);
    expect_bytes(f, "/a", "A");
    expect_bytes(f, "/a/", "B");
    expect_bytes(f, "/A", "C");
    assert_null(find(f, "/b"));
    assert_null(find(f, "/"));
}

/* Counts the visits of the streams /w/0 .. /w/N-1 (the visits' walk). */
#define WALKED 200
typedef struct {
    int visits[WALKED];
    int others;
} walk_count;

static void count_visit(rn_stream *s, void *arg) {
    walk_count *w = arg;
    char *end = NULL;
    long i = s->path_len > 3 && memcmp(s->path, "/w/", 3) == 0 ? strtol(s->path + 3, &end, 10) : -1;
    if (i >= 0 && i < WALKED)
        w->visits[i]++;
    else
        w->others++;
}

static void make_walked(fx *f, int from, int to) {
    char path[32];
    for (int i = from; i < to; i++) {
        snprintf(path, sizeof path, "/w/%d", i);
        assert_int_equal(create(f, path, NULL, "x").result, RN_OK_CREATED);
    }
}

/* A walk in slices (the scrape's gauges, ops/store_gauges.c) visits every
 * visible stream once, leaves the deleted out, and starts over when the
 * map grows between two slices. */
static void test_a_walk_in_slices_visits_each_visible_stream_once(void **state) {
    fx *f = *state;
    make_walked(f, 0, 100);
    assert_int_equal(delete_stream(f, "/w/7").result, RN_OK_DELETED);
    walk_count w = {0};
    rn_engine_slice at = {0};
    int rc, slices = 0;
    while ((rc = rn_engine_foreach_slice(f->e, &at, 16, count_visit, &w)) == 0)
        slices++;
    assert_int_equal(rc, 1);
    assert_int_equal(slices + 1, (int)(rn_engine_stream_slots(f->e) / 16));
    for (int i = 0; i < 100; i++)
        assert_int_equal(w.visits[i], i == 7 ? 0 : 1);
    assert_int_equal(w.others, 0);

    /* the map grows between two slices: the walk says so and starts over */
    size_t slots = rn_engine_stream_slots(f->e);
    memset(&w, 0, sizeof w);
    at = (rn_engine_slice){0};
    assert_int_equal(rn_engine_foreach_slice(f->e, &at, 16, count_visit, &w), 0);
    make_walked(f, 100, WALKED);
    assert_true(rn_engine_stream_slots(f->e) > slots);
    assert_int_equal(rn_engine_foreach_slice(f->e, &at, 16, count_visit, &w), -1);
    assert_int_equal(at.cursor, 0);
    memset(&w, 0, sizeof w);
    while ((rc = rn_engine_foreach_slice(f->e, &at, 16, count_visit, &w)) == 0)
        ;
    assert_int_equal(rc, 1);
    for (int i = 0; i < WALKED; i++)
        assert_int_equal(w.visits[i], i == 7 ? 0 : 1);
}

/* ------------------------------------------------------------------------ */
/* Append and read                                                           */

static void test_append_then_read_back_bytes(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/s", NULL, NULL).result, RN_OK_CREATED);
    outcome o = append(f, "/s", "hello");
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 5);
    assert_int_equal(o.closed, 0);
    o = append(f, "/s", ", world");
    assert_int_equal(o.next_offset, 12);
    /* Binary data including NUL bytes, through req_body. */
    static const uint8_t bin[] = {0, 1, 2, 0xff, 0, '\n'};
    req r;
    req_init(&r, RN_OP_APPEND, "/s");
    req_body(&r, OCTET, bin, sizeof bin);
    o = run_req(f, &r);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 18);

    uint8_t want[18];
    memcpy(want, "hello, world", 12);
    memcpy(want + 12, bin, sizeof bin);
    expect_bytes_from(f, "/s", 0, want, 18);
    expect_bytes_from(f, "/s", 7, want + 7, 11);

    rn_stream *s = find(f, "/s");
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 2, 4, 1, &b), 4);
    assert_memory_equal(b.data, "llo,", 4);
    /* Reads append to the buffer. */
    assert_int_equal(rn_engine_read(f->e, s, 18, 10, 1, &b), 0);
    assert_int_equal(rn_engine_read(f->e, s, 17, 10, 1, &b), 1);
    assert_int_equal(b.len, 5);
    assert_int_equal(b.data[4], '\n');
    rn_buf_free(&b);
    assert_true(rn_engine_offset_valid(f->e, s, 0));
    assert_true(rn_engine_offset_valid(f->e, s, 3));
    assert_true(rn_engine_offset_valid(f->e, s, 18));
    assert_false(rn_engine_offset_valid(f->e, s, 19));
}

static void test_append_refusals_change_nothing(void **state) {
    fx *f = *state;
    outcome o = append(f, "/missing", "x");
    assert_int_equal(o.result, RN_ERR_NOT_FOUND);
    assert_int_equal(o.stream_id, 0);
    assert_int_equal(create(f, "/s", "text/plain", "abc").result, RN_OK_CREATED);
    assert_int_equal(append_ct(f, "/s", OCTET, "x", 0).result, RN_ERR_CONTENT_TYPE);
    assert_int_equal(append_ct(f, "/s", NULL, "x", 0).result, RN_ERR_MISSING_CONTENT_TYPE);
    assert_int_equal(append_ct(f, "/s", "text/plain", "", 0).result, RN_ERR_EMPTY_BODY);
    /* Content type parameters and case do not matter. */
    o = append_ct(f, "/s", "Text/Plain; charset=utf-8", "d", 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    assert_int_equal(o.next_offset, 4);
    expect_bytes(f, "/s", "abcd");
    assert_int_equal(find(f, "/s")->closed, 0);
}

static void test_refusals_are_answered_before_submit_returns(void **state) {
    fx *f = *state;
    req r;
    req_init(&r, RN_OP_APPEND, "/nope");
    req_text(&r, OCTET, "x");
    rn_engine_submit(f->e, &r.op);
    assert_int_equal(r.out.done, 1);
    assert_int_equal(r.out.result, RN_ERR_NOT_FOUND);
    assert_false(rn_engine_busy(f->e));
}

/* A fork created with data (its first data makes its files) and a delete
 * of the source submitted right after it: the create was checked against
 * the source, so it must be logged first; the source then survives as a
 * soft-deleted stream under its fork. */
static void test_a_fork_create_with_data_is_logged_before_a_later_source_delete(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/src", OCTET, "abc").result, RN_OK_CREATED);
    req fork, del;
    req_init(&fork, RN_OP_CREATE, "/fork");
    req_text(&fork, OCTET, "def");
    fork.op.in.fork_source = "/src";
    fork.op.in.fork_source_len = 4;
    req_init(&del, RN_OP_DELETE, "/src");
    rn_engine_submit(f->e, &fork.op);
    rn_engine_submit(f->e, &del.op);
    run(f);
    assert_int_equal(fork.out.result, RN_OK_CREATED);
    assert_int_equal(del.out.result, RN_OK_DELETED);
    assert_true(fork.out.order < del.out.order);
    assert_true(rn_engine_is_gone(f->e, "/src", 4));
    expect_bytes(f, "/fork", "abcdef");
    restart_clean(f);
    assert_true(rn_engine_is_gone(f->e, "/src", 4));
    expect_bytes(f, "/fork", "abcdef");
}

static void test_observers_see_applied_changes_only(void **state) {
    fx *f = *state;
    create(f, "/h", NULL, NULL);
    assert_int_equal(f->creates, 1);
    assert_int_equal(f->changes, 0);
    append(f, "/h", "x");
    assert_int_equal(f->changes, 1);
    close_only(f, "/h");
    assert_int_equal(f->changes, 2);
    /* Refusals, duplicates and failed syncs change nothing observable. */
    append(f, "/h", "refused");
    close_only(f, "/h");
    create(f, "/h", NULL, NULL);
    rn_engine_inject_sync_failures(f->e, 1);
    create(f, "/failed", NULL, "x");
    assert_int_equal(f->creates, 1);
    assert_int_equal(f->changes, 2);
    assert_int_equal(f->removals, 0);
    delete_stream(f, "/h");
    assert_int_equal(f->removals, 1);
}

/* ------------------------------------------------------------------------ */
/* JSON streams                                                              */

static void test_json_stream_stores_minified_messages_with_lf(void **state) {
    fx *f = *state;
    outcome o = create(f, "/j", JSON, "[]");
    assert_int_equal(o.result, RN_OK_CREATED);
    assert_int_equal(o.next_offset, 0);
    assert_int_equal(find(f, "/j")->json, 1);
    o = append_ct(f, "/j", JSON, " { \"a\" : 1 , \"b\" : [ 1, 2 ] } ", 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    expect_bytes(f, "/j", "{\"a\":1,\"b\":[1,2]}\n");
    /* A top-level array is one message per element. */
    o = append_ct(f, "/j", JSON, "[1, \"two\", {\"3\": null}, [ ]]", 0);
    assert_int_equal(o.result, RN_OK_APPENDED);
    const char *all = "{\"a\":1,\"b\":[1,2]}\n1\n\"two\"\n{\"3\":null}\n[]\n";
    expect_bytes(f, "/j", all);
    assert_int_equal(o.next_offset, strlen(all));
    /* Strings keep their inner spaces. */
    append_ct(f, "/j", "application/json; charset=utf-8", "\"a b\"", 0);
    expect_bytes_from(f, "/j", strlen(all), "\"a b\"\n", 6);
}

static void test_json_append_refuses_invalid_and_empty_array(void **state) {
    fx *f = *state;
    create(f, "/j", JSON, "[1,2]");
    expect_bytes(f, "/j", "1\n2\n");
    assert_int_equal(append_ct(f, "/j", JSON, "[]", 0).result, RN_ERR_JSON_EMPTY_ARRAY);
    assert_int_equal(append_ct(f, "/j", JSON, " [ ] ", 0).result, RN_ERR_JSON_EMPTY_ARRAY);
    assert_int_equal(append_ct(f, "/j", JSON, "{bad", 0).result, RN_ERR_JSON_INVALID);
    assert_int_equal(append_ct(f, "/j", JSON, "1 2", 0).result, RN_ERR_JSON_INVALID);
    assert_int_equal(append_ct(f, "/j", JSON, "[1,]", 0).result, RN_ERR_JSON_INVALID);
    char deep[400];
    memset(deep, '[', 200);
    memset(deep + 200, ']', 200);
    req r;
    req_init(&r, RN_OP_APPEND, "/j");
    req_body(&r, JSON, deep, sizeof deep);
    assert_int_equal(run_req(f, &r).result, RN_ERR_JSON_TOO_DEEP);
    expect_bytes(f, "/j", "1\n2\n");
    /* Close-only needs no body, so no JSON check. */
    assert_int_equal(close_only(f, "/j").result, RN_OK_APPENDED);
    expect_bytes(f, "/j", "1\n2\n");
}

static void test_json_create_with_invalid_body_creates_nothing(void **state) {
    fx *f = *state;
    assert_int_equal(create(f, "/j", JSON, "{\"a\":").result, RN_ERR_JSON_INVALID);
    assert_null(find(f, "/j"));
    assert_int_equal(create(f, "/j", JSON, "{\"a\":1}").result, RN_OK_CREATED);
    expect_bytes(f, "/j", "{\"a\":1}\n");
}

static void test_json_reads_end_on_message_boundaries(void **state) {
    fx *f = *state;
    create(f, "/j", JSON, "[\"aaaaaaaaaa\", \"b\", \"cccccccccccccccccccc\"]");
    const char *all = "\"aaaaaaaaaa\"\n\"b\"\n\"cccccccccccccccccccc\"\n";
    expect_bytes(f, "/j", all);
    rn_stream *s = find(f, "/j");
    rn_buf b = {0};
    /* max smaller than the first message: whole messages still come (at
     * least the first one; the engine may return more). */
    long n = rn_engine_read(f->e, s, 0, 3, 1, &b);
    assert_true(n >= 13);
    assert_int_equal(b.data[n - 1], '\n');
    assert_memory_equal(b.data, all, (size_t)n);
    b.len = 0;
    /* max covering one and a half messages: cut after the whole one. */
    assert_int_equal(rn_engine_read(f->e, s, 0, 15, 1, &b), 13);
    assert_memory_equal(b.data, all, 13);
    b.len = 0;
    /* max covering two and a half messages: cut after the second. */
    assert_int_equal(rn_engine_read(f->e, s, 0, 20, 1, &b), 17);
    b.len = 0;
    assert_int_equal(rn_engine_read(f->e, s, 13, 100, 1, &b), (long)strlen(all) - 13);
    b.len = 0;
    /* Without whole_messages, max is exact even inside a message. */
    assert_int_equal(rn_engine_read(f->e, s, 0, 3, 0, &b), 3);
    assert_memory_equal(b.data, all, 3);
    b.len = 0;
    assert_int_equal(rn_engine_read(f->e, s, 14, 2, 0, &b), 2);
    assert_memory_equal(b.data, all + 14, 2);
    rn_buf_free(&b);
    assert_true(rn_engine_offset_valid(f->e, s, 0));
    assert_true(rn_engine_offset_valid(f->e, s, 13));
    assert_true(rn_engine_offset_valid(f->e, s, 17));
    assert_false(rn_engine_offset_valid(f->e, s, 5));
    assert_false(rn_engine_offset_valid(f->e, s, 14));
    assert_true(rn_engine_offset_valid(f->e, s, strlen(all)));
}

/* A read's length is found without reading it: a JSON range's last message
 * end is looked for backwards, 64 KiB at a time, and a first message longer
 * than max is followed forwards to its end. */
static void test_read_length_finds_message_ends_far_from_max(void **state) {
    fx *f = *state;
    size_t big = 200000; /* a message far longer than a scan step */
    char *body = malloc(big + 32);
    int n = snprintf(body, 32, "[\"a\", \"");
    memset(body + n, 'x', big);
    strcpy(body + n + big, "\", \"b\"]");
    create(f, "/long", JSON, body);
    free(body);
    rn_stream *s = find(f, "/long");
    uint64_t big_line = big + 3; /* the quoted message and its LF */
    assert_int_equal(s->tail, 4 + big_line + 4);
    /* the last message end within max lies more than two steps back */
    assert_int_equal(rn_engine_read_length(f->e, s, 0, 150000, 1), 4);
    /* a first message longer than max comes whole */
    assert_int_equal(rn_engine_read_length(f->e, s, 4, 1000, 1), (long)big_line);
    assert_int_equal(rn_engine_read_length(f->e, s, 4, (size_t)big_line + 3, 1), (long)big_line);
    assert_int_equal(rn_engine_read_length(f->e, s, 0, 1u << 30, 1), (long)s->tail);
    /* without whole_messages max is exact; past the tail nothing */
    assert_int_equal(rn_engine_read_length(f->e, s, 0, 150000, 0), 150000);
    assert_int_equal(rn_engine_read_length(f->e, s, s->tail, 10, 1), 0);
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 4, 1000, 1, &b), (long)big_line);
    assert_int_equal(b.data[big_line - 1], '\n');
    rn_buf_free(&b);
}

/* ------------------------------------------------------------------------ */
/* Delete                                                                    */

static void test_delete_then_recreate_gives_new_id_and_empty_data(void **state) {
    fx *f = *state;
    outcome c1 = create(f, "/d", NULL, "old data");
    append_prod(f, "/d", OCTET, "!", "w", 0, 0, 0);
    append_seq(f, "/d", OCTET, "?", "m");
    outcome d = delete_stream(f, "/d");
    assert_int_equal(d.result, RN_OK_DELETED);
    assert_int_equal(d.stream_id, 0);
    assert_null(find(f, "/d"));
    assert_int_equal(append(f, "/d", "x").result, RN_ERR_NOT_FOUND);
    assert_int_equal(delete_stream(f, "/d").result, RN_ERR_NOT_FOUND);

    outcome c2 = create(f, "/d", "text/plain", NULL);
    assert_int_equal(c2.result, RN_OK_CREATED);
    assert_true(c2.stream_id != c1.stream_id);
    rn_stream *s = find(f, "/d");
    assert_int_equal(s->tail, 0);
    assert_string_equal(s->content_type, "text/plain");
    assert_int_equal(s->producers.count, 0);
    expect_last_seq(s, NULL);
    rn_buf b = {0};
    assert_int_equal(rn_engine_read(f->e, s, 0, 100, 1, &b), 0);
    rn_buf_free(&b);
    /* Producer and Stream-Seq state started over. */
    assert_int_equal(append_prod(f, "/d", "text/plain", "n", "w", 0, 0, 0).result, RN_OK_APPENDED);
    assert_int_equal(append_seq(f, "/d", "text/plain", "m", "a").result, RN_OK_APPENDED);
    expect_bytes(f, "/d", "nm");
}

/* A namespace (a path's part before its first "/") exists from its first
 * create on, also once its streams are gone, across a clean restart (the
 * checkpoint) and a crash (the log's creates). */
static void test_namespaces_outlive_their_streams(void **state) {
    fx *f = *state;
    assert_false(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_int_equal(create(f, "b1/s", NULL, NULL).result, RN_OK_CREATED);
    assert_int_equal(create(f, "/rooted", NULL, NULL).result, RN_OK_CREATED);
    assert_int_equal(create(f, "plain", NULL, NULL).result, RN_OK_CREATED);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_false(rn_engine_namespace_exists(f->e, "b", 1));
    assert_false(rn_engine_namespace_exists(f->e, "b1/s", 4));
    assert_false(rn_engine_namespace_exists(f->e, "plain", 5));
    assert_false(rn_engine_namespace_exists(f->e, "", 0)); /* "/rooted" has none */
    assert_int_equal(delete_stream(f, "b1/s").result, RN_OK_DELETED);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    restart_clean(f);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_int_equal(create(f, "b2/s", NULL, NULL).result, RN_OK_CREATED);
    restart_crash(f, "crash", NULL);
    assert_true(rn_engine_namespace_exists(f->e, "b1", 2));
    assert_true(rn_engine_namespace_exists(f->e, "b2", 2));
    assert_false(rn_engine_namespace_exists(f->e, "b3", 2));
}

static void test_stream_ids_are_never_reused(void **state) {
    fx *f = *state;
    uint64_t seen[12];
    int n = 0;
    for (int round = 0; round < 3; round++) {
        seen[n++] = create(f, "/x", NULL, "1").stream_id;
        seen[n++] = create(f, "/y", NULL, "2").stream_id;
        delete_stream(f, "/x");
        delete_stream(f, "/y");
        if (round == 1)
            restart_clean(f);
        if (round == 2)
            restart_crash(f, "crash", NULL);
    }
    seen[n++] = create(f, "/x", NULL, "3").stream_id;
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++)
            assert_true(seen[i] != seen[j]);
}

/* A request submitted from inside a delete's done() callback. The HTTP
 * layer does exactly this when a client pipelines requests on one
 * connection: answering the DELETE resumes parsing, which submits the next
 * request before done() returns. */
static rn_engine *chain_engine;
static req chained;

static void delete_done_then_submit(rn_op *op) {
    req_done(op);
    rn_engine_submit(chain_engine, &chained.op);
}

static outcome delete_then_from_callback(fx *f, const char *path) {
    chain_engine = f->e;
    req d;
    req_init(&d, RN_OP_DELETE, path);
    d.op.done = delete_done_then_submit;
    outcome o = run_req(f, &d);
    assert_int_equal(o.result, RN_OK_DELETED);
    assert_int_equal(chained.out.done, 1);
    return o;
}

static void test_create_submitted_from_delete_callback_sees_stream_deleted(void **state) {
    fx *f = *state;
    uint64_t old = create(f, "/p", "text/plain", "old").stream_id;
    req_init(&chained, RN_OP_CREATE, "/p");
    req_text(&chained, JSON, "[1]");
    delete_then_from_callback(f, "/p");
    assert_int_equal(chained.out.result, RN_OK_CREATED);
    assert_true(chained.out.stream_id != old);
    rn_stream *s = find(f, "/p");
    assert_non_null(s);
    assert_string_equal(s->content_type, JSON);
    expect_bytes(f, "/p", "1\n");
}

static void test_append_submitted_from_delete_callback_finds_no_stream(void **state) {
    fx *f = *state;
    create(f, "/p", NULL, "old");
    req_init(&chained, RN_OP_APPEND, "/p");
    req_text(&chained, OCTET, "new");
    delete_then_from_callback(f, "/p");
    assert_int_equal(chained.out.result, RN_ERR_NOT_FOUND);
    assert_null(find(f, "/p"));
    assert_false(rn_engine_busy(f->e));
}

/* ------------------------------------------------------------------------ */
/* Expiry                                                                    */

static void test_expired_streams_are_not_found(void **state) {
    fx *f = *state;
    int64_t now = rn_now_ms();
    assert_int_equal(create_full(f, "/ttl0", NULL, "x", 0, -1, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/past", NULL, "x", -1, now - 1000, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/ttl", NULL, "x", 3600, -1, 0).result, RN_OK_CREATED);
    assert_int_equal(create_full(f, "/future", NULL, "x", -1, now + 3600000, 0).result,
                     RN_OK_CREATED);
    assert_null(find(f, "/ttl0"));
    assert_null(find(f, "/past"));
    assert_non_null(find(f, "/ttl"));
    assert_non_null(find(f, "/future"));
    run(f); /* lets the expiry deletions finish */
    assert_null(find(f, "/ttl0"));
    /* The expired stream is gone: a different config creates afresh rather
     * than being a mismatch, and appends find nothing. */
    assert_int_equal(append(f, "/past", "y").result, RN_ERR_NOT_FOUND);
    assert_int_equal(create(f, "/ttl0", "text/plain", "new").result, RN_OK_CREATED);
    expect_bytes(f, "/ttl0", "new");
}

static void test_mutations_of_expired_stream_see_it_deleted(void **state) {
    fx *f = *state;
    create_full(f, "/e", NULL, "x", -1, rn_now_ms() - 1, 0);
    /* No find first: the append itself discovers the expiry. */
    assert_int_equal(append(f, "/e", "y").result, RN_ERR_NOT_FOUND);
    create_full(f, "/e2", NULL, "x", 0, -1, 0);
    assert_int_equal(create(f, "/e2", NULL, NULL).result, RN_OK_CREATED);
    expect_bytes(f, "/e2", "");
}

static void test_sweep_deletes_expired_streams(void **state) {
    fx *f = *state;
    create_full(f, "/gone", NULL, "x", 0, -1, 0);
    create_full(f, "/kept", NULL, "x", 3600, -1, 0);
    int removals = f->removals;
    rn_engine_sweep_expired(f->e);
    run(f);
    assert_int_equal(f->removals, removals + 1);
    restart_clean(f);
    assert_int_equal(f->stats.streams, 1);
    assert_non_null(find(f, "/kept"));
}

/* The server's sweep runs in slices, one per loop turn: a pass deletes
 * every expired stream whatever the slice, keeps the others, and a pass
 * whose map grew between two slices starts over. */
static void test_a_sweep_in_slices_deletes_each_expired_stream(void **state) {
    fx *f = *state;
    char path[32];
    for (int i = 0; i < 60; i++) {
        snprintf(path, sizeof path, "/sw/%d", i);
        create_full(f, path, NULL, "x", i % 3 ? 3600 : 0, -1, 0); /* every third expires */
    }
    size_t slots = rn_engine_stream_slots(f->e);
    int removals = f->removals, slices = 1;
    rn_engine_sweep sw = {0};
    assert_int_equal(rn_engine_sweep_slice(f->e, &sw, 8), 0);
    /* the map grows: the pass starts over and still finds all 20 */
    for (int i = 0; i < 100; i++) {
        snprintf(path, sizeof path, "/grow/%d", i);
        create_full(f, path, NULL, "x", 3600, -1, 0);
    }
    assert_true(rn_engine_stream_slots(f->e) > slots);
    assert_int_equal(rn_engine_sweep_slice(f->e, &sw, 8), 0);
    assert_int_equal(sw.at.cursor, 8); /* started over: these 8 slots are the new map's first */
    while (!rn_engine_sweep_slice(f->e, &sw, 8))
        slices++;
    assert_true(slices > 2);
    run(f);
    assert_int_equal(f->removals, removals + 20);
    for (int i = 0; i < 60; i++) {
        snprintf(path, sizeof path, "/sw/%d", i);
        if (i % 3)
            assert_non_null(find(f, path));
        else
            assert_null(find(f, path));
    }
    /* the next pass starts from the beginning and finds nothing more */
    assert_int_equal(sw.at.cursor, 0);
    while (!rn_engine_sweep_slice(f->e, &sw, 8))
        ;
    run(f);
    assert_int_equal(f->removals, removals + 20);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        T(test_create_answers_created_then_exists_for_same_config),
        T(test_create_with_different_config_is_a_mismatch),
        T(test_create_without_content_type_defaults_to_octet_stream),
        T(test_create_with_body_stores_it_and_closed_create_refuses_appends),
        T(test_paths_are_distinct_streams),
        T(test_a_walk_in_slices_visits_each_visible_stream_once),
        T(test_append_then_read_back_bytes),
        T(test_append_refusals_change_nothing),
        T(test_refusals_are_answered_before_submit_returns),
        T(test_a_fork_create_with_data_is_logged_before_a_later_source_delete),
        T(test_observers_see_applied_changes_only),
        T(test_json_stream_stores_minified_messages_with_lf),
        T(test_json_append_refuses_invalid_and_empty_array),
        T(test_json_create_with_invalid_body_creates_nothing),
        T(test_json_reads_end_on_message_boundaries),
        T(test_read_length_finds_message_ends_far_from_max),
        T(test_delete_then_recreate_gives_new_id_and_empty_data),
        T(test_stream_ids_are_never_reused),
        T(test_namespaces_outlive_their_streams),
        T(test_create_submitted_from_delete_callback_sees_stream_deleted),
        T(test_append_submitted_from_delete_callback_finds_no_stream),
        T(test_expired_streams_are_not_found),
        T(test_mutations_of_expired_stream_see_it_deleted),
        T(test_sweep_deletes_expired_streams),
        T(test_a_sweep_in_slices_deletes_each_expired_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
