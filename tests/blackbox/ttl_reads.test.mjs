// A sliding Stream-TTL renewed by every read, whatever its URL, and by no
// HEAD (issue 13, item 3; issue 25: every read resource, not one). Covers
// PROTOCOL.md §5.1 Stream-TTL (each read or write resets the countdown;
// HEAD does not) on both surfaces together with extensions.txt §2.5
// (snapshot reads), §3 (bootstrap) and §4.1 (the immutable chunk and
// snapshot resources): a stream with a 1 s TTL read every 250 ms for 2.5 s
// through one read form (catch-up, long-poll and SSE on each surface, a
// snapshot, an immutable chunk and snapshot, a bootstrap) stays alive;
// asked only through one HEAD form (the stream on each surface, its
// snapshot, its immutable chunk and snapshot), it expires.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { get, head, sleep } from "./lib/bucket.mjs";
import { append, createStream, enc, publishOk, stopAndRemove } from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
// long-polls without timeout_ms (the v1 surface has none) end after 200 ms
const server = new Server({ args: ["--long-poll-timeout-ms", "200"] });
before(() => server.start());
after(() => stopAndRemove(server));

let n = 0;

// A stream with a 1 s sliding TTL, some bytes and a snapshot at its tail.
async function ttlStream() {
  const url = `${server.url}/ttlreads/s${++n}`;
  const c = await createStream(url, { type: OCTET, headers: { "stream-ttl": "1" } });
  const tail = await append(url, Buffer.from("0123456789"), OCTET);
  await publishOk(url, tail, "snapshot");
  return { url, v1: url.replace(server.url, `${server.url}/v1/stream`), token: c.token, first: c.tail, tail };
}

// An SSE read: the answer's head and its first event, then the client goes.
async function sse(url) {
  const ac = new AbortController();
  const t = setTimeout(() => ac.abort(), 5000);
  try {
    const res = await fetch(url, { signal: ac.signal });
    const reader = res.body.getReader();
    const first = await reader.read();
    ac.abort();
    return { status: res.status, text: first.value ? Buffer.from(first.value).toString("utf8") : "" };
  } finally {
    clearTimeout(t);
  }
}

const READS = {
  "a catch-up read": ({ url, first }) => get(`${url}?offset=${enc(first)}`),
  "a long-poll at the tail": ({ url }) => get(`${url}?offset=now&live=long-poll&timeout_ms=100`),
  "an SSE read": ({ url, first }) => sse(`${url}?offset=${enc(first)}&live=sse`),
  "a v1 catch-up read": ({ v1, first }) => get(`${v1}?offset=${enc(first)}`),
  "a v1 long-poll at the tail": ({ v1 }) => get(`${v1}?offset=now&live=long-poll`),
  "a v1 SSE read": ({ v1, first }) => sse(`${v1}?offset=${enc(first)}&live=sse`),
  "a snapshot read": ({ url, tail }) => get(`${url}/snapshot/${enc(tail)}`),
  "an immutable chunk read": ({ url, token, first }) => get(`${url}/incarnation/${token}/chunk/${enc(first)}`),
  "an immutable snapshot read": ({ url, token, tail }) => get(`${url}/incarnation/${token}/snapshot/${enc(tail)}`),
  "a bootstrap": ({ url }) => get(`${url}/bootstrap`),
};

const PERIOD_MS = 250;
const SPAN_MS = 2500; // two and a half TTL windows

// Each case takes 2.5 s of waiting: they run at once.
describe("PROTOCOL §5.1 a sliding TTL is renewed by every read", { concurrency: true }, () => {
  for (const [what, read] of Object.entries(READS)) {
    test(`${what} every ${PERIOD_MS} ms keeps a 1 s TTL stream alive for ${SPAN_MS} ms`, async () => {
      const s = await ttlStream();
      const end = Date.now() + SPAN_MS;
      let reads = 0;
      while (Date.now() < end) {
        const r = await read(s);
        assert.ok([200, 204].includes(r.status), `${what} #${reads + 1}, ${SPAN_MS - (end - Date.now())} ms in, answered ${r.status} ${r.text}`);
        reads++;
        await sleep(PERIOD_MS);
      }
      assert.ok(reads >= SPAN_MS / PERIOD_MS / 2, `the loop read ${reads} times`);
      assert.equal((await head(s.url)).status, 200, "the stream is alive after the reads");
    });
  }

});

const HEADS = {
  "HEAD of the stream": ({ url }) => url,
  "HEAD of the stream on the v1 surface": ({ v1 }) => v1,
  "HEAD of its snapshot": ({ url, tail }) => `${url}/snapshot/${enc(tail)}`,
  "HEAD of an immutable chunk": ({ url, token, first }) => `${url}/incarnation/${token}/chunk/${enc(first)}`,
  "HEAD of the immutable snapshot": ({ url, token, tail }) => `${url}/incarnation/${token}/snapshot/${enc(tail)}`,
};

describe("PROTOCOL §5.1 HEAD does not renew a sliding TTL", { concurrency: true }, () => {
  for (const [what, target] of Object.entries(HEADS)) {
    test(`${what} every ${PERIOD_MS} ms: the 1 s TTL stream expires`, async () => {
      const s = await ttlStream();
      const end = Date.now() + SPAN_MS;
      let status = 200;
      let heads = 0;
      while (Date.now() < end && status === 200) {
        status = (await head(target(s))).status;
        heads++;
        await sleep(PERIOD_MS);
      }
      assert.ok(heads >= 2, `the first HEAD answered 200 and more followed (${heads})`);
      assert.equal(status, 404, `the stream expired although ${what} was asked throughout`);
      assert.equal((await head(s.url)).status, 404, "the stream is gone");
    });
  }
});
