/*
 * spares.h — stream files made ahead of need: a bounded reserve of empty
 * data, index and checksum file sets under <data>/spares/, made on
 * libuv's pool, so that the first data of a new stream takes a set by
 * renaming it (streamfiles.h, rn_streamfiles_take) instead of waiting for
 * three files to be created. The reserve holds no data: a set is three
 * empty files, and whatever a crash leaves there is removed by the next
 * process's first refill.
 */
#ifndef RN_TIERS_SPARES_H
#define RN_TIERS_SPARES_H

#include "tiers/streamfiles.h"

#include <stdint.h>
#include <uv.h>

typedef struct rn_spares rn_spares;

/* A reserve of `target` (> 0) file sets for files, under data_dir. NULL
 * when its directory cannot be made (streams are then given files the
 * slow way). Makes nothing before rn_spares_start. */
rn_spares *rn_spares_open(uv_loop_t *loop, rn_streamfiles *files, const char *data_dir,
                          unsigned target);
/* Clears what an earlier process left and fills the reserve, on a worker;
 * refills it, a batch at a time, whenever a set is taken. */
void rn_spares_start(rn_spares *sp);
/* Makes no more sets; a refill in flight finishes (run the loop). */
void rn_spares_stop(rn_spares *sp);
/* Frees sp (NULL: nothing); no refill is in flight. */
void rn_spares_close(rn_spares *sp);

/* On the loop thread: gives stream id its files from the reserve. Returns
 * 1 when they are made, 0 when the reserve is empty (sp NULL too), or
 * -errno (make the rest with rn_streamfiles_ensure). */
int rn_spares_take(rn_spares *sp, uint64_t id);

#endif
