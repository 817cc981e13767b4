/*
 * url.h — webhook URL validation against SSRF (PROTOCOL.md §6.2, §12.8).
 *
 * Two checks share one address classifier:
 *   - rn_webhook_url_check() at subscription creation: the URL must be an
 *     absolute https URL (http only for the development exception), with no
 *     credentials, whose host is not a literal private, link-local,
 *     loopback or otherwise local address. The development exception,
 *     http(s)://localhost and http(s)://127.0.0.x, applies only when the
 *     server runs with --webhook-allow-loopback. Host names other than
 *     "localhost" are not resolved here.
 *   - rn_webhook_addr_allowed() at connect time, for every address a
 *     delivery is about to connect to (after DNS), so a name that resolves
 *     to a local address is refused too.
 * Numeric hosts in any form other than canonical dotted-quad IPv4 or
 * bracketed IPv6 (e.g. "2130706433", "0x7f.1", "127.1") are refused as
 * malformed: resolvers read them as addresses, so they cannot be treated as
 * names.
 */
#ifndef RN_SUBS_URL_H
#define RN_SUBS_URL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

typedef enum {
    RN_ADDR_PUBLIC,
    RN_ADDR_LOOPBACK,    /* 127.0.0.0/8, ::1 */
    RN_ADDR_PRIVATE,     /* RFC 1918, 100.64.0.0/10, fc00::/7 */
    RN_ADDR_LINK_LOCAL,  /* 169.254.0.0/16 (cloud metadata), fe80::/10 */
    RN_ADDR_OTHER_LOCAL, /* unspecified, multicast, broadcast, reserved,
                            documentation, tunnels that can reach anything */
} rn_addr_class;

typedef enum {
    RN_URL_OK,
    RN_URL_MALFORMED,    /* not an absolute http(s) URL, credentials, bad host */
    RN_URL_SCHEME,       /* http to anything but the development exception */
    RN_URL_LOCAL_TARGET, /* private, link-local or other local literal host */
    RN_URL_LOOPBACK,     /* loopback outside the enabled development exception */
} rn_url_verdict;

/* Classifies an IPv4 (4 bytes, network order) or IPv6 (16 bytes) address.
 * IPv6 forms that embed an IPv4 address (mapped, compatible, NAT64, 6to4)
 * are classified by the embedded address. */
rn_addr_class rn_addr_classify(const uint8_t *addr, size_t len);

/* Checks a webhook URL (len bytes, no terminator needed). allow_loopback
 * enables the development exception. */
rn_url_verdict rn_webhook_url_check(const char *url, size_t len, int allow_loopback);

/* Connect-time policy: true when a delivery may connect to sa (AF_INET or
 * AF_INET6): public addresses always, 127.0.0.x and ::1 only with
 * allow_loopback (the development exception, reached through "localhost"). */
int rn_webhook_addr_allowed(const struct sockaddr *sa, int allow_loopback);

#endif
