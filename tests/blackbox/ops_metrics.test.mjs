// Operations: the Prometheus endpoint /__runnel/metrics (issue 9).
// Scrapes before and after a known workload and checks exact deltas:
// runnel_http_requests_total by route, method and status (v1, bucket,
// subresource, subscriptions, ops, other); appends, append bytes and
// messages (JSON batches count their messages); read bytes; SSE events and
// bytes; log batches and records and the sync-latency histogram (cumulative
// buckets, +Inf = _count = batches); log sync failures (test hook); the
// streams, producers, hot, snapshot and cold bytes, live-reader and
// open-connection gauges; subscription deliveries and failures; spare
// stream file sets made, taken and missed; resident
// memory; and that the whole exposition parses (HELP/TYPE before samples,
// `name{labels} value`).
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, openSse, req } from "./lib/bucket.mjs";
import { parseExposition, rawGet, reqKey, requestDeltas, scrape, sleep } from "./lib/ops.mjs";

const server = new Server({ args: ["--test-hooks", "--webhook-allow-loopback", "--webhook-timeout-ms", "1000"] });
before(() => server.start());
after(() => server.stop());

const TEXT = "text/plain";
const JSONT = "application/json";
const v1 = (p) => `${server.url}/v1/stream/${p}`;
const post = (url, body, type = TEXT, headers = {}) => req(url, { method: "POST", headers: { "content-type": type, ...headers }, body });
const put = (url, type = TEXT) => req(url, { method: "PUT", headers: { "content-type": type } });

// The byte position of an offset "XXXXXXXXXXXXXXXX_NNNNNNNNNNNNNNNN".
const bytePos = (offset) => {
  const m = /^[0-9]{16}_([0-9]{16})$/.exec(offset ?? "");
  assert.ok(m, `offset form: ${offset}`);
  return Number(m[1]);
};
async function tailBytes(url) {
  const r = await req(url, { method: "HEAD" });
  assert.equal(r.status, 200, `HEAD ${url}`);
  return bytePos(r.headers.get("stream-next-offset"));
}

// Waits until a scrape satisfies pred; returns that scrape. `what` (text
// or a function giving it) names the wait in the failure message.
async function waitMetric(pred, what, timeoutMs = 5000) {
  const deadline = Date.now() + timeoutMs;
  let m;
  while (Date.now() < deadline) {
    m = await scrape(server.url);
    if (pred(m)) return m;
    await sleep(20);
  }
  assert.fail(`timed out waiting for ${typeof what === "function" ? what() : what}; last scrape:\n${m?.text}`);
}

describe("exposition format", () => {
  test("Content-Type is the text format 0.0.4; every line is HELP, TYPE or `name{labels} value`; HELP/TYPE precede samples", async () => {
    const m = await scrape(server.url);
    assert.match(m.contentType, /^text\/plain; version=0\.0\.4/);
    // parseExposition checked the grammar; every family is typed and documented
    for (const [name, f] of m.families) {
      assert.ok(f.type && f.help, `${name} has TYPE and HELP`);
      if (f.type === "counter") assert.match(name, /_total$/, `counter ${name} ends in _total`);
    }
    const want = {
      runnel_http_requests_total: "counter",
      runnel_appends_total: "counter",
      runnel_append_bytes_total: "counter",
      runnel_append_messages_total: "counter",
      runnel_reads_total: "counter",
      runnel_read_bytes_total: "counter",
      runnel_sse_events_total: "counter",
      runnel_sse_bytes_total: "counter",
      runnel_wal_batches_total: "counter",
      runnel_wal_records_total: "counter",
      runnel_wal_bytes_total: "counter",
      runnel_wal_sync_failures_total: "counter",
      runnel_wal_sync_seconds: "histogram",
      runnel_subscription_deliveries_total: "counter",
      runnel_subscription_delivery_failures_total: "counter",
      runnel_streams: "gauge",
      runnel_producers: "gauge",
      runnel_hot_bytes: "gauge",
      runnel_snapshot_bytes: "gauge",
      runnel_cold_bytes: "gauge",
      runnel_live_readers: "gauge",
      runnel_open_connections: "gauge",
      runnel_answer_bytes_in_flight: "gauge",
      runnel_process_resident_bytes: "gauge",
      runnel_ready: "gauge",
    };
    for (const [name, type] of Object.entries(want)) assert.equal(m.families.get(name)?.type, type, `family ${name} of type ${type}`);
    // every family but the request counter has at least one sample from the start
    for (const [name, f] of m.families) if (name !== "runnel_http_requests_total") assert.ok(f.samples.length > 0, `${name} has samples`);
    assert.equal(m.get("runnel_ready"), 1);
    for (const v of m.values.values()) assert.ok(Number.isFinite(v) && v >= 0, "values are finite and non-negative");
  });

  test("HEAD answers like GET without a body; other methods on the metrics path do not render it", async () => {
    const h = await rawGet(`${server.url}/__runnel/metrics`, { method: "HEAD" });
    assert.equal(h.status, 200);
    assert.equal(h.text, "");
    const p = await req(`${server.url}/__runnel/metrics`, { method: "POST", body: "x" });
    assert.notEqual(p.status, 200);
    assert.ok(!p.text.includes("runnel_"), "a POST gets no exposition");
  });

  test("the parser used here refuses malformed expositions (self-check)", () => {
    assert.throws(() => parseExposition("a 1\n"), /without|before/);
    assert.throws(() => parseExposition("# HELP a x\n# TYPE a counter\na{b=1} 2\n"), /not a sample/);
    assert.throws(() => parseExposition("# HELP a x\n# TYPE a counter\na 1\n# HELP a y\n"), /after the samples|second/);
    assert.throws(() => parseExposition("# HELP a x\n# TYPE a counter\na 1"), /newline/);
    assert.doesNotThrow(() => parseExposition('# HELP a x\n# TYPE a counter\na{b="c",d="e"} 2\n'));
  });
});

describe("counters after a known workload", () => {
  let m0, m1, jsonTail, txtTail, hookStatus;

  before(async () => {
    m0 = await scrape(server.url);
    // v1 text stream: 3 appends of 5 + 6 + 10 bytes
    assert.equal((await put(v1("mx/txt"))).status, 201);
    for (const b of ["hello", "world!", "0123456789"]) assert.equal((await post(v1("mx/txt"), b)).status, 204);
    // v1 JSON stream: a batch of 3 messages, then 1 message
    assert.equal((await put(v1("mx/json"), JSONT)).status, 201);
    assert.equal((await post(v1("mx/json"), '[{"a":1}, {"b":2},{"c":3}]', JSONT)).status, 204);
    assert.equal((await post(v1("mx/json"), '{"d":4}', JSONT)).status, 204);
    // reads
    const rt = await req(`${v1("mx/txt")}?offset=-1`);
    assert.equal(rt.text, "helloworld!0123456789");
    const rj = await req(`${v1("mx/json")}?offset=-1`);
    assert.deepEqual(JSON.parse(rj.text), [{ a: 1 }, { b: 2 }, { c: 3 }, { d: 4 }]);
    assertError(await req(v1("mx/missing")), 404, undefined);
    assert.equal((await req(v1("mx/txt"), { method: "HEAD" })).status, 200);
    // a stream created and deleted
    assert.equal((await put(v1("mx/gone"))).status, 201);
    assert.equal((await req(v1("mx/gone"), { method: "DELETE" })).status, 204);
    // bucket surface: create, plain append, producer append, a subresource
    assert.equal((await put(`${server.url}/mxbk/s1`, "text/plain")).status, 201);
    assert.equal((await post(`${server.url}/mxbk/s1`, "abc", "text/plain")).status, 204);
    const pr = await post(`${server.url}/mxbk/s1`, "xyz", "text/plain", { "producer-id": "p1", "producer-epoch": "0", "producer-seq": "0" });
    assert.equal(pr.status, 200, `producer append ${pr.status} ${pr.text}`);
    assert.equal((await req(`${server.url}/mxbk/s1/snapshot`)).status, 405); // the removed latest-snapshot path
    assert.equal((await req(`${server.url}/mxbk/s1`, { method: "OPTIONS" })).status, 204);
    // SSE: the catch-up event, then one live event for a 2-byte append
    const sse = await openSse(`${v1("mx/txt")}?offset=-1&live=sse`);
    assert.equal(sse.status, 200);
    assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "data")), "catch-up event");
    assert.equal((await post(v1("mx/txt"), "!!")).status, 204);
    assert.ok(await sse.waitFor((ev) => ev.filter((e) => e.type === "data").length >= 2), "live event");
    assert.deepEqual(sse.events.filter((e) => e.type === "data").map((e) => e.data), ["helloworld!0123456789", "!!"]);
    sse.close();
    // the live reader is gone before the second scrape
    await waitMetric((m) => m.get("runnel_live_readers") === 0, "the SSE reader to leave");
    txtTail = await tailBytes(v1("mx/txt"));
    jsonTail = await tailBytes(v1("mx/json"));
    hookStatus = (await req(`${server.url}/__runnel/test/nothing`, { method: "GET" })).status;
    m1 = await scrape(server.url);
  });

  const d = (name, labels) => m1.get(name, labels) - m0.get(name, labels);

  test("runnel_http_requests_total: exact deltas by route, method and status", () => {
    const deltas = requestDeltas(m0, m1);
    // ops GET 200: the first scrape and the waits for the SSE reader to
    // leave (each counted when answered, so the second scrape is not in it)
    const opsGets = deltas["ops GET 200"];
    assert.ok(opsGets >= 2, `ops GET 200 delta ${opsGets}`);
    assert.deepEqual(deltas, {
      "v1 PUT 201": 3,
      "v1 POST 204": 6,
      "v1 GET 200": 3, // two catch-up reads and the SSE response
      "v1 GET 404": 1,
      "v1 HEAD 200": 3, // one explicit, two tail probes
      "v1 DELETE 204": 1,
      "bucket PUT 201": 1,
      "bucket POST 204": 1,
      "bucket POST 200": 1,
      "subresource GET 405": 1,
      "other OPTIONS 204": 1,
      "ops GET 404": 1, // an unknown /__runnel/ path
      "ops GET 200": opsGets,
    });
    assert.equal(hookStatus, 404);
  });

  test("appends, append bytes and messages: a JSON batch counts its messages", () => {
    // txt 3 + 1 ("!!"), json 2, bucket 1 + 1 (producer)
    assert.equal(d("runnel_appends_total"), 4 + 2 + 2);
    // one message per append, but the JSON batch counts 3
    assert.equal(d("runnel_append_messages_total"), 4 + (3 + 1) + 2);
    // stored bytes: what the streams' tails advanced by
    assert.equal(txtTail, 23);
    assert.equal(d("runnel_append_bytes_total"), txtTail + jsonTail + 6);
  });

  test("reads and read bytes count the stream bytes of catch-up reads", () => {
    assert.equal(d("runnel_reads_total"), 2);
    assert.equal(d("runnel_read_bytes_total"), 21 + jsonTail);
  });

  test("SSE events and bytes", () => {
    assert.equal(d("runnel_sse_events_total"), 2);
    assert.equal(d("runnel_sse_bytes_total"), 21 + 2);
  });

  test("log batches and records grew; bytes grew; no sync failure", () => {
    const batches = d("runnel_wal_batches_total");
    const records = d("runnel_wal_records_total");
    // 4 creates, 8 appends, 1 delete: each is at least one log record
    assert.ok(records >= 13, `records delta ${records}`);
    assert.ok(batches >= 1 && batches <= records, `batches delta ${batches}, records ${records}`);
    assert.ok(d("runnel_wal_bytes_total") >= 21 + jsonTail + 6, "log bytes cover the appended bytes");
    assert.equal(d("runnel_wal_sync_failures_total"), 0);
  });

  test("sync-latency histogram: cumulative buckets with increasing le, +Inf = _count = batches, _sum > 0", () => {
    const fam = m1.families.get("runnel_wal_sync_seconds");
    const buckets = fam.samples.filter((s) => s.name === "runnel_wal_sync_seconds_bucket");
    assert.ok(buckets.length >= 2);
    const les = buckets.map((s) => s.labels.le);
    assert.equal(les.at(-1), "+Inf");
    for (let i = 1; i < buckets.length; i++) {
      if (i < buckets.length - 1) assert.ok(Number(les[i]) > Number(les[i - 1]), `le ${les[i]} > ${les[i - 1]}`);
      assert.ok(buckets[i].value >= buckets[i - 1].value, `bucket le=${les[i]} is cumulative`);
    }
    const count = m1.get("runnel_wal_sync_seconds_count");
    assert.equal(buckets.at(-1).value, count, "+Inf bucket equals _count");
    assert.equal(count, m1.get("runnel_wal_batches_total"), "_count equals the batches");
    assert.equal(d("runnel_wal_sync_seconds_count"), d("runnel_wal_batches_total"));
    const sum = m1.get("runnel_wal_sync_seconds_sum");
    assert.ok(sum > 0);
    // the sum is consistent with the buckets: each sync counted under le=b
    // took at most b seconds, so the finite buckets bound the sum from
    // above unless some syncs fell in +Inf
    const finite = buckets.slice(0, -1);
    if (finite.at(-1).value === count) {
      let bound = 0;
      let prev = 0;
      for (const b of finite) {
        bound += (b.value - prev) * Number(b.labels.le);
        prev = b.value;
      }
      assert.ok(sum <= bound + 1e-6, `_sum ${sum} <= ${bound}`);
    }
  });

  test("gauges: streams, producers, hot bytes, resident memory, ready", () => {
    assert.equal(m1.get("runnel_streams") - m0.get("runnel_streams"), 3, "txt, json and the bucket stream (the deleted one is not counted)");
    assert.equal(m1.get("runnel_producers") - m0.get("runnel_producers"), 1);
    assert.equal(m1.get("runnel_hot_bytes") - m0.get("runnel_hot_bytes"), txtTail + jsonTail + 6);
    const rss = m1.get("runnel_process_resident_bytes");
    assert.ok(rss > 1 << 20 && rss < 16 * 2 ** 30, `resident bytes ${rss}`);
    assert.equal(m1.get("runnel_ready"), 1);
    assert.equal(m1.get("runnel_live_readers"), 0);
  });
});

describe("snapshot and cold-store bytes", () => {
  test("a small snapshot counts in runnel_snapshot_bytes, one of 1 MiB or more in runnel_cold_bytes", async () => {
    const a = await scrape(server.url);
    const publish = async (url, size) => {
      assert.equal((await put(url)).status, 201);
      assert.equal((await post(url, "abcdef")).status, 204);
      const h = await req(url, { method: "HEAD" });
      const at = encodeURIComponent(h.headers.get("stream-next-offset"));
      const r = await req(`${url}/snapshot/${at}`, { method: "PUT", headers: { "content-type": "application/octet-stream" }, body: Buffer.alloc(size, 7) });
      assert.equal(r.status, 204, `publish: ${r.status} ${r.text}`);
    };
    await publish(`${server.url}/mxsnap/small`, 1000);
    await publish(`${server.url}/mxsnap/large`, (1 << 20) + 5);
    const b = await scrape(server.url);
    assert.equal(b.get("runnel_snapshot_bytes") - a.get("runnel_snapshot_bytes"), 1000);
    assert.equal(b.get("runnel_cold_bytes") - a.get("runnel_cold_bytes"), (1 << 20) + 5);
    assert.equal(b.get("runnel_hot_bytes") - a.get("runnel_hot_bytes"), 12);
    assert.equal(b.get(reqKey("subresource", "PUT", 204)) - a.get(reqKey("subresource", "PUT", 204)), 2);
  });
});

describe("spare stream files", () => {
  test("a new stream's first append takes a set made ahead; the reserve is made again", async () => {
    // the default reserve: 256 sets, made on the pool once the server started
    const a = await waitMetric((m) => m.get("runnel_spare_file_sets_made_total") - m.get("runnel_spare_file_sets_taken_total") === 256, "a full reserve");
    for (let i = 0; i < 5; i++) {
      assert.equal((await put(v1(`spares-${i}`))).status, 201);
      assert.equal((await post(v1(`spares-${i}`), `first ${i}`)).status, 204);
    }
    const b = await scrape(server.url);
    assert.equal(b.get("runnel_spare_file_sets_taken_total") - a.get("runnel_spare_file_sets_taken_total"), 5);
    assert.equal(b.get("runnel_spare_file_sets_missed_total") - a.get("runnel_spare_file_sets_missed_total"), 0);
    for (let i = 0; i < 5; i++) assert.equal((await req(v1(`spares-${i}`))).text, `first ${i}`);
    await waitMetric((m) => m.get("runnel_spare_file_sets_made_total") - a.get("runnel_spare_file_sets_made_total") === 5, "5 sets made again");
  });
});

describe("live readers and open connections", () => {
  // A request on its own connection that stays parked; destroy() aborts it.
  function park(url) {
    const chunks = [];
    const rq = http.request(url, { agent: false });
    const done = new Promise((resolve) => {
      rq.on("response", (rs) => {
        rs.on("data", (c) => chunks.push(c));
        rs.on("end", () => resolve({ status: rs.statusCode, body: Buffer.concat(chunks).toString() }));
        rs.on("error", () => resolve({ status: rs.statusCode, aborted: true }));
      });
      rq.on("error", () => resolve({ aborted: true }));
    });
    rq.end();
    return { rq, done };
  }

  test("parked long-polls and SSE readers are counted while parked; each holds one open connection", async () => {
    const url = v1("mx/live");
    assert.equal((await put(url)).status, 201);
    // A scrape's connection may still be counted by the next scrape (the
    // server sees its close a moment later; once in 40 runs here): the
    // baseline is the lowest of three, and the count with the readers
    // parked is waited for.
    const bases = [];
    for (let i = 0; i < 3; i++) bases.push(await scrape(server.url));
    const conns0 = Math.min(...bases.map((b) => b.get("runnel_open_connections")));
    assert.ok(conns0 >= 1, "the scrape's own connection is open");
    assert.equal(bases[2].get("runnel_live_readers"), 0);
    const polls = [1, 2, 3].map(() => park(`${url}?offset=now&live=long-poll`));
    const sse = park(`${url}?offset=now&live=sse`);
    let m = await waitMetric((s) => s.get("runnel_live_readers") === 4, "4 parked readers");
    m = await waitMetric((s) => s.get("runnel_open_connections") === conns0 + 4,
      () => `one connection per parked reader: ${conns0} + 4 (${m.get("runnel_open_connections")} seen)`);
    assert.equal(m.get("runnel_live_readers"), 4);
    // an append answers the three long-polls; the SSE reader stays
    assert.equal((await post(url, "wake")).status, 204);
    const answers = await Promise.all(polls.map((p) => p.done));
    for (const a of answers) assert.deepEqual(a, { status: 200, body: "wake" });
    const m2 = await waitMetric((s) => s.get("runnel_live_readers") === 1, "the long-polls to be answered");
    assert.equal(m2.get("runnel_live_readers"), 1);
    sse.rq.destroy();
    const m3 = await waitMetric((s) => s.get("runnel_live_readers") === 0 && s.get("runnel_open_connections") === conns0, "the SSE reader to leave and connections to close");
    assert.equal(m3.get("runnel_open_connections"), conns0);
  });

  test("a long-poll the client aborts leaves the gauge", async () => {
    const url = v1("mx/live2");
    assert.equal((await put(url)).status, 201);
    const p = park(`${url}?offset=now&live=long-poll`);
    await waitMetric((s) => s.get("runnel_live_readers") === 1, "1 parked reader");
    p.rq.destroy();
    await waitMetric((s) => s.get("runnel_live_readers") === 0, "the aborted long-poll to leave");
  });
});

describe("log sync failures (test hook)", () => {
  test("a failed batch counts in runnel_wal_sync_failures_total and in batches, not in appends", async () => {
    const url = v1("mx/fail");
    assert.equal((await put(url)).status, 201);
    const a = await scrape(server.url);
    const hook = await req(`${server.url}/__runnel/test/fail-syncs?n=1`, { method: "POST" });
    assert.equal(hook.status, 204);
    const r = await post(url, "lost");
    assert.ok(r.status >= 500, `the append whose sync failed answered ${r.status}`);
    const ok = await post(url, "kept");
    assert.equal(ok.status, 204);
    const b = await scrape(server.url);
    const d = (n) => b.get(n) - a.get(n);
    assert.equal(d("runnel_wal_sync_failures_total"), 1);
    assert.equal(d("runnel_appends_total"), 1);
    assert.equal(d("runnel_append_bytes_total"), 4);
    assert.ok(d("runnel_wal_batches_total") >= 2);
    assert.equal(d("runnel_wal_sync_seconds_count"), d("runnel_wal_batches_total"));
    assert.equal(b.get(reqKey("ops", "POST", 204)) - a.get(reqKey("ops", "POST", 204)), 1);
    assert.equal(b.get(reqKey("v1", "POST", r.status)) - a.get(reqKey("v1", "POST", r.status)), 1);
  });
});

describe("subscription deliveries and failures", () => {
  // A webhook receiver answering `status` to every notification.
  async function receiver(status) {
    const seen = [];
    const srv = http.createServer((rq, rs) => {
      rq.resume();
      rq.on("end", () => {
        seen.push(Date.now());
        rs.writeHead(status, { "content-type": "application/json" });
        rs.end(JSON.stringify(status === 200 ? { done: true } : {}));
      });
    });
    await new Promise((r) => srv.listen(0, "127.0.0.1", r));
    return {
      url: `http://127.0.0.1:${srv.address().port}/hook`,
      seen,
      close: () => {
        srv.closeAllConnections();
        return new Promise((r) => srv.close(r));
      },
    };
  }

  test("a 200 receiver counts one delivery; a 500 receiver counts failures; route subscriptions is counted", async () => {
    const good = await receiver(200);
    const bad = await receiver(500);
    try {
      const a = await scrape(server.url);
      for (const [id, rcv, pattern] of [["mgood", good, "subok/*"], ["mbad", bad, "subbad/*"]]) {
        const r = await req(v1(`__ds/subscriptions/${id}`), {
          method: "PUT",
          headers: { "content-type": JSONT },
          body: JSON.stringify({ type: "webhook", pattern, webhook: { url: rcv.url } }),
        });
        assert.equal(r.status, 201, `subscription ${id}: ${r.status} ${r.text}`);
      }
      // a stream with data wakes the subscription matching it
      for (const p of ["subok/a", "subbad/a"]) {
        assert.equal((await put(v1(p))).status, 201);
        assert.equal((await post(v1(p), "event")).status, 204);
      }
      const b = await waitMetric(
        (s) => s.get("runnel_subscription_deliveries_total") - a.get("runnel_subscription_deliveries_total") >= 1 &&
          s.get("runnel_subscription_delivery_failures_total") - a.get("runnel_subscription_delivery_failures_total") >= 1,
        () => `one delivery and one failure (receivers saw ${good.seen.length} and ${bad.seen.length})\n${server.log}`,
      );
      const del = b.get("runnel_subscription_deliveries_total") - a.get("runnel_subscription_deliveries_total");
      const fail = b.get("runnel_subscription_delivery_failures_total") - a.get("runnel_subscription_delivery_failures_total");
      assert.equal(del, good.seen.length, "deliveries = notifications the 200 receiver answered");
      assert.equal(del, 1);
      assert.ok(fail >= 1 && fail <= bad.seen.length, `failures ${fail} vs attempts ${bad.seen.length}`);
      assert.equal(b.get(reqKey("subscriptions", "PUT", 201)) - a.get(reqKey("subscriptions", "PUT", 201)), 2);
    } finally {
      await req(v1("__ds/subscriptions/mgood"), { method: "DELETE" }).catch(() => {});
      await req(v1("__ds/subscriptions/mbad"), { method: "DELETE" }).catch(() => {});
      await good.close();
      await bad.close();
    }
  });
});

// A store past 65,536 map slots (45,876 streams or more) is walked for the
// scrape's gauges over several loop turns rather than in one (82 ms for a
// million streams measured in one turn, every other request waiting): the
// gauges stay exact, the walk's slices are counted, and requests that
// arrive meanwhile are served. The operator's overview (the console asks
// for it every 2 s) counts its streams with the same walk.
describe("the gauges of a large store", () => {
  const big = new Server({ args: [] });
  before(() => big.start());
  after(() => big.stop());
  const STREAMS = 50000;

  // PUTs of empty streams, pipelined over 8 connections (each socket's
  // requests written at once; its answers counted until all are in)
  async function createMany(from, to) {
    const { port } = new URL(big.url);
    const per = Math.ceil((to - from) / 8);
    await Promise.all(Array.from({ length: 8 }, (_, k) => new Promise((resolve, reject) => {
      const lo = from + k * per, hi = Math.min(to, lo + per);
      const sock = net.connect(Number(port), "127.0.0.1");
      let seen = "", created = 0, other = 0;
      sock.on("connect", () => {
        let text = "";
        for (let i = lo; i < hi; i++)
          text += `PUT /walk/s${i} HTTP/1.1\r\nHost: t\r\nContent-Type: ${TEXT}\r\nContent-Length: 0\r\n\r\n`;
        sock.write(text);
      });
      sock.on("data", (d) => {
        seen += d.toString("latin1");
        const lines = seen.split("\r\n");
        seen = lines.pop();
        for (const l of lines) {
          if (l.startsWith("HTTP/1.1 201")) created++;
          else if (l.startsWith("HTTP/1.1 ")) other++;
        }
        if (created + other === hi - lo) {
          sock.end();
          other ? reject(new Error(`${other} creates not answered 201`)) : resolve();
        }
      });
      sock.on("error", reject);
    })));
  }

  test("50,000 streams: exact gauges from a walk over several loop turns", async () => {
    await createMany(0, STREAMS);
    for (let i = 0; i < 300; i += 3) assert.equal((await post(`${big.url}/walk/s${i}`, "xyz")).status, 204);
    const a = await scrape(big.url);
    assert.equal(a.get("runnel_streams"), STREAMS);
    assert.equal(a.get("runnel_hot_bytes"), 300, "three bytes in each of 100");
    // 50,000 streams hold 131,072 slots: 32 slices of 4,096
    assert.ok(a.get("runnel_gauge_walk_slices_total") >= 32, `${a.get("runnel_gauge_walk_slices_total")} slices`);
    assert.equal(a.get("runnel_gauge_walks_total"), 1);
    // a scrape and requests sent with it: all answered, the gauges exact
    const [b, ...heads] = await Promise.all([
      scrape(big.url),
      ...Array.from({ length: 20 }, (_, i) => req(`${big.url}/walk/s${i}`, { method: "HEAD" })),
    ]);
    for (const h of heads) assert.equal(h.status, 200);
    assert.equal(b.get("runnel_streams"), STREAMS);
    assert.equal(b.get("runnel_gauge_walks_total"), 2);
    const slices = b.get("runnel_gauge_walk_slices_total") - a.get("runnel_gauge_walk_slices_total");
    assert.ok(slices >= 32, `${slices} slices`);
    // deleted streams leave the sums
    for (let i = 0; i < 150; i++) assert.equal((await req(`${big.url}/walk/s${i}`, { method: "DELETE" })).status, 204);
    const c = await scrape(big.url);
    assert.equal(c.get("runnel_streams"), STREAMS - 150);
    assert.equal(c.get("runnel_hot_bytes"), 150, "the 50 streams with bytes left");
    // the operator's overview counts its streams with the same walk
    const n = await req(`${big.url}/__runnel/admin/node`);
    assert.equal(n.status, 200, n.text);
    assert.equal(JSON.parse(n.text).streams, STREAMS - 150);
    const d = await scrape(big.url);
    assert.equal(d.get("runnel_gauge_walks_total") - c.get("runnel_gauge_walks_total"), 2, "the overview's walk and this scrape's");
    assert.ok(d.get("runnel_gauge_walk_slices_total") - c.get("runnel_gauge_walk_slices_total") >= 64);
  });

  // The operator's listings walked the store in one turn per page (80 ms
  // for a million streams); they now walk it as the gauges do. Runs on the
  // store the case above left: s150 to s49999 in bucket "walk", 50 of them
  // with 3 bytes.
  test("50,000 streams: the operator's listings walk them over several loop turns", async () => {
    const left = STREAMS - 150;
    const admin = async (path) => {
      const r = await req(`${big.url}/__runnel/admin/${path}`);
      assert.equal(r.status, 200, r.text);
      return JSON.parse(r.text);
    };
    const a = await scrape(big.url);
    // a page of buckets, a page of usage and HEADs sent together: all answered
    const [buckets, usage, ...heads] = await Promise.all([
      admin("buckets"), admin("usage"),
      ...Array.from({ length: 20 }, (_, i) => req(`${big.url}/walk/s${200 + i}`, { method: "HEAD" })),
    ]);
    for (const h of heads) assert.equal(h.status, 200);
    for (const page of [buckets, usage]) {
      const walk = page.buckets.find((x) => x.bucket === "walk");
      assert.equal(walk?.streams, left, JSON.stringify(page));
      assert.equal(walk.bytes.hot, 150);
    }
    const b = await scrape(big.url);
    assert.equal(b.get("runnel_admin_walks_total") - a.get("runnel_admin_walks_total"), 2);
    const slices = b.get("runnel_admin_walk_slices_total") - a.get("runnel_admin_walk_slices_total");
    assert.ok(slices >= 64, `${slices} slices for two walks of 32`);
    // every stream once and in key order, in pages of 1,000, each page a walk
    const seen = [];
    let cursor = null, pages = 0;
    do {
      const p = await admin(`buckets/walk/streams?limit=1000${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
      seen.push(...p.streams.map((x) => x.stream));
      cursor = p.next_cursor;
      assert.ok(++pages <= 50, "the listing ends");
    } while (cursor);
    const byteOrder = (x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y));
    assert.deepEqual(seen, Array.from({ length: left }, (_, i) => `s${150 + i}`).sort(byteOrder));
    const c = await scrape(big.url);
    assert.equal(c.get("runnel_admin_walks_total") - b.get("runnel_admin_walks_total"), pages);
    assert.ok(c.get("runnel_admin_walk_slices_total") - b.get("runnel_admin_walk_slices_total") >= 32 * pages);
  });
});
