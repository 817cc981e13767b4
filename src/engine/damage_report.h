/*
 * damage_report.h — the message of a log recovery that refused because
 * acknowledged records are lost: what the log says is lost (files and
 * bytes) and the streams of the records that still read back after the
 * damage, with how many records and which stream bytes they hold, so an
 * operator knows what a restore has to bring back.
 */
#ifndef RN_DAMAGE_REPORT_H
#define RN_DAMAGE_REPORT_H

#include <stddef.h>
#include <stdint.h>

#include "log/wal.h"

/* Names stream id: sets *len and returns its path, or NULL when the
 * checkpoint does not know the stream. */
typedef const char *(*rn_stream_namer)(void *arg, uint64_t id, size_t *len);

/* Writes the report (NUL-terminated, cut to cap) into out. Reads the log
 * of dir again (rn_wal_damaged_records); changes nothing. The report says
 * what is lost, not what to do about it. */
void rn_damage_report(const char *dir, uint64_t from_segment, const rn_wal_damage *damage,
                      rn_stream_namer name, void *arg, char *out, size_t cap);

/* The damage's name, which an operator passes to --accept-loss to accept
 * exactly this loss: "segment-N" for damage in or of log segment N (the
 * first missing one when segments are missing), "head" for wal/HEAD. */
#define RN_DAMAGE_NAME_MAX 32
void rn_damage_name(const rn_wal_damage *damage, char out[RN_DAMAGE_NAME_MAX]);

#endif
