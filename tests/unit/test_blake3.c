/*
 * test_blake3.c - unit tests for src/util/blake3.{h,c}.
 *
 * Owns: the correctness evidence for the BLAKE3 hasher, on every code path
 * this CPU supports (portable, SSE4.1, AVX2), each forced in turn:
 *  - the official test vectors (input byte i = i % 251), default hash, both
 *    the 32-byte digest and the 131-byte extended output;
 *  - incremental equivalence: seeded random inputs fed in random splits
 *    (1-byte updates, splits on 64- and 1024-byte boundaries and off by one,
 *    random sizes) give the one-shot digest; final() leaves the hasher usable;
 *  - agreement of all code paths on random inputs up to 1 MiB, including
 *    power-of-two lengths and their neighbours (the wide-subtree edges);
 *  - the hex encoding and the code-path selection API.
 * A cross-check against the reference b3sum CLI on random files lives in
 * tests/unit/blake3_vs_b3sum.sh (not run here: no run-time tool dependency).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/blake3.h"

#include "test_rng.h"

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */

static const rn_blake3_impl ALL_IMPLS[] = {RN_BLAKE3_PORTABLE, RN_BLAKE3_SSE41, RN_BLAKE3_AVX2};
#define N_IMPLS (sizeof ALL_IMPLS / sizeof ALL_IMPLS[0])

/* Forces impl; returns 0 if this CPU lacks it (the caller skips it). */
static int use_impl(rn_blake3_impl impl) {
    if (rn_blake3_set_impl(impl) != 0)
        return 0;
    return 1;
}

static void restore_auto(void) {
    assert_int_equal(rn_blake3_set_impl(RN_BLAKE3_AUTO), 0);
}

static uint8_t *random_bytes(size_t len) {
    uint8_t *p = malloc(len ? len : 1);
    assert_non_null(p);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(test_rng_next() >> 56);
    return p;
}

static uint8_t *pattern_bytes(size_t len) {
    uint8_t *p = malloc(len ? len : 1);
    assert_non_null(p);
    for (size_t i = 0; i < len; i++)
        p[i] = (uint8_t)(i % 251);
    return p;
}

static void hex_of(const uint8_t *bytes, size_t len, char *out) {
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < len; i++) {
        out[2 * i] = d[bytes[i] >> 4];
        out[2 * i + 1] = d[bytes[i] & 15];
    }
    out[2 * len] = '\0';
}

/* ------------------------------------------------------------------------ */
/* Official test vectors                                                     */

/* Default-hash outputs for input byte i = i % 251: `hash` is the 32-byte
 * digest, `xof_tail` the following 99 bytes of the 131-byte extended output.
 * Generated with b3sum 1.2.0 (Debian package b3sum, the reference
 * implementation's CLI: `b3sum --no-names --length 131`); they equal the
 * "hash" fields of the published test_vectors.json (checked e.g. for lengths
 * 0 = af1349b9..., 1 = 2d3adedf..., 1023, 1024 (including its 131-byte
 * extended output), 1025, 2048, 8192, 8193, 16384, 31744 and 102400). */
static const struct {
    size_t len;
    const char *hash;
    const char *xof_tail;
} VECTORS[] = {
    {0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262",
     "e00f03e7b69af26b7faaf09fcd333050338ddfe085b8cc869ca98b206c08243a26"
     "f5487789e8f660afe6c99ef9e0c52b92e7393024a80459cf91f476f9ffdbda7001c22e159b402631f277ca96f2def"
     "df1078282314e763699a31c5363165421cce14d"},
    {1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213",
     "c3a6cb8bf623e20cdb535f8d1a5ffb86342d9c0b64aca3bce1d31f60adfa137b35"
     "8ad4d79f97b47c3d5e79f179df87a3b9776ef8325f8329886ba42f07fb138bb502f4081cbcec3195c5871e6c23e2c"
     "c97d3c69a613eba131e5f1351f3f1da786545e5"},
    {2, "7b7015bb92cf0b318037702a6cdd81dee41224f734684c2c122cd6359cb1ee63",
     "d8386b22e2ddc05836b7c1bb693d92af006deb5ffbc4c70fb44d0195d0c6f252fa"
     "ac61659ef86523aa16517f87cb5f1340e723756ab65efb2f91964e14391de2a432263a6faf1d146937b35a33621c1"
     "2d00be8223a7f1919cec0acd12097ff3ab00ab1"},
    {3, "e1be4d7a8ab5560aa4199eea339849ba8e293d55ca0a81006726d184519e647f",
     "5b49b82f805a538c68915c1ae8035c900fd1d4b13902920fd05e1450822f36de94"
     "54b7e9996de4900c8e723512883f93f4345f8a58bfe64ee38d3ad71ab027765d25cdd0e448328a8e7a683b9a6af8b"
     "0af94fa09010d9186890b096a08471e4230a134"},
    {4, "f30f5ab28fe047904037f77b6da4fea1e27241c5d132638d8bedce9d40494f32",
     "8f603ba4564453e06cdcee6cbe728a4519bbe6f0d41e8a14b5b225174a566dbfa6"
     "1b56afb1e452dc08c804f8c3143c9e2cc4a31bb738bf8c1917b55830c6e65797211701dc0b98daa1faeaa6ee9e56a"
     "b606ce03a1a881e8f14e87a4acf4646272cfd12"},
    {5, "b40b44dfd97e7a84a996a91af8b85188c66c126940ba7aad2e7ae6b385402aa2",
     "ebcfdac6c5d32c31209e1f81a454751280db64942ce395104e1e4eaca62607de1c"
     "2ca748251754ea5bbe8c20150e7f47efd57012c63b3c6a6632dc1c7cd15f3e1c999904037d60fac2eb9397f2adbe4"
     "58d7f264e64f1e73aa927b30988e2aed2f03620"},
    {6, "06c4e8ffb6872fad96f9aaca5eee1553eb62aed0ad7198cef42e87f6a616c844",
     "611a30c4e4f37fe2fe23c0883cde5cf7059d88b657c7ed2087e3d210925ede7164"
     "35d6d5d82597a1e52b9553919e804f5656278bd739880692c94bff2824d8e0b48cac1d24682699e4883389dc4f2fa"
     "a2eb3b4db6e39debd5061ff3609916f3e07529a"},
    {7, "3f8770f387faad08faa9d8414e9f449ac68e6ff0417f673f602a646a891419fe",
     "66036ef6e6d1a8f54baa9fed1fc11c77cfb9cff65bae915045027046ebe0c01bf5"
     "a941f3bb0f73791d3fc0b84370f9f30af0cd5b0fc334dd61f70feb60dad785f070fef1f343ed933b49a5ca0d16a50"
     "3f599a365a4296739248b28d1a20b0e2cc8975c"},
    {8, "2351207d04fc16ade43ccab08600939c7c1fa70a5c0aaca76063d04c3228eaeb",
     "725d6d46ceed8f785ab9f2f9b06acfe398c6699c6129da084cb531177445a68289"
     "4f9685eaf836999221d17c9a64a3a057000524cd2823986db378b074290a1a9b93a22e135ed2c14c7e20c6d045cd0"
     "0b903400374126676ea78874d79f2dd7883cf5c"},
    {63, "e9bc37a594daad83be9470df7f7b3798297c3d834ce80ba85d6e207627b7db7b",
     "1197012b1e7d9af4d7cb7bdd1f3bb49a90a9b5dec3ea2bbc6eaebce77f4e470cbf"
     "4687093b5352f04e4a4570fba233164e6acc36900e35d185886a827f7ea9bdc1e5c3ce88b095a200e62c10c043b3e"
     "9bc6cb9b6ac4dfa51794b02ace9f98779040755"},
    {64, "4eed7141ea4a5cd4b788606bd23f46e212af9cacebacdc7d1f4c6dc7f2511b98",
     "fc9cc56cb831ffe33ea8e7e1d1df09b26efd2767670066aa82d023b1dfe8ab1b2b"
     "7fbb5b97592d46ffe3e05a6a9b592e2949c74160e4674301bc3f97e04903f8c6cf95b863174c33228924cdef7ae47"
     "559b10b294acd660666c4538833582b43f82d74"},
    {65, "de1e5fa0be70df6d2be8fffd0e99ceaa8eb6e8c93a63f2d8d1c30ecb6b263dee",
     "0e16e0a4749d6811dd1d6d1265c29729b1b75a9ac346cf93f0e1d7296dfcfd4313"
     "b3a227faaaaf7757cc95b4e87a49be3b8a270a12020233509b1c3632b3485eef309d0abc4a4a696c9decc6e90454b"
     "53b000f456a3f10079072baaf7a981653221f2c"},
    {127, "d81293fda863f008c09e92fc382a81f5a0b4a1251cba1634016a0f86a6bd640d",
     "e3137d477156d1fde56b0cf36f8ef18b44b2d79897bece12227539ac9ae0a5119d"
     "a47644d934d26e74dc316145dcb8bb69ac3f2e05c242dd6ee06484fcb0e956dc44355b452c5e2bbb5e2b66e99f5dd"
     "443d0cbcaaafd4beebaed24ae2f8bb672bcef78"},
    {128, "f17e570564b26578c33bb7f44643f539624b05df1a76c81f30acd548c44b45ef",
     "a69faba091427f9c5c4caa873aa07828651f19c55bad85c47d1368b11c6fd99e47"
     "ecba5820a0325984d74fe3e4058494ca12e3f1d3293d0010a9722f7dee64f71246f75e9361f44cc8e214a100650db"
     "1313ff76a9f93ec6e84edb7add1cb4a95019b0c"},
    {129, "683aaae9f3c5ba37eaaf072aed0f9e30bac0865137bae68b1fde4ca2aebdcb12",
     "f96ffa7b36dd78ba321be7e842d364a62a42e3746681c8bace18a4a8a79649285c"
     "7127bf8febf125be9de39586d251f0d41da20980b70d35e3dac0eee59e468a894fa7e6a07129aaad09855f6ad4801"
     "512a116ba2b7841e6cfc99ad77594a8f2d181a7"},
    {1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11",
     "a182d27a591b05592b15607500e1e8dd56bc6c7fc063715b7a1d737df5bad3339c"
     "56778957d870eb9717b57ea3d9fb68d1b55127bba6a906a4a24bbd5acb2d123a37b28f9e9a81bbaae360d58f85e5f"
     "c9d75f7c370a0cc09b6522d9c8d822f2f28f485"},
    {1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7",
     "1cf8107265ecdaf8505b95d8fcec83a98a6a96ea5109d2c179c47a387ffbb40475"
     "6f6eeae7883b446b70ebb144527c2075ab8ab204c0086bb22b7c93d465efc57f8d917f0b385c6df265e77003b8510"
     "2967486ed57db5c5ca170ba441427ed9afa684e"},
    {1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444",
     "f4c4a22b4b399155358a994e52bf255de60035742ec71bd08ac275a1b51cc6bfe3"
     "32b0ef84b409108cda080e6269ed4b3e2c3f7d722aa4cdc98d16deb554e5627be8f955c98e1d5f9565a9194cad0c4"
     "285f93700062d9595adb992ae68ff12800ab67a"},
    {2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a",
     "9a60bf80001410ec9eea6698cd537939fad4749edd484cb541aced55cd9bf54764"
     "d063f23f6f1e32e12958ba5cfeb1bf618ad094266d4fc3c968c2088f677454c288c67ba0dba337b9d91c7e1ba586d"
     "c9a5bc2d5e90c14f53a8863ac75655461cea8f9"},
    {2049, "5f4d72f40d7a5f82b15ca2b2e44b1de3c2ef86c426c95c1af0b6879522563030",
     "96de31d71d74103403822a2e0bc1eb193e7aecc9643a76b7bbc0c9f9c52e8783aa"
     "e98764ca468962b5c2ec92f0c74eb5448d519713e09413719431c802f948dd5d90425a4ecdadece9eb178d80f26ef"
     "ccae630734dff63340285adec2aed3b51073ad3"},
    {3072, "b98cb0ff3623be03326b373de6b9095218513e64f1ee2edd2525c7ad1e5cffd2",
     "9a3f6b0b978d6608335c09dc94ccf682f9951cdfc501bfe47b9c9189a6fc7b404d"
     "120258506341a6d802857322fbd20d3e5dae05b95c88793fa83db1cb08e7d8008d1599b6209d78336e24839724c19"
     "1b2a52a80448306e0daa84a3fdb566661a37e11"},
    {3073, "7124b49501012f81cc7f11ca069ec9226cecb8a2c850cfe644e327d22d3e1cd3",
     "9a27ae3b79d68d89da9bf25bc27139ae65a324918a5f9b7828181e52cf373c84f3"
     "5b639b7fccbb985b6f2fa56aea0c18f531203497b8bbd3a07ceb5926f1cab74d14bd66486d9a91eba99059a98bd1c"
     "d25876b2af5a76c3e9eed554ed72ea952b603bf"},
    {4096, "015094013f57a5277b59d8475c0501042c0b642e531b0a1c8f58d2163229e969",
     "0289e9409ddb1b99768eafe1623da896faf7e1114bebeadc1be30829b6f8af707d"
     "85c298f4f0ff4d9438aef948335612ae921e76d411c3a9111df62d27eaf871959ae0062b5492a0feb98ef3ed4af27"
     "7f5395172dbe5c311918ea0074ce0036454f620"},
    {4097, "9b4052b38f1c5fc8b1f9ff7ac7b27cd242487b3d890d15c96a1c25b8aa0fb995",
     "05f91b0b5600a11251652eacfa9497b31cd3c409ce2e45cfe6c0a016967316c426"
     "bd26f619eab5d70af9a418b845c608840390f361630bd497b1ab44019316357c61dbe091ce72fc16dc340ac3d6e00"
     "9e050b3adac4b5b2c92e722cffdc46501531956"},
    {5120, "9cadc15fed8b5d854562b26a9536d9707cadeda9b143978f319ab34230535833",
     "acc61c8fdc114a2010ce8038c853e121e1544985133fccdd0a2d507e8e615e611e"
     "9a0ba4f47915f49e53d721816a9198e8b30f12d20ec3689989175f1bf7a300eee0d9321fad8da232ece6efb8e9fd8"
     "1b42ad161f6b9550a069e66b11b40487a5f5059"},
    {5121, "628bd2cb2004694adaab7bbd778a25df25c47b9d4155a55f8fbd79f2fe154cff",
     "96adaab0613a6146cdaabe498c3a94e529d3fc1da2bd08edf54ed64d40dcd67776"
     "47eac51d8277d70219a9694334a68bc8f0f23e20b0ff70ada6f844542dfa32cd4204ca1846ef76d811cdb296f65e2"
     "60227f477aa7aa008bac878f72257484f2b6c95"},
    {6144, "3e2e5b74e048f3add6d21faab3f83aa44d3b2278afb83b80b3c35164ebeca205",
     "4d742022da6fdda444ebc384b04a54c3ac5839b49da7d39f6d8a9db03deab32aad"
     "e156c1c0311e9b3435cde0ddba0dce7b26a376cad121294b689193508dd63151603c6ddb866ad16c2ee41585d1633"
     "a2cea093bea714f4c5d6b903522045b20395c83"},
    {6145, "f1323a8631446cc50536a9f705ee5cb619424d46887f3c376c695b70e0f0507f",
     "18a2cfdd73c6e39dd75ce7c1c6e3ef238fd54465f053b25d21044ccb2093beb015"
     "015532b108313b5829c3621ce324b8e14229091b7c93f32db2e4e63126a377d2a63a3597997d4f1cba59309cb4af2"
     "40ba70cebff9a23d5e3ff0cdae2cfd54e070022"},
    {7168, "61da957ec2499a95d6b8023e2b0e604ec7f6b50e80a9678b89d2628e99ada77a",
     "5707c321c83361793b9af62a40f43b523df1c8633cecb4cd14d00bdc79c78fca51"
     "65b863893f6d38b02ff7236c5a9a8ad2dba87d24c547cab046c29fc5bc1ed142e1de4763613bb162a5a538e6ef05e"
     "d05199d751f9eb58d332791b8d73fb74e4fce95"},
    {7169, "a003fc7a51754a9b3c7fae0367ab3d782dccf28855a03d435f8cfe74605e7817",
     "98a8b20534be1ca9eb2ae2df3fae2ea60e48c6fb0b850b1385b5de0fe460dbe9d9"
     "f9b0d8db4435da75c601156df9d047f4ede008732eb17adc05d96180f8a73548522840779e6062d643b79478a6e8d"
     "bce68927f36ebf676ffa7d72d5f68f050b119c8"},
    {8192, "aae792484c8efe4f19e2ca7d371d8c467ffb10748d8a5a1ae579948f718a2a63",
     "5fe51a27db045a567c1ad51be5aa34c01c6651c4d9b5b5ac5d0fd58cf18dd61a47"
     "778566b797a8c67df7b1d60b97b19288d2d877bb2df417ace009dcb0241ca1257d62712b6a4043b4ff33f690d849d"
     "a91ea3bf711ed583cb7b7a7da2839ba71309bbf"},
    {8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b",
     "b2282aa69be089359ea1154b9a9286c4a56af4de975a9aa4a5c497654914d279be"
     "a60bb6d2cf7225a2fa0ff5ef56bbe4b149f3ed15860f78b4e2ad04e158e375c1e0c0b551cd7dfc82f1b155c11b6b3"
     "ed51ec9edb30d133653bb5709d1dbd55f4e1ff6"},
    {16384, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4",
     "9d764c270176e53e97bdffa58d549073f2c660be0e81293767ed4e4929f9ad34bb"
     "b39a529334c57c4a381ffd2a6d4bfdbf1482651b172aa883cc13408fa67758a3e47503f93f87720a3177325f78232"
     "51b85275f64636a8f1d599c2e49722f42e93893"},
    {31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47",
     "860cc51f2b0c28a7b77304bd55fe73af663c02d3f52ea053ba43431ca5bab7bfea"
     "2f5e9d7121770d88f70ae9649ea713087d1914f7f312147e247f87eb2d4ffef0ac978bf7b6579d57d533355aa20b8"
     "b77b13fd09748728a5cc327a8ec470f4013226f"},
    {102400, "bc3e3d41a1146b069abffad3c0d44860cf664390afce4d9661f7902e7943e085",
     "e01c59dab908c04c3342b816941a26d69c2605ebee5ec5291cc55e15b76146e674"
     "5f0601156c3596cb75065a9c57f35585a52e1ac70f69131c23d611ce11ee4ab1ec2c009012d236648e77be9295dd0"
     "426f29b764d65de58eb7d01dd42248204f45f8e"},
};
#define N_VECTORS (sizeof VECTORS / sizeof VECTORS[0])

static void test_official_vectors(void **state) {
    (void)state;
    uint8_t *input = pattern_bytes(102400);
    for (size_t k = 0; k < N_IMPLS; k++) {
        if (!use_impl(ALL_IMPLS[k]))
            continue;
        for (size_t v = 0; v < N_VECTORS; v++) {
            uint8_t digest[32], xof[131];
            char hex[65], xof_hex[263], want_xof[263];
            rn_blake3_hash(input, VECTORS[v].len, digest);
            rn_blake3_hex(digest, hex);
            if (strcmp(hex, VECTORS[v].hash) != 0)
                fail_msg("%s: len %zu: got %s want %s", rn_blake3_impl_name(), VECTORS[v].len, hex,
                         VECTORS[v].hash);

            rn_blake3 h;
            rn_blake3_init(&h);
            rn_blake3_update(&h, input, VECTORS[v].len);
            rn_blake3_final_xof(&h, xof, sizeof xof);
            hex_of(xof, sizeof xof, xof_hex);
            snprintf(want_xof, sizeof want_xof, "%s%s", VECTORS[v].hash, VECTORS[v].xof_tail);
            if (strcmp(xof_hex, want_xof) != 0)
                fail_msg("%s: xof len %zu: got %s want %s", rn_blake3_impl_name(), VECTORS[v].len,
                         xof_hex, want_xof);
        }
    }
    restore_auto();
    free(input);
}

/* ------------------------------------------------------------------------ */
/* Incremental equivalence                                                   */

enum { SPLIT_BYTE, SPLIT_BOUNDARY, SPLIT_RANDOM_SMALL, SPLIT_RANDOM_LARGE, SPLIT_KINDS };

/* Size of the next update under a split strategy. */
static size_t next_piece(int kind, size_t left) {
    size_t n;
    switch (kind) {
    case SPLIT_BYTE:
        n = 1;
        break;
    case SPLIT_BOUNDARY: {
        static const size_t sizes[] = {64, 1024, 63, 65, 1023, 1025, 2048, 4096, 128, 1, 0};
        n = sizes[test_rng_below(sizeof sizes / sizeof sizes[0])];
        break;
    }
    case SPLIT_RANDOM_SMALL:
        n = test_rng_below(200);
        break;
    default:
        n = test_rng_below(70000);
        break;
    }
    return n < left ? n : left;
}

/* Hashes input in pieces; checks every few pieces that final() of the
 * prefix equals the one-shot digest of that prefix (final does not disturb
 * the state), then returns the full digest. */
static void hash_in_pieces(const uint8_t *input, size_t len, int kind, uint8_t out[32]) {
    rn_blake3 h;
    rn_blake3_init(&h);
    size_t off = 0, pieces = 0;
    while (off < len) {
        size_t n = next_piece(kind, len - off);
        rn_blake3_update(&h, input + off, n);
        off += n;
        if (++pieces % 97 == 0) {
            uint8_t mid[32], want[32];
            rn_blake3_final(&h, mid);
            rn_blake3_hash(input, off, want);
            assert_memory_equal(mid, want, 32);
        }
    }
    rn_blake3_update(&h, NULL, 0);
    rn_blake3_final(&h, out);
}

static void test_incremental_splits(void **state) {
    (void)state;
    test_rng_seed(0x9E3779B97F4A7C15ULL);
    static const size_t fixed[] = {0,    1,    63,    64,    65,    1023,   1024,   1025,
                                   2047, 2048, 2049,  3072,  4095,  4096,   4097,   8191,
                                   8192, 8193, 65535, 65536, 65537, 131072, 131073, 200000};
    size_t checked = 0;
    for (size_t k = 0; k < N_IMPLS; k++) {
        if (!use_impl(ALL_IMPLS[k]))
            continue;
        for (size_t t = 0; t < sizeof fixed / sizeof fixed[0] + 40; t++) {
            size_t len = t < sizeof fixed / sizeof fixed[0] ? fixed[t] : test_rng_below(300000);
            uint8_t *input = random_bytes(len);
            uint8_t want[32];
            rn_blake3_hash(input, len, want);
            for (int kind = 0; kind < SPLIT_KINDS; kind++) {
                if (kind == SPLIT_BYTE && len > 20000)
                    continue;
                uint8_t got[32];
                hash_in_pieces(input, len, kind, got);
                if (memcmp(got, want, 32) != 0)
                    fail_msg("%s: len %zu split kind %d differs from one-shot",
                             rn_blake3_impl_name(), len, kind);
                checked++;
            }
            free(input);
        }
    }
    restore_auto();
    assert_true(checked > 100);
}

/* final() is repeatable and updates after it continue the same input; a copy
 * of the hasher is an independent fork. */
static void test_final_keeps_state(void **state) {
    (void)state;
    test_rng_seed(12345);
    uint8_t *input = random_bytes(10000);
    rn_blake3 h;
    rn_blake3_init(&h);
    rn_blake3_update(&h, input, 3000);
    uint8_t a[32], b[32], want[32];
    rn_blake3_final(&h, a);
    rn_blake3_final(&h, b);
    assert_memory_equal(a, b, 32);
    rn_blake3_hash(input, 3000, want);
    assert_memory_equal(a, want, 32);

    rn_blake3 fork = h;
    rn_blake3_update(&h, input + 3000, 7000);
    rn_blake3_final(&h, a);
    rn_blake3_hash(input, 10000, want);
    assert_memory_equal(a, want, 32);

    rn_blake3_final(&fork, b);
    rn_blake3_hash(input, 3000, want);
    assert_memory_equal(b, want, 32);

    /* init resets a used hasher. */
    rn_blake3_init(&h);
    rn_blake3_final(&h, a);
    rn_blake3_hash(NULL, 0, want);
    assert_memory_equal(a, want, 32);
    free(input);
}

/* Extended output: any length is a prefix of a longer one, and the first 32
 * bytes are the digest. */
static void test_xof_prefixes(void **state) {
    (void)state;
    test_rng_seed(777);
    uint8_t *input = random_bytes(5000);
    rn_blake3 h;
    rn_blake3_init(&h);
    rn_blake3_update(&h, input, 5000);
    uint8_t longest[1000], digest[32];
    rn_blake3_final_xof(&h, longest, sizeof longest);
    rn_blake3_final(&h, digest);
    assert_memory_equal(longest, digest, 32);
    static const size_t lens[] = {0, 1, 31, 32, 33, 63, 64, 65, 128, 129, 999};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t out[1001];
        memset(out, 0xA5, sizeof out);
        rn_blake3_final_xof(&h, out, lens[i]);
        assert_memory_equal(out, longest, lens[i]);
        assert_int_equal(out[lens[i]], 0xA5); /* nothing written past the end */
    }
    free(input);
}

/* ------------------------------------------------------------------------ */
/* Code paths agree                                                          */

static void test_impls_agree(void **state) {
    (void)state;
    test_rng_seed(0xC0FFEE);
    size_t lens[48];
    size_t n = 0;
    for (size_t p = 2048; p <= (1u << 20); p *= 4) {
        lens[n++] = p - 1;
        lens[n++] = p;
        lens[n++] = p + 1;
    }
    while (n < sizeof lens / sizeof lens[0])
        lens[n++] = test_rng_below((1u << 20) + 1);
    for (size_t t = 0; t < n; t++) {
        uint8_t *input = random_bytes(lens[t]);
        uint8_t ref[32];
        int have_ref = 0;
        for (size_t k = 0; k < N_IMPLS; k++) {
            if (!use_impl(ALL_IMPLS[k]))
                continue;
            uint8_t got[32];
            rn_blake3_hash(input, lens[t], got);
            if (!have_ref) {
                memcpy(ref, got, 32);
                have_ref = 1;
            } else if (memcmp(got, ref, 32) != 0) {
                fail_msg("%s disagrees with portable at len %zu", rn_blake3_impl_name(), lens[t]);
            }
        }
        free(input);
    }
    restore_auto();
}

/* ------------------------------------------------------------------------ */
/* Hex and API                                                               */

static void test_hex(void **state) {
    (void)state;
    uint8_t d[32];
    for (int i = 0; i < 32; i++)
        d[i] = (uint8_t)(i * 8 + 7);
    char out[66];
    memset(out, 'x', sizeof out);
    rn_blake3_hex(d, out);
    assert_string_equal(out, "070f171f272f373f474f575f676f777f878f979fa7afb7bfc7cfd7dfe7eff7ff");
    assert_int_equal(out[65], 'x');
}

static void test_impl_selection(void **state) {
    (void)state;
    assert_int_equal(rn_blake3_set_impl(RN_BLAKE3_PORTABLE), 0);
    assert_string_equal(rn_blake3_impl_name(), "portable");
    if (rn_blake3_set_impl(RN_BLAKE3_SSE41) == 0)
        assert_string_equal(rn_blake3_impl_name(), "sse41");
    if (rn_blake3_set_impl(RN_BLAKE3_AVX2) == 0)
        assert_string_equal(rn_blake3_impl_name(), "avx2");
    assert_int_equal(rn_blake3_set_impl((rn_blake3_impl)99), -1);
    restore_auto();
    const char *name = rn_blake3_impl_name();
    assert_true(strcmp(name, "portable") == 0 || strcmp(name, "sse41") == 0 ||
                strcmp(name, "avx2") == 0);
    print_message("blake3: automatic code path here: %s\n", name);
    /* Memory bound: fixed-size state, no heap. */
    assert_true(sizeof(rn_blake3) < 2048);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_official_vectors),  cmocka_unit_test(test_incremental_splits),
        cmocka_unit_test(test_final_keeps_state), cmocka_unit_test(test_xof_prefixes),
        cmocka_unit_test(test_impls_agree),       cmocka_unit_test(test_hex),
        cmocka_unit_test(test_impl_selection),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
