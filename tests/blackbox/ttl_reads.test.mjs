// A sliding Stream-TTL renewed by every read, whatever its URL (issue 13,
// item 3). Covers PROTOCOL.md §5.1 Stream-TTL (each read or write resets the
// countdown; HEAD does not) together with extensions.txt §2.5 (snapshot
// reads), §3 (bootstrap) and §4.1 (the immutable chunk and snapshot
// resources): a stream with a 1 s TTL read every 250 ms for 2.5 s through
// one URL form stays alive; read through HEAD only, it expires.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, head, sleep } from "./lib/bucket.mjs";
import { append, createStream, enc, publishOk, stopAndRemove } from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;

// A stream with a 1 s sliding TTL, some bytes and a snapshot at its tail.
async function ttlStream() {
  const url = `${server.url}/ttlreads/s${++n}`;
  const c = await createStream(url, { type: OCTET, headers: { "stream-ttl": "1" } });
  const tail = await append(url, Buffer.from("0123456789"), OCTET);
  await publishOk(url, tail, "snapshot");
  return { url, token: c.token, first: c.tail, tail };
}

const READS = {
  "a catch-up read": ({ url, first }) => get(`${url}?offset=${enc(first)}`),
  "a snapshot read": ({ url, tail }) => get(`${url}/snapshot/${enc(tail)}`),
  "an immutable chunk read": ({ url, token, first }) => get(`${url}/incarnation/${token}/chunk/${enc(first)}`),
  "an immutable snapshot read": ({ url, token, tail }) => get(`${url}/incarnation/${token}/snapshot/${enc(tail)}`),
  "a bootstrap": ({ url }) => get(`${url}/bootstrap`),
};

const PERIOD_MS = 250;
const SPAN_MS = 2500; // two and a half TTL windows

describe("PROTOCOL §5.1 a sliding TTL is renewed by every read", () => {
  for (const [what, read] of Object.entries(READS)) {
    test(`${what} every ${PERIOD_MS} ms keeps a 1 s TTL stream alive for ${SPAN_MS} ms`, async () => {
      const s = await ttlStream();
      const end = Date.now() + SPAN_MS;
      let reads = 0;
      while (Date.now() < end) {
        const r = await read(s);
        assert.equal(r.status, 200, `${what} #${reads + 1}, ${SPAN_MS - (end - Date.now())} ms in, answered ${r.status} ${r.text}`);
        reads++;
        await sleep(PERIOD_MS);
      }
      assert.ok(reads >= SPAN_MS / PERIOD_MS / 2, `the loop read ${reads} times`);
      assert.equal((await head(s.url)).status, 200, "the stream is alive after the reads");
    });
  }

  test("HEAD of an immutable chunk does not renew it: the stream expires", async () => {
    const s = await ttlStream();
    const chunk = `${s.url}/incarnation/${s.token}/chunk/${enc(s.first)}`;
    const end = Date.now() + SPAN_MS;
    let status = 200;
    while (Date.now() < end && status === 200) {
      status = (await head(chunk)).status;
      await sleep(PERIOD_MS);
    }
    assert.equal(status, 404, "the stream expired although its chunk was HEADed throughout");
  });
});
