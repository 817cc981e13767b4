/*
 * fuzz_http2.c — libFuzzer harness for the HTTP/2 server path: the input
 * is the client's frames after the connection preface (h2c by prior
 * knowledge), sent through a real socket into src/transport/http2.c and on
 * into the router, the surfaces and a real engine, exactly as fuzz_http.c
 * does for HTTP/1.1 (whose server, client and shutdown it shares: see
 * there). What the server sends is checked by http2_check.c: well-formed
 * frames of the types a server sends, header blocks that decode, and no
 * 500. Seeds: fuzz/corpus/fuzz_http2 (requests of every route family as
 * HPACK literals, bodies, SSE, resets, PINGs, window updates).
 */
#define FUZZ_HTTP2 1
#define HARNESS "fuzz_http2"
#include "fuzz_http.c"
