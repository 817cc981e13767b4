// The black-box tests' server helpers: a server on a free loopback port
// with a fresh data directory (or a given one), its output kept in
// `server.log`, bounded waits, and whole-stream reads. They live in
// tests/lib/server.mjs, shared with every other JavaScript suite; the
// binary comes from RUNNEL_BIN (ctest and scripts/test.sh set it per build).
export { BIN, Server, freePort, readAll, sleep, tempDir } from "../../lib/server.mjs";
