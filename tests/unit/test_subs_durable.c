/*
 * test_subs_durable.c - unit tests for src/subs/durable.{h,c}, the atomic
 * whole-file rewrites with group commit behind the subscription state.
 *
 * How: a real libuv loop and a temporary directory. The encoded "state" is
 * a counter the test bumps with every change, so the file's content tells
 * exactly which changes a write covered. Checked: a waiter on clean state
 * runs at once; a waiter runs only after a write covering every change made
 * before it, and the file then holds at least that state; changes made
 * while a write is in flight are gathered into one following write; a
 * failed write (its directory is missing) fails the waiters it covered and
 * is retried a second later, after which the state is durable; close
 * writes a dirty state one last time; rn_atomic_write_file leaves mode 0600
 * and no temporary file. With a sink (cluster mode's replicated log): the
 * sink gets each write instead of the file, waiters run when it says the
 * state is durable and get its failure code otherwise, a discard answers
 * the pending waiters with its code and writes nothing for them, and close
 * writes no file.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "subs/durable.h"
#include "util/files.h"

typedef struct {
    int state;  /* the value encoded into the file */
    int writes; /* successful writes */
} model;

static void encode(void *arg, rn_buf *out) {
    rn_buf_appendf(out, "%d", ((model *)arg)->state);
}

static void written(void *arg) {
    ((model *)arg)->writes++;
}

typedef struct {
    rn_durable_waiter w;
    int called, status;
} waiter;

static void on_wait(rn_durable_waiter *w, int status) {
    waiter *x = (waiter *)w;
    x->called++;
    x->status = status;
}

static int file_value(const char *dir) {
    rn_buf b = {0};
    if (rn_read_file(dir, "state", &b) < 0)
        return -1;
    rn_buf_append_byte(&b, 0);
    int v = atoi((char *)b.data);
    rn_buf_free(&b);
    return v;
}

/* Runs the loop until w was called (bounded). */
static void run_until(uv_loop_t *loop, const waiter *w) {
    for (int i = 0; i < 400 && !w->called; i++) {
        uv_run(loop, UV_RUN_ONCE);
        if (!w->called)
            usleep(5000);
    }
    assert_int_equal(w->called, 1);
}

static char dir[64];

static int make_dir(void **state) {
    (void)state;
    snprintf(dir, sizeof dir, "/tmp/runnel-durable-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int remove_dir(void **state) {
    (void)state;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void close_all(uv_loop_t *loop, rn_durable *d) {
    rn_durable_stop(d);
    uv_run(loop, UV_RUN_DEFAULT);
    assert_int_equal(rn_durable_close(d), 0);
    assert_int_equal(uv_loop_close(loop), 0);
}

static void test_group_commit(void **state) {
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    model m = {0, 0};
    rn_durable *d = rn_durable_open(&loop, dir, "state", encode, written, &m);

    waiter clean = {.w.fn = on_wait};
    rn_durable_wait(d, &clean.w);
    assert_int_equal(clean.called, 1); /* nothing to wait for */
    assert_int_equal(clean.status, 0);

    m.state = 1;
    rn_durable_changed(d);
    m.state = 2;
    rn_durable_changed(d);
    waiter w1 = {.w.fn = on_wait};
    rn_durable_wait(d, &w1.w);
    assert_int_equal(w1.called, 0); /* not before the write */
    uv_run(&loop, UV_RUN_NOWAIT);   /* the deferred write starts: it covers state 2 */
    m.state = 3;
    rn_durable_changed(d);
    waiter w2 = {.w.fn = on_wait};
    rn_durable_wait(d, &w2.w);
    m.state = 4;
    rn_durable_changed(d);
    waiter w3 = {.w.fn = on_wait};
    rn_durable_wait(d, &w3.w);
    run_until(&loop, &w1);
    assert_int_equal(w1.status, 0);
    run_until(&loop, &w3);
    assert_int_equal(w2.called, 1);
    assert_int_equal(w2.status, 0);
    assert_int_equal(file_value(dir), 4);
    assert_int_equal(rn_durable_synced(d), rn_durable_seq(d));
    assert_int_equal(m.writes, 2); /* 1+2 together, then 3+4 together */

    /* close writes a dirty state */
    m.state = 5;
    rn_durable_changed(d);
    close_all(&loop, d);
    assert_int_equal(file_value(dir), 5);
}

static void test_failed_write_is_retried(void **state) {
    (void)state;
    char sub[96];
    snprintf(sub, sizeof sub, "%s/not-yet", dir);
    uv_loop_t loop;
    uv_loop_init(&loop);
    model m = {7, 0};
    rn_durable *d = rn_durable_open(&loop, sub, "state", encode, written, &m);
    rn_durable_changed(d);
    waiter w1 = {.w.fn = on_wait};
    rn_durable_wait(d, &w1.w);
    run_until(&loop, &w1);
    assert_true(w1.status < 0); /* the directory does not exist */
    assert_int_equal(m.writes, 0);
    assert_true(rn_durable_synced(d) < rn_durable_seq(d));
    assert_int_equal(mkdir(sub, 0700), 0);
    waiter w2 = {.w.fn = on_wait};
    rn_durable_wait(d, &w2.w); /* answered by the retry, a second later */
    run_until(&loop, &w2);
    assert_int_equal(w2.status, 0);
    assert_int_equal(m.writes, 1);
    assert_int_equal(file_value(sub), 7);
    close_all(&loop, d);
}

/* A sink that keeps the job until the test completes it. */
typedef struct {
    int calls;
    char last[16];
    rn_durable_done done;
    void *job;
} sink_model;

static void sink(void *arg, const uint8_t *data, size_t len, rn_durable_done done, void *job) {
    sink_model *k = arg;
    k->calls++;
    snprintf(k->last, sizeof k->last, "%.*s", (int)len, (const char *)data);
    k->done = done;
    k->job = job;
}

static void complete(sink_model *k, int status) {
    assert_non_null(k->done);
    rn_durable_done done = k->done;
    k->done = NULL;
    done(k->job, status);
}

static void test_sink(void **state) {
    (void)state;
    uv_loop_t loop;
    uv_loop_init(&loop);
    model m = {0, 0};
    sink_model k = {0};
    rn_durable *d = rn_durable_open(&loop, dir, "state", encode, written, &m);
    rn_durable_set_sink(d, sink, &k);

    m.state = 1;
    rn_durable_changed(d);
    waiter w1 = {.w.fn = on_wait};
    rn_durable_wait(d, &w1.w);
    uv_run(&loop, UV_RUN_NOWAIT); /* the write goes to the sink */
    assert_int_equal(k.calls, 1);
    assert_string_equal(k.last, "1");
    m.state = 2;
    rn_durable_changed(d);
    waiter w2 = {.w.fn = on_wait};
    rn_durable_wait(d, &w2.w);
    complete(&k, 0);
    assert_int_equal(w1.called, 1);
    assert_int_equal(w1.status, 0);
    assert_int_equal(w2.called, 0); /* state 2 is not in the sink yet */
    assert_int_equal(m.writes, 1);
    uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(k.calls, 2);
    assert_string_equal(k.last, "2");
    complete(&k, -EIO); /* the sink's failure reaches the waiter */
    assert_int_equal(w2.called, 1);
    assert_int_equal(w2.status, -EIO);

    /* a discard answers what waits with its code; nothing more is written */
    waiter w3 = {.w.fn = on_wait};
    rn_durable_wait(d, &w3.w);
    rn_durable_discard(d, -EAGAIN);
    assert_int_equal(w3.called, 1);
    assert_int_equal(w3.status, -EAGAIN);
    assert_int_equal(rn_durable_synced(d), rn_durable_seq(d));
    for (int i = 0; i < 5; i++)
        uv_run(&loop, UV_RUN_NOWAIT);
    assert_int_equal(k.calls, 2);

    /* close with a change the sink never took: no file, an error */
    m.state = 3;
    rn_durable_changed(d);
    rn_durable_stop(d);
    uv_run(&loop, UV_RUN_DEFAULT);
    assert_int_equal(k.calls, 2);
    assert_true(rn_durable_close(d) < 0);
    assert_int_equal(uv_loop_close(&loop), 0);
    assert_int_equal(file_value(dir), -1);
}

static void test_atomic_write_file(void **state) {
    (void)state;
    assert_int_equal(rn_atomic_write_file(dir, "f", "hello", 5, 0600), 0);
    assert_int_equal(rn_atomic_write_file(dir, "f", "bye", 3, 0600), 0);
    char path[128];
    struct stat st;
    snprintf(path, sizeof path, "%s/f", dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, 3);
    snprintf(path, sizeof path, "%s/f.tmp", dir);
    assert_int_not_equal(stat(path, &st), 0);
    rn_buf b = {0};
    assert_int_equal(rn_read_file(dir, "missing", &b), -ENOENT);
    rn_buf_free(&b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_group_commit, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_failed_write_is_retried, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_sink, make_dir, remove_dir),
        cmocka_unit_test_setup_teardown(test_atomic_write_file, make_dir, remove_dir),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
