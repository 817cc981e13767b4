/*
 * damage_report.c — names what a refused log recovery would lose. See
 * damage_report.h.
 *
 * The records after the damage are decoded as commands; each names its
 * stream by id, a CREATE by path too. Up to MAX_NAMED streams are listed
 * (memory stays bounded however long the log is), the rest are counted.
 * A stream is named by its path from the checkpoint, else from its CREATE
 * record, found after the damage or, in a second walk, before it.
 */
#include "engine/damage_report.h"
#include "engine/command.h"
#include "util/buf.h"

#include <stdio.h>
#include <string.h>

#define MAX_NAMED 6
#define NAME_MAX_SHOWN 120

typedef struct {
    uint64_t id;
    uint64_t records;
    uint64_t first, end; /* stream bytes of its appends (first == end: none) */
    char path[NAME_MAX_SHOWN + 1];
} affected_stream;

typedef struct {
    rn_stream_namer name;
    void *arg;
    affected_stream streams[MAX_NAMED];
    size_t count;
    uint64_t records, other_records, undecodable;
} report;

static void set_path(affected_stream *a, const char *path, size_t len) {
    if (len > NAME_MAX_SHOWN)
        len = NAME_MAX_SHOWN;
    memcpy(a->path, path, len);
    a->path[len] = 0;
}

static affected_stream *stream_of(report *r, uint64_t id) {
    for (size_t i = 0; i < r->count; i++)
        if (r->streams[i].id == id)
            return &r->streams[i];
    if (r->count == MAX_NAMED)
        return NULL;
    affected_stream *a = &r->streams[r->count++];
    *a = (affected_stream){.id = id};
    size_t len;
    const char *path = r->name(r->arg, id, &len);
    if (path)
        set_path(a, path, len);
    return a;
}

static int on_record(void *arg, const uint8_t *payload, size_t len) {
    report *r = arg;
    r->records++;
    rn_cmd c;
    if (rn_cmd_decode(payload, len, &c) != 0) {
        r->undecodable++;
        return 0;
    }
    affected_stream *a = stream_of(r, c.stream_id);
    if (!a) {
        r->other_records++;
        return 0;
    }
    a->records++;
    if (c.type == RN_CMD_CREATE && !a->path[0])
        set_path(a, c.path, c.path_len);
    if (c.data_len && (c.type == RN_CMD_APPEND || c.type == RN_CMD_CREATE)) {
        uint64_t end = c.offset + c.data_len;
        if (a->first == a->end || c.offset < a->first)
            a->first = c.offset;
        if (end > a->end)
            a->end = end;
    }
    return 0;
}

/* Before the damage: names the listed streams whose CREATE is there. */
static int on_record_before(void *arg, const uint8_t *payload, size_t len) {
    report *r = arg;
    rn_cmd c;
    if (rn_cmd_decode(payload, len, &c) != 0 || c.type != RN_CMD_CREATE)
        return 0;
    for (size_t i = 0; i < r->count; i++)
        if (r->streams[i].id == c.stream_id && !r->streams[i].path[0])
            set_path(&r->streams[i], c.path, c.path_len);
    return 0;
}

static int all_named(const report *r) {
    for (size_t i = 0; i < r->count; i++)
        if (!r->streams[i].path[0])
            return 0;
    return 1;
}

void rn_damage_report(const char *dir, uint64_t from_segment, const rn_wal_damage *damage,
                      rn_stream_namer name, void *arg, char *out, size_t cap) {
    report r = {.name = name, .arg = arg};
    int rc = rn_wal_damaged_records(dir, from_segment, damage, 1, on_record, &r);
    if (rc == 0 && !all_named(&r))
        rc = rn_wal_damaged_records(dir, from_segment, damage, 0, on_record_before, &r);
    rn_buf b = {0};
    rn_buf_append_str(&b, damage->what);
    if (rc < 0)
        rn_buf_appendf(&b, ". The records after the damage could not be read: %s", strerror(-rc));
    else if (r.records == 0)
        rn_buf_append_str(&b, ". No record after the damage reads back, so the streams it "
                              "touched cannot be named");
    else {
        rn_buf_appendf(&b, ". %llu records after the damage still read back; they touch ",
                       (unsigned long long)r.records);
        for (size_t i = 0; i < r.count; i++) {
            const affected_stream *a = &r.streams[i];
            if (i)
                rn_buf_append_str(&b, ", ");
            if (a->path[0])
                rn_buf_appendf(&b, "stream %s", a->path);
            else
                rn_buf_appendf(&b, "stream id %016llx (its name is in no readable record)",
                               (unsigned long long)a->id);
            rn_buf_appendf(&b, " (%llu records", (unsigned long long)a->records);
            if (a->end > a->first)
                rn_buf_appendf(&b, ", stream bytes %llu..%llu", (unsigned long long)a->first,
                               (unsigned long long)a->end);
            rn_buf_append_str(&b, ")");
        }
        if (r.other_records)
            rn_buf_appendf(&b, ", and %llu records of other streams",
                           (unsigned long long)r.other_records);
        if (r.undecodable)
            rn_buf_appendf(&b, "; %llu records do not decode", (unsigned long long)r.undecodable);
    }
    size_t n = b.len < cap ? b.len : cap - 1;
    memcpy(out, b.data, n);
    out[n] = 0;
    rn_buf_free(&b);
}

void rn_damage_name(const rn_wal_damage *damage, char out[RN_DAMAGE_NAME_MAX]) {
    if (damage->kind == RN_WAL_DAMAGED_HEAD)
        snprintf(out, RN_DAMAGE_NAME_MAX, "head");
    else
        snprintf(out, RN_DAMAGE_NAME_MAX, "segment-%llu", (unsigned long long)damage->segment);
}
