/*
 * glob.c — segment-wise glob matching. See glob.h.
 *
 * Both levels use the classic single-backtrack-point wildcard algorithm:
 * characters within a segment against '*', and segments within a path
 * against "**". Remembering only the most recent star is enough because a
 * later star can absorb anything an earlier one could, which bounds the work
 * by the product of the lengths.
 */
#include "subs/glob.h"

#include <string.h>

/* Matches one segment against one pattern segment ('*' = any run). */
static int segment_match(const char *p, size_t pn, const char *s, size_t sn) {
    size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
    while (si < sn) {
        if (pi < pn && p[pi] == '*') {
            star = pi++;
            mark = si;
        } else if (pi < pn && p[pi] == s[si]) {
            pi++;
            si++;
        } else if (star != (size_t)-1) {
            pi = star + 1;
            si = ++mark;
        } else {
            return 0;
        }
    }
    while (pi < pn && p[pi] == '*')
        pi++;
    return pi == pn;
}

/* A cursor over the '/'-separated segments of a string. */
typedef struct {
    const char *s;
    size_t len;
} text;

/* Length of the segment starting at offset at (up to the next '/'). */
static size_t seg_len(text t, size_t at) {
    const char *slash = memchr(t.s + at, '/', t.len - at);
    return slash ? (size_t)(slash - (t.s + at)) : t.len - at;
}

/* Offset of the segment after the one at `at`, or len + 1 past the end. */
static size_t seg_next(text t, size_t at) {
    return at + seg_len(t, at) + 1;
}

static int is_globstar(text p, size_t at) {
    return seg_len(p, at) == 2 && p.s[at] == '*' && p.s[at + 1] == '*';
}

int rn_glob_match(const char *pattern, size_t pattern_len, const char *path, size_t path_len) {
    text p = {pattern, pattern_len}, s = {path, path_len};
    /* Offsets > len mean "no segments left". */
    size_t pi = 0, si = 0, star = (size_t)-1, mark = 0;
    while (si <= s.len) {
        if (pi <= p.len && is_globstar(p, pi)) {
            star = pi;
            pi = seg_next(p, pi);
            mark = si;
        } else if (pi <= p.len &&
                   segment_match(p.s + pi, seg_len(p, pi), s.s + si, seg_len(s, si))) {
            pi = seg_next(p, pi);
            si = seg_next(s, si);
        } else if (star != (size_t)-1) {
            pi = seg_next(p, star);
            mark = seg_next(s, mark);
            si = mark;
        } else {
            return 0;
        }
    }
    while (pi <= p.len && is_globstar(p, pi))
        pi = seg_next(p, pi);
    return pi > p.len;
}
