# Every test suite beyond the cmocka unit tests, registered with ctest so that
# one tool runs them all (scripts/test.sh runs ctest label by label; see
# docs/TESTING.md). Each build directory registers the suites against its own
# binary, so `cd build-asan && ctest -L crash` tests the sanitizer build.
#
# Labels: unit (cmocka, tests/CMakeLists.txt), cluster, s3, client,
# conformance, blackbox (one test per file, named blackbox.<file>), gateway
# (one test per file of tests/gateway/, named gateway.<file>), crash,
# subs, faults, abuse, chaos (the cluster's chaos harness), fuzz, bench, project (checks of the whole checkout:
# other build types, the first run, the Debian packages; not per build).
# `fast` marks the fast tier: the unit tests and a cross-section of the
# black-box files, under two minutes on the 2-core machine (`ctest -L fast`).

find_program(NODE_JS node)
if(NOT NODE_JS)
  message(STATUS "node not found: only the unit tests are registered (scripts/setup.sh test installs it)")
  return()
endif()

set(RUNNEL_SRC ${CMAKE_SOURCE_DIR})
set(RUNNEL_BIN_ENV "RUNNEL_BIN=$<TARGET_FILE:runnel>")

# runnel_suite(NAME LABELS TIMEOUT COMMAND...): a test run from the source
# directory with RUNNEL_BIN naming this build's server.
function(runnel_suite name labels timeout)
  add_test(NAME ${name} COMMAND ${ARGN} WORKING_DIRECTORY ${RUNNEL_SRC})
  set_tests_properties(${name} PROPERTIES LABELS "${labels}" TIMEOUT ${timeout}
                       ENVIRONMENT "${RUNNEL_BIN_ENV}")
endfunction()

# ---- the official conformance suite, against a fresh server of this build
runnel_suite(conformance conformance 900 ${RUNNEL_SRC}/scripts/conformance.sh ${CMAKE_BINARY_DIR})
# ... and over HTTPS (a test CA made for the run, trusted by NODE_EXTRA_CA_CERTS)
runnel_suite(conformance-tls conformance 900 ${RUNNEL_SRC}/scripts/conformance.sh ${CMAKE_BINARY_DIR}
             --tls)
# ... and again with every request reaching the server over HTTP/2 (h2c),
# through nghttpx, when it is installed (nghttp2-proxy); on the plain build
# only: the sanitizer build's HTTP/2 path runs in blackbox.http2 and
# fuzz_http2, and a third pass of the suite there cost minutes of the run
find_program(NGHTTPX nghttpx PATHS /usr/sbin)
if(NGHTTPX AND NOT RUNNEL_SANITIZE)
  runnel_suite(conformance_h2 conformance 900 ${RUNNEL_SRC}/scripts/conformance_h2.sh ${CMAKE_BINARY_DIR})
endif()

# ---- black-box tests: one ctest test per file
# The fast tier's cross-section: both surfaces (v1 names and parameters,
# buckets, JSON messages, offsets), forks, snapshots, retention, producers,
# the strict HTTP layer and half-closes, listening, metrics and the peer
# limit; each file a few seconds. The long ones (SSE fan-out, 1 GiB
# snapshots, expiry and readiness waits, the docs' examples, restarts) run
# in the full run only.
set(RUNNEL_BLACKBOX_FAST
  bucket_ids bucket_json bucket_reads forks http_halfclose http_strict names_params
  offsets_encoding ops_listen ops_metrics ops_peer_limit producers_early producers_order
  retention_json snapshots_read snapshots_refusals)
file(GLOB RUNNEL_BLACKBOX_FILES CONFIGURE_DEPENDS ${RUNNEL_SRC}/tests/blackbox/*.test.mjs)
foreach(file ${RUNNEL_BLACKBOX_FILES})
  get_filename_component(stem ${file} NAME)
  string(REPLACE ".test.mjs" "" stem ${stem})
  set(labels blackbox)
  if(stem IN_LIST RUNNEL_BLACKBOX_FAST)
    list(APPEND labels fast)
  endif()
  runnel_suite(blackbox.${stem} "${labels}" 900 ${NODE_JS} --test ${file})
endforeach()

# ---- CORS in a real browser: a page on another loopback origin using the
# server through headless chromium (tests/browser; about 3 s)
runnel_suite(browser_cors blackbox 300 ${NODE_JS} --test ${RUNNEL_SRC}/tests/browser/cors.test.mjs)
# ---- the web console in headless chromium (tests/browser; about 15 s): its
# screenshots at both sizes go to the build directory's console-screenshots/
runnel_suite(browser_console blackbox 300 ${NODE_JS} --test ${RUNNEL_SRC}/tests/browser/console.test.mjs)
set_property(TEST browser_console APPEND PROPERTY ENVIRONMENT
  "RUNNEL_CONSOLE_SHOTS=${CMAKE_BINARY_DIR}/console-screenshots")

# ---- the official TypeScript client (@durable-streams/client, pinned by
# tests/client_ts/package-lock.json) against a single node and a 3-node
# cluster through a node that leads no group; every check passing on the
# one must pass on the other (issue 28; about 20 s, 30 s on the sanitizer build)
runnel_suite(client_ts client 600 ${NODE_JS} --test ${RUNNEL_SRC}/tests/client_ts/client.test.mjs)

# ---- the gateway (docs/GATEWAY.md), black-box: one ctest test per file,
# each starting its own nodes, gateways, stubs and (cluster) a 3-node cluster
file(GLOB RUNNEL_GATEWAY_FILES CONFIGURE_DEPENDS ${RUNNEL_SRC}/tests/gateway/*.test.mjs)
foreach(file ${RUNNEL_GATEWAY_FILES})
  get_filename_component(stem ${file} NAME)
  string(REPLACE ".test.mjs" "" stem ${stem})
  runnel_suite(gateway.${stem} gateway 600 ${NODE_JS} --test ${file})
endforeach()
# ... and the official conformance suite through the gate, a standalone
# gateway and the embedded gate, with a tenant of full rights; on the plain
# build only (a minute or two each; the sanitizer build runs the gateway's
# paths in the files above)
if(NOT RUNNEL_SANITIZE)
  runnel_suite(conformance_gateway conformance 900 ${RUNNEL_SRC}/scripts/conformance_gateway.sh ${CMAKE_BINARY_DIR})
  runnel_suite(conformance_gateway_embedded conformance 900
               ${RUNNEL_SRC}/scripts/conformance_gateway.sh ${CMAKE_BINARY_DIR} --embedded)
endif()

# ---- the S3 cold store end to end, against s3rver behind the SigV4-verifying
# proxy the test command starts (tests/s3/run_with_endpoint.sh)
runnel_suite(s3_coldstore s3 900
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/coldstore.test.mjs)
# ... and backups to an S3 prefix, restored from it (the cold store's bodies referenced)
runnel_suite(s3_backup s3 600
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/backup.test.mjs)
# ... history tiering over it: the issue's 1 GiB stream with 64 MiB hot
# (HISTORY_TOTAL_MIB, HISTORY_HOT_MIB), and store faults
runnel_suite(s3_history s3 1800
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/history.test.mjs)
if(RUNNEL_SANITIZE) # the same paths over fewer chunks: 48 MiB, 8 MiB hot
  set_property(TEST s3_history APPEND PROPERTY ENVIRONMENT "HISTORY_TOTAL_MIB=48;HISTORY_HOT_MIB=8")
endif()
# ... an accepted log loss with history tiering serves and moves only proven bytes
runnel_suite(s3_accept_loss s3 300
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/accept_loss.test.mjs)
# ... the store's failures at start and while running, bounded calls, Retry-After,
# publishes that upload nothing, the region required
runnel_suite(s3_failures s3 300
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/failures.test.mjs)
# ... who owns a prefix; restores into a prefix of their own
runnel_suite(s3_ownership s3 300
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/ownership.test.mjs)

# ... history tiering on a 3-node cluster sharing one prefix: moves made once by
# a group's leader, cold reads on every replica, a leader kill, a replaced node,
# the orphan sweep run once by the leader of the object's group
runnel_suite(s3_cluster_history s3 300
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/cluster_history.test.mjs)
# ... a backup of such a cluster (bodies copied) restored into a new cluster
runnel_suite(s3_cluster_backup s3 300
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/cluster_backup.test.mjs)
# ... staged snapshot parts that outlive a leader change
runnel_suite(s3_cluster_parts s3 300
  ${RUNNEL_SRC}/tests/s3/run_with_endpoint.sh ${NODE_JS} --test ${RUNNEL_SRC}/tests/s3/cluster_parts.test.mjs)

# ---- crash recovery, subscriptions, storage faults, kill points, abuse
# The sanitizer build runs slower: fewer crash rounds, the kill-point matrix's
# quick variant, a looser p99 bound for the abuse probe: in "answer memory"
# its requests wait behind 24 readers taking 1.1 GiB through instrumented
# copies (measured p50 32-113 ms, max 591-763 ms; the plain build's bound, 200 ms,
# is the latency check, the sanitizer run checks memory safety under abuse),
# and more RSS slack in "answer memory": ASan's quarantine keeps the freed
# pieces already sent (measured growth 23-36 MiB there, 10 MiB plain).
if(RUNNEL_SANITIZE)
  set(crash_rounds 3)
  set(killpoints_extra --quick)
  set(abuse_extra --p99-ms 2000 --rss-slack-mib 64)
else()
  set(crash_rounds 6)
  set(killpoints_extra)
  set(abuse_extra --p99-ms 200)
endif()
set(bin $<TARGET_FILE:runnel>)
runnel_suite(crash crash 900
  ${NODE_JS} ${RUNNEL_SRC}/tests/crash/crash_test.mjs --bin ${bin} --rounds ${crash_rounds})
# the fast tier's crash check: two SIGKILLs under 8 streams of writers
runnel_suite(crash_quick "crash;fast" 300
  ${NODE_JS} ${RUNNEL_SRC}/tests/crash/crash_test.mjs --bin ${bin} --rounds 2 --streams 8)
# power cuts: the data directory on a loop-mounted ext4 image shut down
# without flushing its journal (tests/crash/fs_shutdown.c) at random moments
# under acknowledged appends; root (without it the run says it skipped)
add_executable(runnel-fs-shutdown ${RUNNEL_SRC}/tests/crash/fs_shutdown.c)
target_compile_options(runnel-fs-shutdown PRIVATE ${RUNNEL_WARNINGS})
runnel_suite(powercut crash 600
  ${NODE_JS} ${RUNNEL_SRC}/tests/crash/crash_test.mjs --bin ${bin} --power-cut $<TARGET_FILE:runnel-fs-shutdown>
  --rounds 8 --streams 8)
# ... with every other record of each writer a large append (64-256 KiB)
# written once: synced in its stream file before its log record, so these
# cuts prove that sync real as the ones above prove the log's
runnel_suite(powercut_large crash 600
  ${NODE_JS} ${RUNNEL_SRC}/tests/crash/crash_test.mjs --bin ${bin} --power-cut $<TARGET_FILE:runnel-fs-shutdown>
  --large-append-bytes 65536 --rounds 6 --streams 4 --image-mib 2048)
runnel_suite(log_damage crash 900 ${NODE_JS} ${RUNNEL_SRC}/tests/crash/log_damage_test.mjs --bin ${bin})
runnel_suite(subs subs 900 ${NODE_JS} ${RUNNEL_SRC}/tests/subs/subs_test.mjs --bin ${bin})
runnel_suite(faults faults 900 ${NODE_JS} ${RUNNEL_SRC}/tests/faults/fault_test.mjs --bin ${bin})
runnel_suite(killpoints faults 1500
  ${NODE_JS} ${RUNNEL_SRC}/tests/faults/killpoints_test.mjs --bin ${bin} ${killpoints_extra})
runnel_suite(abuse abuse 900
  ${NODE_JS} ${RUNNEL_SRC}/tests/abuse/abuse_test.mjs --bin ${bin} ${abuse_extra})

# ---- the cluster's chaos harness, short schedule: every fault kind once (15) against a
# 3-node cluster in network namespaces (root; docs/TESTING.md "Cluster chaos
# harness"). scripts/test.sh runs it from build/ only.
runnel_suite(chaos_short chaos 1800
  ${NODE_JS} ${RUNNEL_SRC}/tests/cluster/chaos/run.mjs --bin ${bin} --schedule short)

# ---- the fuzz harnesses (built with clang into build-fuzz/, whatever the
# build directory), the BLAKE3 cross-check and the benchmark tools' smoke
runnel_suite(fuzz_smoke fuzz 900 ${RUNNEL_SRC}/fuzz/smoke.sh)
set_property(TEST fuzz_smoke APPEND PROPERTY ENVIRONMENT "FUZZ_SECONDS=10")
runnel_suite(blake3_vs_b3sum unit 300 ${RUNNEL_SRC}/tests/unit/blake3_vs_b3sum.sh ${CMAKE_BINARY_DIR})
# no function of the server's libraries that nothing else calls (nm over
# this build's objects; the fast tier)
runnel_suite(unused_exports "unit;fast" 120 ${RUNNEL_SRC}/scripts/unused_exports.sh ${CMAKE_BINARY_DIR})
# every option a document names still exists (runnel's help, the scripts',
# benchmarks' and harnesses' sources, a few other tools' flags)
runnel_suite(doc_options "unit;fast" 60 ${RUNNEL_SRC}/scripts/check_doc_options.sh ${CMAKE_BINARY_DIR})
runnel_suite(bench_smoke bench 600 ${RUNNEL_SRC}/bench/smoke.sh ${CMAKE_BINARY_DIR})

# ---- the checkout as a whole (scripts/test.sh runs these from build/ only);
# the build types the three builds do not cover (Debug is build-asan's)
runnel_suite(build_types project 1800 ${RUNNEL_SRC}/scripts/check_build_types.sh MinSizeRel)
runnel_suite(first_run project 1800 ${RUNNEL_SRC}/tests/firstrun/first_run_test.sh)
runnel_suite(debian_packages project 1800 ${RUNNEL_SRC}/tests/client/package_test.sh)

# ---- the order of a parallel step: ctest -j 2 starts the costliest tests
# first, and a clean checkout has no measured costs (Testing/Temporary/
# CTestCostData.txt) to go by, so that a long test started last would run
# alone at the end of its step. Seconds on the plain build, measured.
foreach(cost chaos_short=101 s3_history=129 fuzz_smoke=113 s3_cluster_history=77 cluster_subs=57
        killpoints=55 cluster_musts=50 cluster_restarts=50 cluster_disk=46 cluster_failover=45
        cluster_followers=45 cluster_forks=54 chaos_harness=40 blackbox.snapshots_parts=38 cluster_conformance=36
        cluster_damage=34 s3_backup=33 cluster_consensus=31 cluster_majority_loss=31
        cluster_moves=30)
  string(REPLACE "=" ";" cost "${cost}")
  list(GET cost 0 name)
  list(GET cost 1 seconds)
  if(TEST ${name})
    set_tests_properties(${name} PROPERTIES COST ${seconds})
  endif()
endforeach()
