/*
 * secret.c — secrets read from files and compared in constant time. See
 * secret.h.
 */
#include "util/secret.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int rn_secret_load(const char *path, const char *what, rn_secret *out, char *err, size_t errcap) {
    assert(path != NULL && what != NULL && out != NULL);
    rn_secret_wipe(out);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errcap, "%s %s: %s", what, path, strerror(errno));
        return -1;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(err, errcap, "%s %s: not a regular file", what, path);
        close(fd);
        return -1;
    }
    if (st.st_mode & 077) {
        snprintf(err, errcap, "%s %s: group or others may read or write it (chmod 600)", what,
                 path);
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, out->bytes, sizeof out->bytes);
    uint8_t extra;
    ssize_t more = n == (ssize_t)sizeof out->bytes ? read(fd, &extra, 1) : 0;
    close(fd);
    if (n < 0 || more != 0) {
        snprintf(err, errcap, "%s %s: %s", what, path,
                 n < 0 ? strerror(errno) : "longer than 1024 bytes");
        rn_secret_wipe(out);
        return -1;
    }
    size_t len = (size_t)n;
    while (len > 0 && (out->bytes[len - 1] == '\n' || out->bytes[len - 1] == '\r' ||
                       out->bytes[len - 1] == ' ' || out->bytes[len - 1] == '\t'))
        len--;
    for (size_t i = 0; i < len; i++)
        if (out->bytes[i] <= ' ' || out->bytes[i] == 0x7f) {
            snprintf(err, errcap, "%s %s: holds a space or a control character", what, path);
            rn_secret_wipe(out);
            return -1;
        }
    if (len < RN_SECRET_MIN) {
        snprintf(err, errcap, "%s %s: shorter than %d bytes", what, path, RN_SECRET_MIN);
        rn_secret_wipe(out);
        return -1;
    }
    out->len = len;
    return 0;
}

bool rn_secret_equals(const rn_secret *s, const void *p, size_t len) {
    assert(s != NULL && s->len > 0 && (p != NULL || len == 0));
    /* the length is not secret (the token's owner knows it); the bytes are */
    if (len != s->len)
        return false;
    return rn_equal_const_time(s->bytes, p, len);
}

bool rn_equal_const_time(const void *a, const void *b, size_t len) {
    assert(a != NULL && b != NULL);
    return CRYPTO_memcmp(a, b, len) == 0;
}

void rn_secret_wipe(rn_secret *s) {
    OPENSSL_cleanse(s->bytes, sizeof s->bytes);
    s->len = 0;
}
