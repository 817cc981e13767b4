/*
 * support.h — what the client library's tests share: a runnel server run
 * on a free loopback port with a fresh data directory (started, killed,
 * restarted, removed), and raw requests with any headers through the
 * library's HTTP layer, so a test can drive answers the public calls
 * never provoke (malformed headers, partial producer keys).
 */
#ifndef RN_CLIENT_TEST_SUPPORT_H
#define RN_CLIENT_TEST_SUPPORT_H

#include "client/internal.h"
#include "util/buf.h"

#include <sys/types.h>

typedef struct {
    pid_t pid;
    int port;
    char dir[256];
    char data[300];
    char url[64];
    char *args[24]; /* extra serve flags */
    int nargs;
} ts_server;

/* Starts `runnel serve` ($RUNNEL_BIN, else build/runnel) with the extra
 * flags (NULL-terminated; may be NULL), waits until /__runnel/readyz
 * answers 200 (10 s at most). Aborts the test program on failure. */
ts_server *ts_start(const char *const *extra);
/* Starts the same server again (same port and data directory). */
void ts_restart(ts_server *s);
/* SIGTERM and wait (0 when it exited 0). */
int ts_stop(ts_server *s);
/* SIGKILL and wait. */
void ts_kill(ts_server *s);
/* Stops it (if running) and removes its directory. Returns 0 when it
 * stopped cleanly (exit 0 on SIGTERM: no sanitizer report), else -1 after
 * printing the end of its log. */
int ts_free(ts_server *s);

/* The server of a test group (--test-hooks) and a client for it, made by
 * ts_group_setup and ended by ts_group_teardown (cmocka group fixtures;
 * the teardown fails when the server did not stop cleanly). */
extern ts_server *S;
extern runnel_client *C;
int ts_group_setup(void **state);
int ts_group_teardown(void **state);

/* A data sink that appends to an rn_buf (arg). */
int ts_collect(void *arg, const void *d, size_t n);
/* The whole stream from -1 into out (emptied first); aborts unless the
 * reads succeed. */
void ts_read_all(runnel_client *c, const char *url, rn_buf *out);

/* A client for the server. */
runnel_client *ts_client(const ts_server *s);

/* One request with the given header lines ("Name: value", NULL-terminated)
 * and body; the answer is read as the library reads any. Returns the
 * status (0: no answer). */
int ts_req(runnel_client *c, const char *method, const char *target, const char *const *headers,
           const void *body, size_t len, runnel_answer *ans);
/* POST /__runnel/test/<what>: a test hook; returns its status. */
int ts_hook(runnel_client *c, const char *what);

/* Creates a stream (PUT with the content type); returns its incarnation
 * in inc (32 bytes). Aborts unless 201. */
void ts_create(runnel_client *c, const char *path, const char *type, char *inc);

/* A unique name for this run ("s1", "s2", ...) with a prefix. */
const char *ts_name(const char *prefix);

/* Sleeps ms milliseconds. */
void ts_sleep_ms(long ms);

#endif
