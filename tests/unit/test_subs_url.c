/*
 * test_subs_url.c - unit tests for src/subs/url.{h,c}: webhook URL
 * validation and the address classifier behind it (PROTOCOL.md §6.2,
 * §12.8).
 *
 * How: a table of URLs, each checked with and without the development
 * loopback exception; a table of IPv4 and IPv6 addresses (parsed with
 * inet_pton) with their expected class, covering every range the
 * classifier names and the IPv6 forms that embed IPv4 addresses; and the
 * connect-time policy on socket addresses. Nothing here opens a socket.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <string.h>

#include "subs/url.h"

static const char *verdict_name(rn_url_verdict v) {
    static const char *names[] = {"OK", "MALFORMED", "SCHEME", "LOCAL_TARGET", "LOOPBACK"};
    return names[v];
}

static void test_urls(void **state) {
    (void)state;
    static const struct {
        const char *url;
        rn_url_verdict strict, dev; /* without / with --webhook-allow-loopback */
    } cases[] = {
        {"https://hooks.example.com/x", RN_URL_OK, RN_URL_OK},
        {"https://hooks.example.com:8443/x?y=1", RN_URL_OK, RN_URL_OK},
        {"HTTPS://Hooks.Example.COM", RN_URL_OK, RN_URL_OK},
        {"https://8.8.8.8/hook", RN_URL_OK, RN_URL_OK},
        {"https://[2001:4860:4860::8888]/hook", RN_URL_OK, RN_URL_OK},
        {"http://hooks.example.com/x", RN_URL_SCHEME, RN_URL_SCHEME},
        {"http://8.8.8.8/x", RN_URL_SCHEME, RN_URL_SCHEME},
        /* the development exception */
        {"http://localhost/hook", RN_URL_LOOPBACK, RN_URL_OK},
        {"http://LOCALHOST:3000/hook", RN_URL_LOOPBACK, RN_URL_OK},
        {"http://localhost./hook", RN_URL_LOOPBACK, RN_URL_OK},
        {"http://127.0.0.1:9999/webhook", RN_URL_LOOPBACK, RN_URL_OK},
        {"http://127.0.0.254/", RN_URL_LOOPBACK, RN_URL_OK},
        {"https://127.0.0.1/", RN_URL_LOOPBACK, RN_URL_OK},
        {"http://127.0.1.1/", RN_URL_LOOPBACK, RN_URL_LOOPBACK},
        {"http://127.255.255.254/", RN_URL_LOOPBACK, RN_URL_LOOPBACK},
        {"http://foo.localhost/", RN_URL_LOOPBACK, RN_URL_LOOPBACK},
        {"http://[::1]/", RN_URL_LOOPBACK, RN_URL_LOOPBACK},
        {"http://[::ffff:127.0.0.1]/", RN_URL_LOOPBACK, RN_URL_LOOPBACK},
        /* private, link-local and other local targets */
        {"http://10.0.0.1/hook", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://10.0.0.1/hook", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://172.16.0.1/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://172.31.255.255/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://172.32.0.1/", RN_URL_OK, RN_URL_OK},
        {"https://192.168.1.1/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://169.254.169.254/latest/meta-data", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://100.64.0.1/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://0.0.0.0/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://255.255.255.255/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://224.0.0.1/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[fe80::1]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[fd00::1]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[fc00::1]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[::]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[::ffff:10.1.2.3]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[::ffff:169.254.169.254]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[64:ff9b::a9fe:a9fe]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[2002:c0a8:0101::1]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        {"https://[ff02::1]/", RN_URL_LOCAL_TARGET, RN_URL_LOCAL_TARGET},
        /* malformed or ambiguous */
        {"", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"hooks.example.com/x", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"ftp://hooks.example.com/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"file:///etc/passwd", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"gopher://127.0.0.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https:///path", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://user:pw@hooks.example.com/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"http://127.0.0.1@10.0.0.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://hooks.example.com:0/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://hooks.example.com:65536/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://hooks.example.com:/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://hooks.example.com:08/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://hooks example.com/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://hooks.example.com/\x01", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://h\\@10.0.0.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://%31%30.0.0.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"http://2130706433/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"http://0x7f.0.0.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"http://127.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"http://0177.0.0.1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://1.2.3.4.5/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://[fe80::1%25eth0]/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://[::1/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://[::1]x/", RN_URL_MALFORMED, RN_URL_MALFORMED},
        {"https://.example.com/", RN_URL_MALFORMED, RN_URL_MALFORMED},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *u = cases[i].url;
        rn_url_verdict strict = rn_webhook_url_check(u, strlen(u), 0);
        rn_url_verdict dev = rn_webhook_url_check(u, strlen(u), 1);
        if (strict != cases[i].strict || dev != cases[i].dev)
            fail_msg("%s: got %s/%s, want %s/%s", u, verdict_name(strict), verdict_name(dev),
                     verdict_name(cases[i].strict), verdict_name(cases[i].dev));
    }
}

static void test_overlong_url(void **state) {
    (void)state;
    char url[3000] = "https://hooks.example.com/";
    memset(url + strlen(url), 'a', 2500);
    url[2900] = 0;
    assert_int_equal(rn_webhook_url_check(url, strlen(url), 0), RN_URL_MALFORMED);
    /* the length argument, not a terminator, bounds the URL */
    assert_int_equal(rn_webhook_url_check("https://a.example/xyz", 17, 0), RN_URL_OK);
}

static rn_addr_class classify(const char *text) {
    uint8_t a[16];
    if (strchr(text, ':')) {
        assert_int_equal(inet_pton(AF_INET6, text, a), 1);
        return rn_addr_classify(a, 16);
    }
    assert_int_equal(inet_pton(AF_INET, text, a), 1);
    return rn_addr_classify(a, 4);
}

static void test_classes(void **state) {
    (void)state;
    static const struct {
        const char *addr;
        rn_addr_class cls;
    } cases[] = {
        {"1.1.1.1", RN_ADDR_PUBLIC},
        {"9.255.255.255", RN_ADDR_PUBLIC},
        {"11.0.0.0", RN_ADDR_PUBLIC},
        {"172.15.255.255", RN_ADDR_PUBLIC},
        {"192.169.0.1", RN_ADDR_PUBLIC},
        {"100.63.255.255", RN_ADDR_PUBLIC},
        {"100.128.0.0", RN_ADDR_PUBLIC},
        {"169.253.1.1", RN_ADDR_PUBLIC},
        {"223.255.255.255", RN_ADDR_PUBLIC},
        {"0.1.2.3", RN_ADDR_OTHER_LOCAL},
        {"10.255.255.255", RN_ADDR_PRIVATE},
        {"172.16.0.0", RN_ADDR_PRIVATE},
        {"192.168.0.0", RN_ADDR_PRIVATE},
        {"100.64.0.0", RN_ADDR_PRIVATE},
        {"100.127.255.255", RN_ADDR_PRIVATE},
        {"127.0.0.1", RN_ADDR_LOOPBACK},
        {"127.200.1.1", RN_ADDR_LOOPBACK},
        {"169.254.0.1", RN_ADDR_LINK_LOCAL},
        {"192.0.0.8", RN_ADDR_OTHER_LOCAL},
        {"192.0.2.1", RN_ADDR_OTHER_LOCAL},
        {"198.18.0.1", RN_ADDR_OTHER_LOCAL},
        {"198.19.255.255", RN_ADDR_OTHER_LOCAL},
        {"198.20.0.1", RN_ADDR_PUBLIC},
        {"198.51.100.7", RN_ADDR_OTHER_LOCAL},
        {"203.0.113.9", RN_ADDR_OTHER_LOCAL},
        {"239.1.1.1", RN_ADDR_OTHER_LOCAL},
        {"240.0.0.1", RN_ADDR_OTHER_LOCAL},
        {"2606:4700::1111", RN_ADDR_PUBLIC},
        {"::1", RN_ADDR_LOOPBACK},
        {"::", RN_ADDR_OTHER_LOCAL},
        {"::ffff:8.8.8.8", RN_ADDR_PUBLIC},
        {"::ffff:127.0.0.1", RN_ADDR_LOOPBACK},
        {"::ffff:192.168.1.1", RN_ADDR_PRIVATE},
        {"::10.0.0.1", RN_ADDR_PRIVATE},
        {"64:ff9b::808:808", RN_ADDR_PUBLIC},
        {"64:ff9b::7f00:1", RN_ADDR_LOOPBACK},
        {"64:ff9b:1::1", RN_ADDR_OTHER_LOCAL},
        {"2002:808:808::1", RN_ADDR_PUBLIC},
        {"2002:a00:1::1", RN_ADDR_PRIVATE},
        {"2001::1", RN_ADDR_OTHER_LOCAL},
        {"2001:db8::1", RN_ADDR_OTHER_LOCAL},
        {"100::1", RN_ADDR_OTHER_LOCAL},
        {"fc00::", RN_ADDR_PRIVATE},
        {"fdff:ffff::1", RN_ADDR_PRIVATE},
        {"fe80::1", RN_ADDR_LINK_LOCAL},
        {"febf::1", RN_ADDR_LINK_LOCAL},
        {"fec0::1", RN_ADDR_OTHER_LOCAL},
        {"ff02::1", RN_ADDR_OTHER_LOCAL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rn_addr_class got = classify(cases[i].addr);
        if (got != cases[i].cls)
            fail_msg("%s: class %d, want %d", cases[i].addr, got, cases[i].cls);
    }
}

static int allowed(const char *text, int allow_loopback) {
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    if (strchr(text, ':')) {
        struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&ss;
        s6->sin6_family = AF_INET6;
        inet_pton(AF_INET6, text, &s6->sin6_addr);
    } else {
        struct sockaddr_in *s4 = (struct sockaddr_in *)&ss;
        s4->sin_family = AF_INET;
        inet_pton(AF_INET, text, &s4->sin_addr);
    }
    return rn_webhook_addr_allowed((struct sockaddr *)&ss, allow_loopback);
}

static void test_connect_policy(void **state) {
    (void)state;
    assert_true(allowed("93.184.216.34", 0));
    assert_true(allowed("2606:2800:220:1::1", 0));
    assert_false(allowed("127.0.0.1", 0));
    assert_true(allowed("127.0.0.1", 1));
    assert_true(allowed("127.0.0.9", 1));
    assert_false(allowed("127.0.1.1", 1));
    assert_false(allowed("::1", 0));
    assert_true(allowed("::1", 1));
    assert_true(allowed("::ffff:127.0.0.1", 1));
    assert_false(allowed("10.0.0.1", 1));
    assert_false(allowed("169.254.169.254", 1));
    assert_false(allowed("fe80::1", 1));
    assert_false(allowed("::ffff:10.0.0.1", 1));
    struct sockaddr unix_like = {.sa_family = AF_UNIX};
    assert_false(rn_webhook_addr_allowed(&unix_like, 1));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_urls),
        cmocka_unit_test(test_overlong_url),
        cmocka_unit_test(test_classes),
        cmocka_unit_test(test_connect_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
