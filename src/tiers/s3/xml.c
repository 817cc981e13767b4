/*
 * xml.c — S3's XML through expat. See xml.h.
 */
#include "tiers/s3/xml.h"

#include <expat.h>
#include <string.h>

#define MAX_DEPTH 16
#define MAX_PATH 256
#define MAX_TEXT 65536

typedef struct {
    XML_Parser parser;
    const rn_s3_xml_handler *h;
    char path[MAX_PATH];
    size_t ends[MAX_DEPTH + 1]; /* path length after each level */
    int depth;
    rn_buf text;
    int failed;
} parse_state;

static void fail(parse_state *s) {
    s->failed = 1;
    XML_StopParser(s->parser, XML_FALSE);
}

static void on_start(void *data, const XML_Char *name, const XML_Char **attrs) {
    parse_state *s = data;
    (void)attrs;
    size_t len = s->depth ? s->ends[s->depth] : 0;
    size_t n = strlen(name);
    if (s->depth >= MAX_DEPTH || len + (len ? 1 : 0) + n >= MAX_PATH)
        return fail(s);
    if (len)
        s->path[len++] = '/';
    memcpy(s->path + len, name, n + 1);
    s->ends[++s->depth] = len + n;
    s->text.len = 0;
    if (s->h->open)
        s->h->open(s->h->arg, s->path);
}

static void on_end(void *data, const XML_Char *name) {
    parse_state *s = data;
    (void)name;
    rn_buf_append_byte(&s->text, 0);
    s->h->text(s->h->arg, s->path, (const char *)s->text.data, s->text.len - 1);
    s->text.len = 0;
    s->depth--;
    s->path[s->depth ? s->ends[s->depth] : 0] = '\0';
}

static void on_chars(void *data, const XML_Char *text, int len) {
    parse_state *s = data;
    if (s->text.len + (size_t)len > MAX_TEXT)
        return fail(s);
    rn_buf_append(&s->text, text, (size_t)len);
}

int rn_s3_xml_parse(const uint8_t *doc, size_t len, const rn_s3_xml_handler *h) {
    parse_state s = {.h = h};
    s.parser = XML_ParserCreate("UTF-8");
    XML_SetUserData(s.parser, &s);
    XML_SetElementHandler(s.parser, on_start, on_end);
    XML_SetCharacterDataHandler(s.parser, on_chars);
    int ok = XML_Parse(s.parser, (const char *)doc, (int)len, XML_TRUE) == XML_STATUS_OK;
    XML_ParserFree(s.parser);
    rn_buf_free(&s.text);
    return ok && !s.failed ? 0 : -1;
}

void rn_s3_xml_escape(rn_buf *out, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '&':
            rn_buf_append_str(out, "&amp;");
            break;
        case '<':
            rn_buf_append_str(out, "&lt;");
            break;
        case '>':
            rn_buf_append_str(out, "&gt;");
            break;
        case '"':
            rn_buf_append_str(out, "&quot;");
            break;
        case '\'':
            rn_buf_append_str(out, "&apos;");
            break;
        default:
            rn_buf_append_byte(out, (uint8_t)*s);
        }
    }
}
