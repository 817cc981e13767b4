/*
 * url.c — webhook URL and address checks. See url.h.
 *
 * The URL parser accepts exactly: scheme "://" host [":" port] [path and
 * query], over printable ASCII. Anything it does not understand is refused
 * rather than guessed at, because the same text is later handed to libcurl,
 * whose reading of an odd URL could differ from ours.
 */
#include "subs/url.h"
#include "util/buf.h"
#include "util/text.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#define MAX_URL_LEN 2048

static rn_addr_class classify_v4(const uint8_t a[4]) {
    if (a[0] == 0)
        return RN_ADDR_OTHER_LOCAL; /* "this network" */
    if (a[0] == 10 || (a[0] == 172 && (a[1] & 0xf0) == 16) || (a[0] == 192 && a[1] == 168) ||
        (a[0] == 100 && (a[1] & 0xc0) == 64))
        return RN_ADDR_PRIVATE;
    if (a[0] == 127)
        return RN_ADDR_LOOPBACK;
    if (a[0] == 169 && a[1] == 254)
        return RN_ADDR_LINK_LOCAL;
    if ((a[0] == 192 && a[1] == 0 && (a[2] == 0 || a[2] == 2)) ||
        (a[0] == 198 && (a[1] & 0xfe) == 18) || (a[0] == 198 && a[1] == 51 && a[2] == 100) ||
        (a[0] == 203 && a[1] == 0 && a[2] == 113) || a[0] >= 224)
        return RN_ADDR_OTHER_LOCAL; /* protocol, benchmark, documentation,
                                       multicast, reserved, broadcast */
    return RN_ADDR_PUBLIC;
}

static rn_addr_class classify_v6(const uint8_t a[16]) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t nat64[12] = {0, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0};
    if (rn_bytes_zero(a, 15))
        return a[15] == 1   ? RN_ADDR_LOOPBACK
               : a[15] == 0 ? RN_ADDR_OTHER_LOCAL
                            : classify_v4(a + 12);
    if (rn_bytes_zero(a, 12) || memcmp(a, mapped, 12) == 0 || memcmp(a, nat64, 12) == 0)
        return classify_v4(a + 12); /* compatible, mapped, NAT64 */
    if (a[0] == 0x20 && a[1] == 0x02)
        return classify_v4(a + 2); /* 6to4 */
    if ((a[0] & 0xfe) == 0xfc)
        return RN_ADDR_PRIVATE; /* unique local */
    if (a[0] == 0xfe && (a[1] & 0xc0) == 0x80)
        return RN_ADDR_LINK_LOCAL;
    if ((a[0] == 0xfe && (a[1] & 0xc0) == 0xc0) || a[0] == 0xff)
        return RN_ADDR_OTHER_LOCAL; /* site-local, multicast */
    if ((a[0] == 0x20 && a[1] == 0x01 &&
         (rn_bytes_zero(a + 2, 2) || (a[2] == 0x0d && a[3] == 0xb8))) ||
        (a[0] == 0x00 && a[1] == 0x64 && a[2] == 0xff && a[3] == 0x9b && a[4] == 0 && a[5] == 1) ||
        (a[0] == 0x01 && rn_bytes_zero(a + 1, 7)))
        return RN_ADDR_OTHER_LOCAL; /* Teredo, documentation, local NAT64, discard */
    return RN_ADDR_PUBLIC;
}

rn_addr_class rn_addr_classify(const uint8_t *addr, size_t len) {
    return len == 4 ? classify_v4(addr) : classify_v6(addr);
}

/* True for the development loopback addresses: 127.0.0.x and ::1. */
static int dev_loopback_addr(const uint8_t *a, size_t len) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (len == 16 && memcmp(a, mapped, 12) == 0)
        return dev_loopback_addr(a + 12, 4);
    if (len == 16)
        return rn_bytes_zero(a, 15) && a[15] == 1;
    return a[0] == 127 && a[1] == 0 && a[2] == 0;
}

int rn_webhook_addr_allowed(const struct sockaddr *sa, int allow_loopback) {
    const uint8_t *a;
    size_t len;
    if (sa->sa_family == AF_INET) {
        a = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        len = 4;
    } else if (sa->sa_family == AF_INET6) {
        a = (const uint8_t *)&((const struct sockaddr_in6 *)sa)->sin6_addr;
        len = 16;
    } else {
        return 0;
    }
    if (rn_addr_classify(a, len) == RN_ADDR_PUBLIC)
        return 1;
    return allow_loopback && dev_loopback_addr(a, len);
}

/* A host name: letters, digits, '-', '_' and '.', not starting with '.'. */
static int valid_name(const char *h, size_t n) {
    if (n == 0 || n > 253 || h[0] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = h[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return 0;
    }
    return 1;
}

/* True when a name would be read as a number by inet_aton-style parsers:
 * its last label starts with a digit (no top-level domain does). */
static int numeric_looking(const char *h, size_t n) {
    if (n && h[n - 1] == '.')
        n--;
    size_t dot = n;
    while (dot > 0 && h[dot - 1] != '.')
        dot--;
    return dot < n && h[dot] >= '0' && h[dot] <= '9';
}

/* "localhost" or a name under it (RFC 6761), with an optional final dot. */
static int localhost_name(const char *h, size_t n, int *exact) {
    if (n && h[n - 1] == '.')
        n--;
    *exact = rn_ieq(h, n, "localhost");
    return *exact || (n > 10 && rn_ieq(h + n - 10, 10, ".localhost"));
}

/* Classifies the host of a URL; *dev is set for the development exception
 * hosts (localhost, 127.0.0.x). Returns -1 for a malformed host. */
static int classify_host(const char *h, size_t n, int bracketed, int *dev) {
    char tmp[256];
    uint8_t addr[16];
    *dev = 0;
    if (n == 0 || n >= sizeof tmp)
        return -1;
    memcpy(tmp, h, n);
    tmp[n] = 0;
    if (bracketed) {
        if (inet_pton(AF_INET6, tmp, addr) != 1)
            return -1;
        return (int)rn_addr_classify(addr, 16);
    }
    if (!valid_name(h, n))
        return -1;
    int exact;
    if (localhost_name(h, n, &exact)) {
        *dev = exact;
        return RN_ADDR_LOOPBACK;
    }
    if (!numeric_looking(h, n))
        return RN_ADDR_PUBLIC;
    char canon[INET_ADDRSTRLEN];
    if (inet_pton(AF_INET, tmp, addr) != 1 || !inet_ntop(AF_INET, addr, canon, sizeof canon) ||
        strcmp(canon, tmp) != 0)
        return -1;
    *dev = dev_loopback_addr(addr, 4);
    return (int)rn_addr_classify(addr, 4);
}

rn_url_verdict rn_webhook_url_check(const char *url, size_t len, int allow_loopback) {
    if (len == 0 || len > MAX_URL_LEN)
        return RN_URL_MALFORMED;
    for (size_t i = 0; i < len; i++)
        if ((unsigned char)url[i] <= 0x20 || (unsigned char)url[i] >= 0x7f || url[i] == '\\')
            return RN_URL_MALFORMED;
    int https;
    size_t at;
    if (rn_iprefix(url, len, "https://")) {
        https = 1;
        at = 8;
    } else if (rn_iprefix(url, len, "http://")) {
        https = 0;
        at = 7;
    } else {
        return RN_URL_MALFORMED;
    }
    size_t end = at;
    while (end < len && url[end] != '/' && url[end] != '?' && url[end] != '#')
        end++;
    const char *auth = url + at;
    size_t auth_len = end - at;
    if (memchr(auth, '@', auth_len))
        return RN_URL_MALFORMED; /* credentials */
    const char *host = auth, *port = NULL;
    size_t host_len = auth_len;
    int bracketed = 0;
    if (auth_len && auth[0] == '[') {
        const char *close = memchr(auth, ']', auth_len);
        if (!close)
            return RN_URL_MALFORMED;
        host = auth + 1;
        host_len = (size_t)(close - host);
        bracketed = 1;
        if (close + 1 < auth + auth_len) {
            if (close[1] != ':')
                return RN_URL_MALFORMED;
            port = close + 2;
        }
    } else {
        const char *colon = memchr(auth, ':', auth_len);
        if (colon) {
            host_len = (size_t)(colon - auth);
            port = colon + 1;
        }
    }
    if (port) {
        uint64_t p;
        if (rn_parse_strict_u64(port, (size_t)(auth + auth_len - port), 65535, &p) || p == 0)
            return RN_URL_MALFORMED;
    }
    int dev;
    int cls = classify_host(host, host_len, bracketed, &dev);
    if (cls < 0)
        return RN_URL_MALFORMED;
    if (cls == RN_ADDR_LOOPBACK)
        return dev && allow_loopback ? RN_URL_OK : RN_URL_LOOPBACK;
    if (cls != RN_ADDR_PUBLIC)
        return RN_URL_LOCAL_TARGET;
    return https ? RN_URL_OK : RN_URL_SCHEME;
}
