/*
 * state.c — the subscriptions state file (<data>/subs/state.json).
 *
 * One JSON document holds every subscription: its configuration (in the
 * create-body form, read back through the same parser as client requests),
 * creation time, links with their acked positions, and the wake state
 * (generation, wake id, trigger, announced flag, lease holder and expiry,
 * failed attempts, next attempt time). Runtime-only fields (fetches in
 * flight, the announce list) are not stored. The file is rewritten whole
 * by durable.c; a file that does not parse is refused at start, because
 * atomic rewrites never leave a partial one behind. In cluster mode the
 * same document is the replicated state (replica.c) and also carries the
 * signing and token keys ("keys"), which replace the node's own when it
 * loads.
 */
#include "subs/subs_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STATE_VERSION 1

static json_t *opt_string(const char *s) {
    return s ? json_string(s) : json_null();
}

static json_t *encode_sub(const rn_sub *sub) {
    json_t *links = json_array();
    rn_sub_link **all = rn_sub_links_sorted(sub);
    for (size_t i = 0; i < sub->links.count; i++) {
        const rn_sub_link *l = all[i];
        json_array_append_new(links, json_pack("{s:s%, s:b, s:b, s:I, s:I, s:I}", "path", l->path,
                                               l->path_len, "explicit", l->is_explicit, "glob",
                                               l->is_glob, "acked", (json_int_t)l->acked,
                                               "stream_id", (json_int_t)l->stream_id, "snapshot",
                                               (json_int_t)l->snapshot));
    }
    free(all);
    json_t *o = json_object();
    json_object_set_new(o, "id", json_stringn(sub->id, sub->id_len));
    json_object_set_new(o, "config", rn_sub_config_json(&sub->cfg));
    json_object_set_new(o, "created_ms", json_integer(sub->created_ms));
    json_object_set_new(o, "generation", json_integer((json_int_t)sub->generation));
    json_object_set_new(o, "wake_id", json_string(sub->wake_id));
    json_object_set_new(o, "trigger", opt_string(sub->trigger));
    json_object_set_new(o, "announced", json_boolean(sub->announced));
    json_object_set_new(o, "holder", opt_string(sub->holder));
    json_object_set_new(o, "lease_expires_ms", json_integer(sub->lease_expires_ms));
    json_object_set_new(o, "attempts", json_integer(sub->attempts));
    json_object_set_new(o, "next_attempt_ms", json_integer(sub->next_attempt_ms));
    json_object_set_new(o, "links", links);
    return o;
}

void rn_state_encode(void *arg, rn_buf *out) {
    rn_subs *S = arg;
    json_t *subs = json_array();
    size_t i = 0;
    void *v;
    while (rn_map_next(&S->subs, &i, &v))
        json_array_append_new(subs, encode_sub(v));
    json_t *root = json_pack("{s:i, s:o}", "version", STATE_VERSION, "subscriptions", subs);
    if (S->replicated) /* every node of the cluster signs and checks with these */
        json_object_set_new(root, "keys", rn_subs_keys_json(S->keys));
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    rn_buf_append_str(out, text);
    free(text);
}

/* A copy of a string-or-null member; sets *ok = 0 for anything else. */
static char *opt_dup(const json_t *v, int *ok) {
    if (json_is_null(v))
        return NULL;
    if (!json_is_string(v)) {
        *ok = 0;
        return NULL;
    }
    return rn_xstrndup(json_string_value(v), json_string_length(v));
}

static int load_links(rn_subs *S, rn_sub *sub, const json_t *links) {
    if (!json_is_array(links))
        return -1;
    for (size_t i = 0; i < json_array_size(links); i++) {
        const char *path;
        size_t path_len;
        int is_explicit, is_glob;
        json_int_t acked, stream_id, snapshot;
        if (json_unpack(json_array_get(links, i), "{s:s%, s:b, s:b, s:I, s:I, s:I}", "path", &path,
                        &path_len, "explicit", &is_explicit, "glob", &is_glob, "acked", &acked,
                        "stream_id", &stream_id, "snapshot", &snapshot) < 0 ||
            acked < 0 || stream_id < 0 || (!is_explicit && !is_glob) ||
            rn_sub_link_get(sub, path, path_len))
            return -1;
        rn_sub_link *l =
            rn_sub_link_add(S, sub, path, path_len, (uint64_t)acked, (uint64_t)stream_id);
        rn_sub_link_set_explicit(S, l, is_explicit);
        l->is_glob = is_glob;
        l->snapshot = snapshot;
    }
    return 0;
}

static int load_sub(rn_subs *S, const json_t *o) {
    const char *id, *wake_id;
    size_t id_len;
    json_t *config, *trigger, *holder, *links;
    json_int_t created, generation, lease, attempts, next_attempt;
    int announced;
    if (json_unpack((json_t *)o, "{s:s%, s:o, s:I, s:I, s:s, s:o, s:b, s:o, s:I, s:I, s:I, s:o}",
                    "id", &id, &id_len, "config", &config, "created_ms", &created, "generation",
                    &generation, "wake_id", &wake_id, "trigger", &trigger, "announced", &announced,
                    "holder", &holder, "lease_expires_ms", &lease, "attempts", &attempts,
                    "next_attempt_ms", &next_attempt, "links", &links) < 0 ||
        generation < 0 || attempts < 0 || strlen(wake_id) >= RN_WAKE_ID_MAX ||
        rn_sub_find(S, id, id_len))
        return -1;
    rn_sub_config cfg;
    rn_error e;
    if (rn_sub_config_parse(config, &cfg, &e) < 0)
        return -1;
    rn_sub *sub = rn_sub_add(S, id, id_len, &cfg, created);
    int ok = 1;
    sub->generation = (uint64_t)generation;
    strcpy(sub->wake_id, wake_id);
    sub->trigger = opt_dup(trigger, &ok);
    sub->announced = announced;
    sub->holder = opt_dup(holder, &ok);
    sub->lease_expires_ms = lease;
    sub->attempts = (uint32_t)attempts;
    sub->next_attempt_ms = next_attempt;
    return ok && load_links(S, sub, links) == 0 ? 0 : -1;
}

/* The replicated state's keys (cluster mode) replace the node's own. */
static int load_keys(rn_subs *S, const json_t *keys) {
    if (!keys)
        return 0;
    rn_subs_keys *k = rn_subs_keys_from_json(keys);
    if (!k)
        return -1;
    rn_subs_keys_free(S->keys);
    S->keys = k;
    return 0;
}

int rn_state_load(rn_subs *S, const uint8_t *data, size_t len, char *err, size_t errcap) {
    json_error_t jerr;
    json_t *root = json_loadb((const char *)data, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *subs = NULL, *keys = NULL;
    int version = 0, rc = -1;
    if (root &&
        json_unpack(root, "{s:i, s:o, s?o}", "version", &version, "subscriptions", &subs, "keys",
                    &keys) == 0 &&
        version == STATE_VERSION && json_is_array(subs) && load_keys(S, keys) == 0) {
        rc = 0;
        for (size_t i = 0; i < json_array_size(subs) && rc == 0; i++)
            rc = load_sub(S, json_array_get(subs, i));
    }
    json_decref(root);
    if (rc < 0)
        snprintf(err, errcap, "%s/%s is not a valid subscriptions state file", S->dir,
                 RN_SUBS_STATE_FILE);
    return rc;
}
