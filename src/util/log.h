/*
 * log.h — the server's log: one line per event on stderr, human text or
 * JSON (--log-format), filtered by --log-level, plus an optional access log
 * line per answered request. Lines never carry request bodies, query
 * strings or credentials: callers pass only what is safe to show.
 */
#ifndef RN_LOG_H
#define RN_LOG_H

#include <stddef.h>
#include <stdint.h>

typedef enum { RN_LOG_DEBUG, RN_LOG_INFO, RN_LOG_WARN, RN_LOG_ERROR } rn_log_level;

/* Sets the format (json = 0: text) and the lowest level written. */
void rn_log_setup(int json, rn_log_level min_level);

/* Writes one event: `event` is a short snake_case name, the message is
 * printf-formatted free text. */
void rn_log(rn_log_level level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A line that may repeat many times a second (a full disk refusing every
 * write): rn_log_throttled() writes it at most once per interval_ms and
 * says in the next line it writes how many were held back meanwhile, so
 * every occurrence is accounted for. One throttle per kind of line, used
 * from one thread; zero-initialized. */
typedef struct {
    uint64_t last_ms;
    uint64_t held;
} rn_log_throttle;
void rn_log_throttled(rn_log_throttle *t, uint64_t interval_ms, rn_log_level level,
                      const char *event, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

/* Writes one access-log line (request method, path without its query,
 * status, body bytes sent, duration in microseconds, and the gate's tenant
 * when there is a gate, else NULL): in JSON, each item is its own member
 * (method, path, status, bytes, duration_us, tenant); in text, the message
 * "METHOD PATH STATUS BYTES MICROSECONDS[ tenant=NAME]". */
void rn_log_access(const char *method, const char *path, size_t path_len, int status,
                   uint64_t bytes, uint64_t micros, const char *tenant);

/* Parses "debug", "info", "warn" or "error"; returns -1 for anything else. */
int rn_log_level_parse(const char *s);

#endif
