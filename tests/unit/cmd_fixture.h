/*
 * cmd_fixture.h - engine commands built as the pipeline logs them, for the
 * unit tests that apply commands directly (test_state_apply.c,
 * test_engine_pins.c).
 */
#ifndef RN_TEST_CMD_FIXTURE_H
#define RN_TEST_CMD_FIXTURE_H

#include <stdint.h>
#include <string.h>

#include "engine/command.h"

#define INC 0x10000000000123ull /* a token in [2^52, 2^53) */

/* A CREATE of path (id, at time 1000, text/plain, no expiry) with data
 * (NULL: none). */
static inline rn_cmd cmd_create(uint64_t id, const char *path, const char *data) {
    return (rn_cmd){.type = RN_CMD_CREATE,
                    .stream_id = id,
                    .time_ms = 1000,
                    .path = path,
                    .path_len = strlen(path),
                    .incarnation = INC + id,
                    .content_type = "text/plain",
                    .content_type_len = 10,
                    .ttl_s = -1,
                    .expires_at_ms = -1,
                    .data = (const uint8_t *)data,
                    .data_len = data ? strlen(data) : 0};
}

#endif
