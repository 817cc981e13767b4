/*
 * glob.h — subscription patterns over stream paths (PROTOCOL.md §6.2).
 *
 * Paths and patterns are split into segments at '/'. A pattern segment
 * that is exactly "**" matches zero or more whole segments. In any other
 * segment '*' matches any run of characters (possibly empty) within one
 * segment, so a segment "*" matches exactly one segment; every other
 * character matches itself. Examples (a space follows each slash before a
 * star only because C comments cannot hold that pair): "events/ *" matches
 * "events/a" but not "events/a/b"; "events/ **" matches "events",
 * "events/a" and "events/a/b".
 */
#ifndef RN_SUBS_GLOB_H
#define RN_SUBS_GLOB_H

#include <stddef.h>

/* True when path matches pattern. Runs in O(len(pattern) * len(path)) time
 * at worst (no exponential backtracking), with no allocation. */
int rn_glob_match(const char *pattern, size_t pattern_len, const char *path, size_t path_len);

#endif
