/*
 * fs_shutdown.c — the power-cut test's switch (tests/crash/crash_test.mjs
 * --power-cut): shuts the ext4 file system mounted at MOUNTPOINT down at
 * once, without flushing its journal (EXT4_IOC_SHUTDOWN with
 * EXT4_GOING_FLAGS_NOLOGFLUSH, what `xfs_io -c shutdown` does), as losing
 * power would: whatever is only in the page cache or in journal transactions
 * not yet committed never reaches the device, and every later write fails.
 * The file system must then be unmounted and mounted again (the journal's
 * committed transactions are replayed then).
 *
 * Usage: fs_shutdown MOUNTPOINT   (root; exit 0, or 1 with the reason)
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/types.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

/* From the kernel's fs/ext4/ext4.h (not in the UAPI headers): the same
 * request number as XFS_IOC_GOINGDOWN. */
#define EXT4_IOC_SHUTDOWN _IOR('X', 125, __u32)
#define EXT4_GOING_FLAGS_NOLOGFLUSH 0x2

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: fs_shutdown MOUNTPOINT\n");
        return 2;
    }
    int fd = open(argv[1], O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "fs_shutdown: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    __u32 flags = EXT4_GOING_FLAGS_NOLOGFLUSH;
    if (ioctl(fd, EXT4_IOC_SHUTDOWN, &flags) != 0) {
        fprintf(stderr, "fs_shutdown: EXT4_IOC_SHUTDOWN on %s: %s\n", argv[1], strerror(errno));
        close(fd);
        return 1;
    }
    close(fd);
    return 0;
}
