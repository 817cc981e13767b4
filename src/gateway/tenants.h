/*
 * tenants.h — the tenants file (docs/GATEWAY.md), loaded: tenants with
 * their API keys (SHA-256 hashes), status, rights, CORS origins and limits;
 * the JWT issuers and their keys; the external authorizer. A loaded file is
 * immutable and reference counted, so that a reload (SIGHUP) swaps in a new
 * one while requests in flight keep the one they started with.
 */
#ifndef RN_GATEWAY_TENANTS_H
#define RN_GATEWAY_TENANTS_H

#include <stddef.h>
#include <stdint.h>

#include "gateway/jwt.h"
#include "gateway/rights.h"
#include "util/map.h"

/* Limits of a tenant; 0 means unbounded. */
typedef struct {
    uint64_t requests_per_second, burst;
    uint64_t bytes_in_per_second, bytes_out_per_second;
    uint64_t live_reads, uploads, upload_bytes;
    uint64_t max_request_bytes;
    uint64_t min_body_bytes_per_second;
} rn_tenant_limits;

typedef enum { RN_TENANT_ACTIVE, RN_TENANT_UNPAID, RN_TENANT_REVOKED } rn_tenant_status;

typedef struct {
    char id[64];
    uint8_t sha256[32];
    int64_t expires_ms; /* 0: never */
} rn_api_key;

typedef struct rn_tenant rn_tenant;

/* A key and its tenant (the by_key index). */
typedef struct rn_tenant_key {
    const rn_api_key *key;
    const rn_tenant *tenant;
} rn_tenant_key;

struct rn_tenant {
    char *name;
    rn_tenant_status status;
    rn_rights rights;
    char **cors; /* origins, exactly as a browser sends Origin */
    size_t ncors;
    rn_tenant_limits limits;
    rn_api_key *keys;
    size_t nkeys;
};

typedef struct {
    char *issuer, *audience;
    char *tenant_claim; /* default client_id */
    int scope_rights;
    uint64_t leeway_s;
    rn_jwt_keys *keys; /* from "keys" and "jwks_file" (may be empty) */
    char *jwks_url;    /* NULL: none; its keys are fetched by the gate */
} rn_issuer;

typedef struct {
    char *url; /* NULL: no authorizer */
    uint64_t timeout_ms, cache_ms;
} rn_authorizer_config;

typedef struct rn_tenants {
    int refs;
    rn_tenant *tenants;
    size_t ntenants;
    rn_map by_name; /* name -> rn_tenant */
    rn_map by_key;  /* a key's sha256 (32 bytes) -> its rn_tenant_key */
    struct rn_tenant_key *key_index;
    size_t nkeys;
    rn_issuer *issuers;
    size_t nissuers;
    rn_authorizer_config authorizer;
} rn_tenants;

/* Loads path. A file that does not exist gives an empty set (nobody is let
 * in) and says so in *missing; an empty file (or only white space) gives
 * an empty set too. Returns NULL with why in err (a file that
 * is not valid JSON, an unknown member, a bad value: nothing is half
 * loaded). The set starts with one reference. */
rn_tenants *rn_tenants_load(const char *path, int *missing, char *err, size_t cap);
void rn_tenants_ref(rn_tenants *t);
void rn_tenants_unref(rn_tenants *t);

/* The tenant whose key hashes to sha256, and the key (NULL: none). */
const rn_tenant *rn_tenants_by_key(const rn_tenants *t, const uint8_t sha256[32],
                                   const rn_api_key **key);
const rn_tenant *rn_tenants_by_name(const rn_tenants *t, const char *name);
/* Whether any tenant lists origin (a preflight, which has no credential). */
int rn_tenants_any_cors(const rn_tenants *t, const char *origin, size_t len);
/* Whether tenant lists origin. */
int rn_tenant_cors(const rn_tenant *tenant, const char *origin, size_t len);

#endif
