/*
 * test_cluster_wire.c — the cluster transport's hello and addresses
 * (src/consensus/wire.c): round trips, every refusal, and the parser's edges.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "consensus/wire.h"
#include "util/buf.h"

static void encode(rn_buf *b, uint32_t group, uint64_t id, uint64_t tag, const char *addr) {
    b->len = 0;
    assert_int_equal(rn_wire_hello_encode(b, group, id, tag, addr, RN_WIRE_AUTH_NONE), 0);
}

static void test_round_trip(void **state) {
    (void)state;
    rn_buf b = {0};
    encode(&b, 7, 42, 0x1122334455667788ull, "127.0.0.1:7001");
    assert_int_equal(b.len, RN_WIRE_FIXED_BYTES + strlen("127.0.0.1:7001"));
    rn_wire_hello h;
    assert_int_equal(rn_wire_hello_decode(b.data, 8, 0x1122334455667788ull, &h), RN_WIRE_OK);
    assert_int_equal(h.group, 7);
    assert_int_equal(h.sender_id, 42);
    assert_int_equal(h.address_len, strlen("127.0.0.1:7001"));
    assert_int_equal(h.auth, RN_WIRE_AUTH_NONE);
    assert_memory_equal(b.data + RN_WIRE_FIXED_BYTES, "127.0.0.1:7001", h.address_len);
    b.len = 0;
    assert_int_equal(rn_wire_hello_encode(&b, 7, 42, 9, "127.0.0.1:7001", RN_WIRE_AUTH_KEY), 0);
    assert_int_equal(rn_wire_hello_decode(b.data, 8, 9, &h), RN_WIRE_OK);
    assert_int_equal(h.auth, RN_WIRE_AUTH_KEY);
    assert_int_equal(b.data[12], 1); /* the auth field, little-endian */
    b.len = 0;
    assert_int_equal(rn_wire_hello_encode(&b, 7, 42, 9, "127.0.0.1:7001", RN_WIRE_AUTH_CERT), 0);
    assert_int_equal(rn_wire_hello_decode(b.data, 8, 9, &h), RN_WIRE_OK);
    assert_int_equal(h.auth, RN_WIRE_AUTH_CERT);
    rn_buf_free(&b);
}

static void test_refusals(void **state) {
    (void)state;
    rn_buf b = {0};
    rn_wire_hello h;
    encode(&b, 8, 1, 5, "127.0.0.1:1");
    assert_int_equal(rn_wire_hello_decode(b.data, 8, 5, &h), RN_WIRE_BAD_GROUP);
    assert_int_equal(rn_wire_hello_decode(b.data, 9, 5, &h), RN_WIRE_OK);
    assert_int_equal(rn_wire_hello_decode(b.data, 9, 6, &h), RN_WIRE_BAD_CLUSTER);
    encode(&b, 0, 1, 0, "127.0.0.1:1");
    b.data[0] ^= 1;
    assert_int_equal(rn_wire_hello_decode(b.data, 1, 0, &h), RN_WIRE_BAD_MAGIC);
    encode(&b, 0, 1, 0, "127.0.0.1:1");
    b.data[4] = 2;
    assert_int_equal(rn_wire_hello_decode(b.data, 1, 0, &h), RN_WIRE_BAD_VERSION);
    encode(&b, 0, 1, 0, "127.0.0.1:1");
    b.data[12] = 3; /* auth: unknown */
    assert_int_equal(rn_wire_hello_decode(b.data, 1, 0, &h), RN_WIRE_BAD_VERSION);
    encode(&b, 0, 1, 0, "127.0.0.1:1");
    b.data[6] = 0; /* address length 0 */
    assert_int_equal(rn_wire_hello_decode(b.data, 1, 0, &h), RN_WIRE_BAD_ADDRESS);
    b.data[6] = 0;
    b.data[7] = 1; /* 256 */
    assert_int_equal(rn_wire_hello_decode(b.data, 1, 0, &h), RN_WIRE_BAD_ADDRESS);
    encode(&b, 0, 1, 0, "127.0.0.1:1");
    memset(b.data + 16, 0, 8); /* sender 0 */
    assert_int_equal(rn_wire_hello_decode(b.data, 1, 0, &h), RN_WIRE_BAD_SENDER);
    char long_addr[300];
    memset(long_addr, '1', sizeof long_addr - 1);
    long_addr[sizeof long_addr - 1] = '\0';
    b.len = 0;
    assert_int_equal(rn_wire_hello_encode(&b, 0, 1, 0, long_addr, RN_WIRE_AUTH_NONE), -1);
    assert_int_equal(rn_wire_hello_encode(&b, 0, 1, 0, "", RN_WIRE_AUTH_NONE), -1);
    assert_int_equal(b.len, 0);
    rn_buf_free(&b);
}

static void test_control_hello(void **state) {
    (void)state;
    rn_buf b = {0};
    rn_wire_hello h;
    encode(&b, RN_WIRE_CONTROL_GROUP, 3, 5, "127.0.0.1:1");
    assert_int_equal(rn_wire_hello_decode(b.data, 8, 5, &h), RN_WIRE_OK);
    assert_int_equal(h.group, RN_WIRE_CONTROL_GROUP);
    encode(&b, RN_WIRE_CONTROL_GROUP - 1, 3, 5, "127.0.0.1:1");
    assert_int_equal(rn_wire_hello_decode(b.data, 8, 5, &h), RN_WIRE_BAD_GROUP);
    rn_buf_free(&b);
}

static void test_confirm_messages(void **state) {
    (void)state;
    uint8_t bytes[RN_WIRE_CONFIRM_BYTES];
    rn_wire_confirm ask = {
        .kind = RN_WIRE_CONFIRM_ASK, .group = 7, .term = 0x0102030405060708ull, .round = 99};
    rn_wire_confirm_encode(&ask, bytes);
    assert_int_equal(bytes[0], 1);
    assert_int_equal(bytes[4], 7);
    assert_int_equal(bytes[8], 0x08); /* little-endian */
    assert_int_equal(bytes[15], 0x01);
    rn_wire_confirm got;
    assert_int_equal(rn_wire_confirm_decode(bytes, &got), 0);
    assert_int_equal(got.kind, RN_WIRE_CONFIRM_ASK);
    assert_int_equal(got.group, 7);
    assert_true(got.term == 0x0102030405060708ull);
    assert_int_equal(got.round, 99);
    assert_false(got.confirmed);
    rn_wire_confirm answer = {
        .kind = RN_WIRE_CONFIRM_ANSWER, .group = 1, .term = 4, .round = 5, .confirmed = true};
    rn_wire_confirm_encode(&answer, bytes);
    assert_int_equal(rn_wire_confirm_decode(bytes, &got), 0);
    assert_int_equal(got.kind, RN_WIRE_CONFIRM_ANSWER);
    assert_true(got.confirmed);
    assert_int_equal(got.term, 4);
    assert_int_equal(got.round, 5);
    /* refusals: unknown kind, confirmed 2, reserved set, an ask confirming */
    uint8_t bad[RN_WIRE_CONFIRM_BYTES];
    memcpy(bad, bytes, sizeof bad);
    bad[0] = 3;
    assert_int_equal(rn_wire_confirm_decode(bad, &got), -1);
    memcpy(bad, bytes, sizeof bad);
    bad[24] = 2;
    assert_int_equal(rn_wire_confirm_decode(bad, &got), -1);
    memcpy(bad, bytes, sizeof bad);
    bad[31] = 1;
    assert_int_equal(rn_wire_confirm_decode(bad, &got), -1);
    memcpy(bad, bytes, sizeof bad);
    bad[0] = 1; /* an ask with confirmed = 1 */
    assert_int_equal(rn_wire_confirm_decode(bad, &got), -1);
}

static void test_cluster_tag(void **state) {
    (void)state;
    assert_int_equal(rn_wire_cluster_tag(NULL), 0);
    assert_int_equal(rn_wire_cluster_tag(""), 0);
    assert_int_not_equal(rn_wire_cluster_tag("a"), 0);
    assert_int_not_equal(rn_wire_cluster_tag("a"), rn_wire_cluster_tag("b"));
    assert_int_equal(rn_wire_cluster_tag("prod"), rn_wire_cluster_tag("prod"));
    /* the values of every earlier build (nodes compare tags: a node of an
     * older build must still find its peers' tags equal to its own) */
    assert_int_equal(rn_wire_cluster_tag("prod"), 0x3d0af6f1856b24edull);
    assert_int_equal(rn_wire_cluster_tag("runnel-0123456789abcdef"), 0x729e2faf7dfb910dull);
}

static void test_addresses(void **state) {
    (void)state;
    struct sockaddr_storage sa;
    assert_int_equal(rn_wire_parse_address("127.0.0.1:7001", &sa), 0);
    assert_int_equal(sa.ss_family, AF_INET);
    assert_int_equal(ntohs(((struct sockaddr_in *)&sa)->sin_port), 7001);
    assert_int_equal(rn_wire_parse_address("[::1]:65535", &sa), 0);
    assert_int_equal(sa.ss_family, AF_INET6);
    assert_int_equal(ntohs(((struct sockaddr_in6 *)&sa)->sin6_port), 65535);
    const char *bad[] = {
        "127.0.0.1",    "127.0.0.1:",     "127.0.0.1:0",  "127.0.0.1:65536", "127.0.0.1:07",
        "127.0.0.1:7a", "localhost:7001", "[::1]7001",    "[::1]:",          "::1:7001",
        ":7001",        "1.2.3:4",        "127.0.0.1:-1", "[127.0.0.1]:80",  ""};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        if (rn_wire_parse_address(bad[i], &sa) == 0)
            fail_msg("accepted %s", bad[i]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),    cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_control_hello), cmocka_unit_test(test_confirm_messages),
        cmocka_unit_test(test_cluster_tag),   cmocka_unit_test(test_addresses),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
