/*
 * log.c — text or JSON log lines on stderr. See log.h.
 *
 * A text line: "<RFC 3339 time> <level> <event>: <message>". A JSON line:
 * {"ts":"...","level":"...","event":"...","msg":"..."} with the message
 * JSON-escaped, so every line parses on its own; an access line carries
 * its items as members instead of "msg" (method, path, status, bytes,
 * duration_us).
 */
#include "util/log.h"
#include "util/buf.h"
#include "util/clock.h"
#include "util/text.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int json_format;
static rn_log_level min_level = RN_LOG_INFO;
static const char *const LEVEL_NAMES[] = {"debug", "info", "warn", "error"};

void rn_log_setup(int json, rn_log_level level) {
    json_format = json;
    min_level = level;
}

int rn_log_level_parse(const char *s) {
    for (int i = 0; i < 4; i++)
        if (strcmp(s, LEVEL_NAMES[i]) == 0)
            return i;
    return -1;
}

static void json_escaped(rn_buf *b, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            rn_buf_appendf(b, "\\%c", c);
        else if (c < 0x20)
            rn_buf_appendf(b, "\\u%04x", c);
        else
            rn_buf_append_byte(b, c);
    }
}

/* Writes a finished line with one write(2)-sized fwrite, so lines from the
 * loop and from worker threads never interleave mid-line. A JSON line
 * carries json_members (`"name":value,...`) instead of "msg" when given. */
static void emit(rn_log_level level, const char *event, const char *msg, size_t msg_len,
                 const rn_buf *json_members) {
    char ts[48];
    rn_format_rfc3339(rn_now_ms(), ts);
    rn_buf line = {0};
    if (json_format) {
        rn_buf_appendf(&line, "{\"ts\":\"%s\",\"level\":\"%s\",\"event\":\"", ts,
                       LEVEL_NAMES[level]);
        json_escaped(&line, event, strlen(event));
        if (json_members) {
            rn_buf_append_str(&line, "\",");
            rn_buf_append(&line, json_members->data, json_members->len);
        } else {
            rn_buf_append_str(&line, "\",\"msg\":\"");
            json_escaped(&line, msg, msg_len);
            rn_buf_append_byte(&line, '"');
        }
        rn_buf_append_str(&line, "}\n");
    } else {
        rn_buf_appendf(&line, "%s %s %s: ", ts, LEVEL_NAMES[level], event);
        rn_buf_append(&line, msg, msg_len);
        rn_buf_append_byte(&line, '\n');
    }
    fwrite(line.data, 1, line.len, stderr);
    fflush(stderr);
    rn_buf_free(&line);
}

void rn_log(rn_log_level level, const char *event, const char *fmt, ...) {
    if (level < min_level)
        return;
    va_list ap;
    va_start(ap, fmt);
    char msg[4096]; /* longer messages are cut */
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n >= 0)
        emit(level, event, msg, (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1, NULL);
}

void rn_log_throttled(rn_log_throttle *t, uint64_t interval_ms, rn_log_level level,
                      const char *event, const char *fmt, ...) {
    uint64_t now = rn_mono_ms();
    if (t->last_ms && now - t->last_ms < interval_ms) {
        t->held++;
        return;
    }
    t->last_ms = now;
    if (level < min_level) {
        t->held = 0;
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    char msg[4096];
    int n = vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof msg ? (size_t)n : sizeof msg - 1;
    if (t->held)
        len += (size_t)snprintf(msg + len, sizeof msg - len,
                                " (and %llu more like it since the last such line)",
                                (unsigned long long)t->held);
    if (len >= sizeof msg)
        len = sizeof msg - 1;
    t->held = 0;
    emit(level, event, msg, len, NULL);
}

void rn_log_access(const char *method, const char *path, size_t path_len, int status,
                   uint64_t bytes, uint64_t micros, const char *tenant) {
    if (RN_LOG_INFO < min_level)
        return;
    rn_buf msg = {0};
    if (json_format) {
        rn_buf_append_str(&msg, "\"method\":\"");
        json_escaped(&msg, method, strlen(method));
        rn_buf_append_str(&msg, "\",\"path\":\"");
        json_escaped(&msg, path, path_len);
        rn_buf_appendf(&msg, "\",\"status\":%d,\"bytes\":%llu,\"duration_us\":%llu", status,
                       (unsigned long long)bytes, (unsigned long long)micros);
        if (tenant) {
            rn_buf_append_str(&msg, ",\"tenant\":\"");
            json_escaped(&msg, tenant, strlen(tenant));
            rn_buf_append_str(&msg, "\"");
        }
        emit(RN_LOG_INFO, "access", NULL, 0, &msg);
    } else {
        rn_buf_appendf(&msg, "%s ", method);
        rn_buf_append(&msg, path, path_len);
        rn_buf_appendf(&msg, " %d %llu %llu", status, (unsigned long long)bytes,
                       (unsigned long long)micros);
        if (tenant)
            rn_buf_appendf(&msg, " tenant=%s", tenant);
        emit(RN_LOG_INFO, "access", (const char *)msg.data, msg.len, NULL);
    }
    rn_buf_free(&msg);
}
