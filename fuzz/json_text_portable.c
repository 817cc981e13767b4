/*
 * json_text_portable.c — src/util/json_text.c compiled a second time without
 * SSE2 (RN_JSON_NO_SIMD: the 8-byte word path), its public functions renamed
 * with a _portable suffix, so that fuzz_json can check that both code paths
 * give byte-identical results on every input. Nothing else uses it.
 */
#define RN_JSON_NO_SIMD 1
#define rn_json_to_messages rn_json_to_messages_portable
#define rn_json_status_name rn_json_status_name_portable
#define rn_json_count_messages rn_json_count_messages_portable
#define rn_json_append_array rn_json_append_array_portable
#include "util/json_text.c"
