/*
 * tmpdir.c - removing a unit test's temporary directory tree. See tmpdir.h.
 */
#define _GNU_SOURCE /* nftw's FTW_DEPTH and FTW_PHYS */
#include "tmpdir.h"

#include <ftw.h>
#include <stdio.h>
#include <sys/stat.h>

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)flag;
    (void)ftw;
    return remove(path);
}

void rm_tree(const char *path) {
    nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}
