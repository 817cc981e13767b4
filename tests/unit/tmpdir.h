/*
 * tmpdir.h - removing a unit test's temporary directory tree, shared by
 * every unit test executable (tests/CMakeLists.txt links tmpdir.c in).
 */
#ifndef RN_TEST_TMPDIR_H
#define RN_TEST_TMPDIR_H

/* Removes path and everything under it, not following symbolic links;
 * best effort: what cannot be removed stays. */
void rm_tree(const char *path);

#endif
