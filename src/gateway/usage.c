/*
 * usage.c — the usage log's file. See usage.h.
 */
#include "gateway/usage.h"
#include "util/log.h"
#include "util/text.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct rn_usage_log {
    uv_timer_t timer;
    char *path;
    uint64_t max_bytes;
    void (*fill)(void *arg, rn_buf *out);
    void *arg;
    rn_log_throttle failed;
};

static void write_out(rn_usage_log *u) {
    rn_buf lines = {0};
    u->fill(u->arg, &lines);
    if (!lines.len) {
        rn_buf_free(&lines);
        return;
    }
    struct stat st;
    if (u->max_bytes && stat(u->path, &st) == 0 && (uint64_t)st.st_size >= u->max_bytes) {
        char old[4200];
        snprintf(old, sizeof old, "%s.1", u->path);
        rename(u->path, old);
    }
    int fd = open(u->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
    size_t done = 0;
    while (fd >= 0 && done < lines.len) {
        ssize_t n = write(fd, lines.data + done, lines.len - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        done += (size_t)n;
    }
    if (done < lines.len)
        rn_log_throttled(&u->failed, 60000, RN_LOG_WARN, "gateway", "usage log %s not written: %s",
                         u->path, strerror(errno));
    if (fd >= 0)
        close(fd);
    rn_buf_free(&lines);
}

static void on_tick(uv_timer_t *t) {
    write_out(t->data);
}

rn_usage_log *rn_usage_log_start(uv_loop_t *loop, const char *path, uint64_t max_bytes,
                                 uint64_t interval_ms, void (*fill)(void *arg, rn_buf *out),
                                 void *arg) {
    rn_usage_log *u = rn_xcalloc(1, sizeof *u);
    u->path = strdup(path);
    if (!u->path)
        abort();
    u->max_bytes = max_bytes;
    u->fill = fill;
    u->arg = arg;
    uv_timer_init(loop, &u->timer);
    u->timer.data = u;
    uv_timer_start(&u->timer, on_tick, interval_ms, interval_ms);
    return u;
}

void rn_usage_log_stop(rn_usage_log *u) {
    if (!u)
        return;
    write_out(u);
    uv_timer_stop(&u->timer);
    uv_close((uv_handle_t *)&u->timer, NULL);
}

void rn_usage_log_free(rn_usage_log *u) {
    if (!u)
        return;
    free(u->path);
    free(u);
}
