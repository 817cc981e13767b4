/*
 * sub_config.h — a subscription's configuration (PROTOCOL.md §6.2): parsing
 * and normalizing the create body, and the configuration hash that decides
 * between 200 (re-confirmed) and 409 (another configuration).
 *
 * Normal form: stream paths and the pattern lose leading and trailing '/';
 * streams[] is sorted and without duplicates (an empty array is absent);
 * lease_ttl_ms gets its default; JSON null counts as absent. The hash is
 * SHA-256 over an unambiguous length-prefixed encoding of exactly the
 * fields the protocol lists: type, pattern, streams, the delivery
 * configuration (webhook.url or wake_stream), lease_ttl_ms, description.
 * The same parser reads configurations back from the state file, so what
 * is stored and what a client sends can never be read differently.
 */
#ifndef RN_SUBS_SUB_CONFIG_H
#define RN_SUBS_SUB_CONFIG_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol/errors.h"

#define RN_SUB_LEASE_MIN_MS 1000
#define RN_SUB_LEASE_MAX_MS 600000
#define RN_SUB_LEASE_DEFAULT_MS 30000
#define RN_SUB_MAX_PATH 1024

typedef enum { RN_SUB_WEBHOOK, RN_SUB_PULL_WAKE } rn_sub_type;

typedef struct {
    rn_sub_type type;
    char *pattern; /* NULL: none */
    char **streams;
    size_t nstreams;
    char *webhook_url; /* webhook subscriptions only */
    char *wake_stream; /* pull-wake subscriptions only */
    uint64_t lease_ttl_ms;
    char *description; /* NULL: none */
} rn_sub_config;

/* Parses a create body. Returns 0 and fills out (free it with
 * rn_sub_config_free), or -1 with the refusal in *err. The webhook URL
 * policy and the wake stream's existence are the caller's checks. */
int rn_sub_config_parse(const json_t *body, rn_sub_config *out, rn_error *err);

/* Parses a JSON array of stream paths into a sorted, duplicate-free array
 * of normalized paths. Returns 0, or -1 for anything but an array of
 * strings that are non-empty paths after normalization. */
int rn_sub_streams_parse(const json_t *array, char ***out, size_t *n);
void rn_sub_streams_free(char **streams, size_t n);

/* Normalizes a stream path: drops leading and trailing '/'. Returns the
 * normalized length and sets *start, or -1 when the result is empty or
 * longer than RN_SUB_MAX_PATH. */
long rn_sub_path_normalize(const char *path, size_t len, const char **start);

/* The configuration as a create body (the inverse of the parser). */
json_t *rn_sub_config_json(const rn_sub_config *c);
void rn_sub_config_hash(const rn_sub_config *c, uint8_t out[32]);
void rn_sub_config_free(rn_sub_config *c);

#endif
