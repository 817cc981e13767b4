/*
 * fences.h — the state machine's side of a bucket purge, shared by apply.c
 * and fences.c (private to the state machine): applying a FENCE, a PURGE,
 * and the refusal of a create its namespace's fence covers. See state.h
 * (rn_fence) for the table and engine/purge.c for who logs the commands.
 */
#ifndef RN_ENGINE_FENCES_H
#define RN_ENGINE_FENCES_H

#include "engine/state.h"

/* A FENCE command: records (or widens) the namespace's fence. */
void rn_fences_apply_fence(rn_state *st, const rn_cmd *c);

/* A PURGE of stream s: when its namespace's fence covers it, forks of it
 * (elsewhere: a fork in the fenced namespace goes by its own PURGE) lose
 * the bytes they read through it, then s is destroyed with its files,
 * snapshot body and history objects (fx). A stream the fence does not
 * cover is left alone (such a PURGE is never logged). */
void rn_fences_apply_purge(rn_state *st, rn_stream *s, const rn_effects *fx);

/* Whether a CREATE must be refused at apply: its path's namespace is
 * fenced for the group of its id. Then out->erased is set and nothing is
 * created; the pending stream the pipeline made for it, when there is one
 * (the proposer's), is left to the pipeline, which destroys it once it
 * released the stream's files (pipeline.c command_done). Returns 1 when
 * refused. */
int rn_fences_refuse_create(const rn_state *st, const rn_cmd *c, rn_applied *out);

#endif
