/*
 * target.c — base-URL parsing with the loopback check, and template
 * expansion (see target.h). The template is validated once at start-up so
 * that expansion, done for every stream, cannot fail.
 */
#include "target.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

/* Copies s[0..n) into dst[cap] NUL-terminated; -1 when it does not fit. */
static int copy_part(char *dst, size_t cap, const char *s, size_t n) {
    if (n >= cap)
        return -1;
    memcpy(dst, s, n);
    dst[n] = 0;
    return 0;
}

static int parse_host(bn_target *t, const char *host, size_t hlen, int port) {
    char h[64];
    if (copy_part(h, sizeof h, host, hlen) < 0)
        return -1;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&t->addr;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&t->addr;
    if (strcmp(h, "localhost") == 0)
        return uv_ip4_addr("127.0.0.1", port, a4);
    if (h[0] == '[') {
        if (strcmp(h, "[::1]") != 0)
            return -1;
        return uv_ip6_addr("::1", port, a6);
    }
    if (uv_ip4_addr(h, port, a4) != 0)
        return -1;
    return (ntohl(a4->sin_addr.s_addr) >> 24) == 127 ? 0 : -1;
}

/* Checks that every {...} in tmpl is {bucket} or {name}. */
static int check_placeholders(const char *tmpl) {
    for (const char *p = strchr(tmpl, '{'); p; p = strchr(p + 1, '{'))
        if (strncmp(p, "{bucket}", 8) != 0 && strncmp(p, "{name}", 6) != 0)
            return -1;
    return 0;
}

int bn_target_init(bn_target *t, const char *base, const char *tmpl, const char *bucket) {
    memset(t, 0, sizeof *t);
    if (strncmp(base, "http://", 7) != 0) {
        fprintf(stderr, "--base must start with http://\n");
        return -1;
    }
    const char *host = base + 7;
    const char *slash = strchr(host, '/');
    size_t authority = slash ? (size_t)(slash - host) : strlen(host);
    const char *colon = NULL;
    for (size_t i = 0; i < authority; i++)
        if (host[i] == ':')
            colon = host + i; /* the last colon: [::1]:port */
    int port = colon ? atoi(colon + 1) : 80;
    size_t hlen = colon ? (size_t)(colon - host) : authority;
    if (port <= 0 || port > 65535 || parse_host(t, host, hlen, port) != 0) {
        fprintf(stderr, "--base must name a loopback address (127.0.0.0/8, [::1], localhost)\n");
        return -1;
    }
    const char *path = slash ? slash : "";
    size_t plen = strlen(path);
    while (plen > 0 && path[plen - 1] == '/')
        plen--;
    if (copy_part(t->host_header, sizeof t->host_header, host, authority) < 0 ||
        copy_part(t->prefix, sizeof t->prefix, path, plen) < 0 ||
        copy_part(t->bucket, sizeof t->bucket, bucket, strlen(bucket)) < 0) {
        fprintf(stderr, "--base or --bucket too long\n");
        return -1;
    }
    if (strncmp(tmpl, "{base}", 6) != 0 || check_placeholders(tmpl + 6) != 0 ||
        copy_part(t->tmpl, sizeof t->tmpl, tmpl + 6, strlen(tmpl + 6)) < 0) {
        fprintf(stderr, "--url-template must start with {base} and use only {bucket}, {name}\n");
        return -1;
    }
    return 0;
}

/* Appends s[0..len) to out (capacity cap, *n used), truncating at cap-1. */
static void put(char *out, size_t cap, size_t *n, const char *s, size_t len) {
    if (len > cap - 1 - *n)
        len = cap - 1 - *n;
    memcpy(out + *n, s, len);
    *n += len;
}

void bn_target_path(const bn_target *t, const char *name, char *out, size_t cap) {
    size_t n = 0;
    put(out, cap, &n, t->prefix, strlen(t->prefix));
    for (const char *p = t->tmpl; *p;) {
        if (strncmp(p, "{bucket}", 8) == 0) {
            put(out, cap, &n, t->bucket, strlen(t->bucket));
            p += 8;
        } else if (strncmp(p, "{name}", 6) == 0) {
            put(out, cap, &n, name, strlen(name));
            p += 6;
        } else {
            put(out, cap, &n, p++, 1);
        }
    }
    out[n] = 0;
}
