/*
 * status.c — reason phrases of HTTP status codes. See status.h.
 */
#include "transport/status.h"

#include <assert.h>
#include <stddef.h>

typedef struct {
    short status;
    const char *reason;
} status_row;

/* Every code RFC 9110 §15 defines, with RFC 6585's additions, in order. */
static const status_row ROWS[] = {
    {100, "Continue"},
    {101, "Switching Protocols"},
    {200, "OK"},
    {201, "Created"},
    {202, "Accepted"},
    {203, "Non-Authoritative Information"},
    {204, "No Content"},
    {205, "Reset Content"},
    {206, "Partial Content"},
    {300, "Multiple Choices"},
    {301, "Moved Permanently"},
    {302, "Found"},
    {303, "See Other"},
    {304, "Not Modified"},
    {305, "Use Proxy"},
    {307, "Temporary Redirect"},
    {308, "Permanent Redirect"},
    {400, "Bad Request"},
    {401, "Unauthorized"},
    {402, "Payment Required"},
    {403, "Forbidden"},
    {404, "Not Found"},
    {405, "Method Not Allowed"},
    {406, "Not Acceptable"},
    {407, "Proxy Authentication Required"},
    {408, "Request Timeout"},
    {409, "Conflict"},
    {410, "Gone"},
    {411, "Length Required"},
    {412, "Precondition Failed"},
    {413, "Content Too Large"},
    {414, "URI Too Long"},
    {415, "Unsupported Media Type"},
    {416, "Range Not Satisfiable"},
    {417, "Expectation Failed"},
    {421, "Misdirected Request"},
    {422, "Unprocessable Content"},
    {426, "Upgrade Required"},
    {428, "Precondition Required"},
    {429, "Too Many Requests"},
    {431, "Request Header Fields Too Large"},
    {500, "Internal Server Error"},
    {501, "Not Implemented"},
    {502, "Bad Gateway"},
    {503, "Service Unavailable"},
    {504, "Gateway Timeout"},
    {505, "HTTP Version Not Supported"},
    {511, "Network Authentication Required"},
};

const char *rn_http_reason(int status) {
    assert(status >= 100 && status <= 599);
    size_t lo = 0, hi = sizeof ROWS / sizeof ROWS[0];
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ROWS[mid].status == status)
            return ROWS[mid].reason;
        if (ROWS[mid].status < status)
            lo = mid + 1;
        else
            hi = mid;
    }
    return "";
}
