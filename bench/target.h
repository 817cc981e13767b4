/*
 * target.h — where the benchmark sends its requests: the server address
 * (loopback only) and the URL shape of a stream.
 *
 * The base is http://HOST:PORT[/prefix] with HOST a loopback literal
 * (127.0.0.0/8, [::1]) or "localhost"; anything else is refused, so the
 * tool can only ever load a server on this machine. A stream's path comes
 * from a URL template whose placeholders are {base} (must start the
 * template), {bucket} and {name}: the v1 surface is "{base}/v1/stream/{name}",
 * the bucket surface "{base}/{bucket}/{name}".
 */
#ifndef BN_TARGET_H
#define BN_TARGET_H

#include <netinet/in.h>
#include <stddef.h>
#include <sys/socket.h>

#define BN_TEMPLATE_V1 "{base}/v1/stream/{name}"
#define BN_TEMPLATE_BUCKET "{base}/{bucket}/{name}"

typedef struct {
    struct sockaddr_storage addr; /* server address */
    char host_header[80];         /* value of the Host header */
    char prefix[256];             /* path part of the base, no trailing '/' */
    char tmpl[256];               /* template after "{base}" */
    char bucket[128];
    char extra_headers[512]; /* --header lines, each "Name: value\r\n", sent on every request */
} bn_target;

/* Parses base and template into t. Returns 0, or -1 after printing why to
 * stderr (not http, not loopback, bad port, template not starting with
 * {base}, unknown placeholder, parts too long). */
int bn_target_init(bn_target *t, const char *base, const char *tmpl, const char *bucket);

/* Writes the path of stream `name` (NUL-terminated) into out[0..cap).
 * Names are used verbatim: callers pass URL-safe names. */
void bn_target_path(const bn_target *t, const char *name, char *out, size_t cap);

#endif
