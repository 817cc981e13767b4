/*
 * inherit.c — a fork apart from its source on a replica that does not
 * host the source's group (cluster placement: `--replicas` below the node
 * count). Such a replica cannot read the source, so it keeps the fork's
 * inherited range (its retained offset up to its fork offset) in the
 * fork's own file, at the same positions: the range starts as the fork's
 * gap, marked `held` in its gap record, and the fetcher (cluster/fetch.c)
 * copies it from a node that hosts the source's group; reads below the
 * fork offset then come from the fork's file (forkread.c). The source's
 * pin still holds it there (soft deletion, retention). See
 * docs/ARCHITECTURE.md ("Forks across groups").
 */
#include "engine/engine_int.h"

static uint64_t max_u64(uint64_t a, uint64_t b) {
    return a > b ? a : b;
}

uint64_t engine_own_from(const rn_stream *s) {
    return max_u64(max_u64(s->inherit ? 0 : s->fork_offset, s->retained), s->cold_end);
}

rn_streamfiles_gap engine_gap_record(const rn_stream *s) {
    return (rn_streamfiles_gap){.from = s->gap_from,
                                .to = s->gap_to,
                                .kfrom = s->gap_kfrom,
                                .kto = s->gap_kto,
                                .held = s->inherit ? s->fork_offset : 0};
}

int engine_hosts(const rn_engine *e, uint64_t id) {
    const rn_cmdlog_ops *ops = e->log ? e->log->ops : NULL;
    return !ops || !ops->hosts || ops->hosts(e->log, id);
}

int engine_inherit_wanted(const rn_engine *e, const rn_stream *s) {
    return s->apart_source && s->retained < s->fork_offset && !engine_hosts(e, s->apart_source);
}

void engine_inherit_created(rn_engine *e, uint64_t id) {
    rn_stream *s = rn_state_stream(&e->state, id);
    if (!s || s->pending_create || s->inherit || !s->apart_source)
        return;
    engine_find_gap(e, s); /* its record, when applied again at a start, says it is kept */
    if (s->gap_from < s->gap_to && e->on_damage)
        e->on_damage(e->on_damage_arg, id); /* the fetcher copies it */
}

void engine_inherit_scan(rn_engine *e) {
    size_t i = 0;
    void *v;
    while (rn_map_next(&e->state.by_id, &i, &v)) {
        rn_stream *s = v;
        if (!s->pending_create && !s->inherit && engine_inherit_wanted(e, s))
            engine_find_gap(e, s);
    }
}
