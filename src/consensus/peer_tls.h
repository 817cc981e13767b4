/*
 * peer_tls.h — mutual TLS between the nodes of a cluster (--peer-cert,
 * --peer-key, --peer-ca), the way of proving membership that also proves
 * which member a peer is (the cluster key, peer_auth.h, proves only that
 * it holds the key): the node's certificate and key, the cluster's CA, and
 * the node id a certificate binds.
 *
 * The binding: a node's certificate is issued by the cluster's CA and
 * carries exactly one URI subject alternative name "runnel-node:ID", ID its
 * node id in decimal (1..255, no leading zero). Nothing else in it (subject,
 * DNS or IP names) names a node; DNS and IP names are for the HTTP clients
 * that check host names (peer requests to https peer URLs).
 *
 * The context is used for the Raft port's connections (peer_link.h), both
 * ways: TLS 1.3 only (both ends are Runnel), the peer's certificate
 * required and verified against the CA, no session resumption (a
 * connection lives as long as its peer is up).
 */
#ifndef RN_CONSENSUS_PEER_TLS_H
#define RN_CONSENSUS_PEER_TLS_H

#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <stddef.h>
#include <stdint.h>

#define RN_PEER_URI_PREFIX "runnel-node:"

typedef struct rn_peer_tls rn_peer_tls;

/* Loads and checks the node's certificate chain (PEM, leaf first), its
 * private key (PEM) and the cluster's CA certificates (PEM): each file
 * readable and parsed, the leaf within its validity period, the key
 * matching it, the leaf verifying against the CA, and naming exactly one
 * node id, which is self_id. Returns NULL with a message naming the
 * setting and the file in err otherwise. */
rn_peer_tls *rn_peer_tls_new(const char *cert_path, const char *key_path, const char *ca_path,
                             uint64_t self_id, char *err, size_t errcap);

/* The context of the Raft port's TLS connections (valid until the next
 * reload or rn_peer_tls_free; an SSL made from it holds its own
 * reference). */
SSL_CTX *rn_peer_tls_ctx(const rn_peer_tls *t);

/* Loads the same three files again and checks them as rn_peer_tls_new
 * does. On success new connections use them (open ones keep theirs) and 0
 * is returned; on failure nothing changes, err says why, -1. */
int rn_peer_tls_reload(rn_peer_tls *t, char *err, size_t errcap);

/* Frees t (connections still open keep their own reference). NULL: no-op. */
void rn_peer_tls_free(rn_peer_tls *t);

/* The node id cert binds (above): 1 with *id set; 0 when it names none;
 * -1 when it names more than one, or one that is not a node id. */
int rn_peer_cert_node_id(X509 *cert, uint64_t *id);

#endif
