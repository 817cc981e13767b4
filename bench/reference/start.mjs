// Starts the Node reference Durable Streams server (@durable-streams/server)
// for bench/compare: file-backed storage (stream log files fdatasync'ed on
// every append, LMDB metadata) in DATA_DIR, listening on 127.0.0.1:PORT.
// Usage: node start.mjs PORT DATA_DIR [LONG_POLL_TIMEOUT_MS [MAX_FILE_HANDLES]]
//
// MAX_FILE_HANDLES sizes the store's pool of open stream files (the package
// default is 100, and TestServerOptions does not expose it). With more
// streams than handles being appended to at once, a handle can be evicted
// between an append's write and its fsync, and the server then answers 404
// ("handle not found"). To size the pool, the server is built without a
// dataDir and given a FileBackedStreamStore (both exported by the package)
// before it starts.
// Prints "listening <url>" once ready; SIGTERM/SIGINT stop it cleanly.
import { DurableStreamTestServer, FileBackedStreamStore } from "@durable-streams/server";

const [port, dataDir, longPoll = "30000", maxFileHandles] = process.argv.slice(2);
if (!port || !dataDir) {
  console.error("usage: node start.mjs PORT DATA_DIR [LONG_POLL_TIMEOUT_MS [MAX_FILE_HANDLES]]");
  process.exit(2);
}
const options = { port: Number(port), host: "127.0.0.1", longPollTimeout: Number(longPoll) };
let server;
if (maxFileHandles) {
  server = new DurableStreamTestServer(options);
  server.store = new FileBackedStreamStore({ dataDir, maxFileHandles: Number(maxFileHandles) });
  server.options.dataDir = dataDir;
} else {
  server = new DurableStreamTestServer({ ...options, dataDir });
}
await server.start();
console.log(`listening http://127.0.0.1:${port}`);
const stop = async () => {
  await server.stop();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
