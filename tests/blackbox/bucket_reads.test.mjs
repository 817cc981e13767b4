// Bucket surface: read path parameters and representations.
// Covers extensions.txt §9 Read Path: §9.1 Long-Poll Timeout (timeout_ms),
// §9.2 Leader Consistency (consistency=local|leader), §9.3 Response Size
// (max_bytes and the server cap: partial responses), §9.5 Binary SSE
// (base64 data events, Stream-Data-Content-Type, control offsets), over the
// base protocol's long-poll and SSE (PROTOCOL.md §5.7, §5.8).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import {
  assertError, get, head, mediaType, openSse, post, put, readPages, sleep,
} from "./lib/bucket.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

let n = 0;
async function stream(body, type = "text/plain") {
  const url = `${server.url}/readb/s${++n}`;
  const r = await put(url, { type, body });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  return { url, tail: r.headers.get("stream-next-offset") };
}
async function timed(p) {
  const t0 = performance.now();
  const r = await p;
  return { r, ms: performance.now() - t0 };
}
function appendOk(r) {
  assert.ok(r.status === 204 || r.status === 200, `append answered ${r.status} ${r.text}`);
  return r;
}

describe("§9.1 timeout_ms", () => {
  test("the default is 1000 ms: a long-poll at the tail answers 204 after about a second", async () => {
    const { url, tail } = await stream("x");
    const { r, ms } = await timed(get(`${url}?offset=${tail}&live=long-poll`));
    assert.equal(r.status, 204);
    assert.ok(ms >= 850 && ms < 5000, `waited ${Math.round(ms)} ms, expected about 1000`);
    assert.equal(r.headers.get("stream-up-to-date"), "true");
    assert.equal(r.headers.get("stream-next-offset"), tail);
    assert.ok(r.headers.get("stream-cursor"), "an open stream's 204 carries Stream-Cursor");
  });

  test("timeout_ms bounds the wait", async () => {
    const { url, tail } = await stream("x");
    const { r, ms } = await timed(get(`${url}?offset=${tail}&live=long-poll&timeout_ms=250`));
    assert.equal(r.status, 204);
    assert.ok(ms >= 200 && ms < 850, `waited ${Math.round(ms)} ms, expected about 250`);
  });

  test("timeout_ms=0 is clamped to 1 ms, not rejected and not the default", async () => {
    const { url, tail } = await stream("x");
    const { r, ms } = await timed(get(`${url}?offset=${tail}&live=long-poll&timeout_ms=0`));
    assert.equal(r.status, 204);
    assert.ok(ms < 700, `waited ${Math.round(ms)} ms, expected about 1`);
  });

  test("an unparseable timeout_ms means the default (1000 ms)", async () => {
    const { url, tail } = await stream("x");
    const values = ["abc", "", "10ms", "1.5", "0x10", "1e3", "%20"];
    const results = await Promise.all(values.map((v) => timed(get(`${url}?offset=${tail}&live=long-poll&timeout_ms=${v}`))));
    results.forEach(({ r, ms }, i) => {
      assert.equal(r.status, 204, `timeout_ms=${values[i]} answered ${r.status}`);
      assert.ok(ms >= 850 && ms < 5000, `timeout_ms=${values[i]} waited ${Math.round(ms)} ms, expected about 1000`);
    });
  });

  test("a timeout_ms above 60000 is clamped, not rejected: the long-poll keeps waiting past the default", async () => {
    const { url, tail } = await stream("x");
    const lp = timed(get(`${url}?offset=${tail}&live=long-poll&timeout_ms=120000`));
    await sleep(1600);
    appendOk(await post(url, "late"));
    const { r, ms } = await lp;
    assert.equal(r.status, 200, `answered ${r.status} after ${Math.round(ms)} ms`);
    assert.equal(r.text, "late");
    assert.ok(ms >= 1500, `answered after ${Math.round(ms)} ms`);
  });

  test("a long-poll with data available answers at once, whatever timeout_ms says", async () => {
    const { url } = await stream("abc");
    const { r, ms } = await timed(get(`${url}?offset=-1&live=long-poll&timeout_ms=60000`));
    assert.equal(r.status, 200);
    assert.equal(r.text, "abc");
    assert.ok(ms < 1000, `took ${Math.round(ms)} ms`);
  });

  test("catch-up reads ignore timeout_ms", async () => {
    const { url, tail } = await stream("abc");
    for (const v of ["abc", "0", "5"]) {
      const r = await get(`${url}?offset=-1&timeout_ms=${v}`);
      assert.equal(r.status, 200, `timeout_ms=${v} answered ${r.status}`);
      assert.equal(r.text, "abc");
    }
    const { r, ms } = await timed(get(`${url}?offset=${tail}&timeout_ms=5000`));
    assert.equal(r.status, 200, "a catch-up read at the tail answers at once");
    assert.ok(ms < 1000, `took ${Math.round(ms)} ms`);
  });

  test("SSE ignores timeout_ms: an SSE read with timeout_ms=1 still delivers later data", async () => {
    const { url, tail } = await stream("x");
    const sse = await openSse(`${url}?offset=${tail}&live=sse&timeout_ms=1`);
    try {
      assert.equal(sse.status, 200);
      await sleep(300);
      appendOk(await post(url, "later"));
      const ok = await sse.waitFor((ev) => ev.some((e) => e.type === "data" && e.data === "later"), 5000);
      assert.ok(ok, `events: ${JSON.stringify(sse.events)}`);
    } finally {
      sse.close();
    }
  });
});

describe("§9.2 consistency", () => {
  test("local and leader are accepted; leader reflects every acknowledged append", async () => {
    const { url } = await stream("a");
    for (let i = 0; i < 5; i++) {
      appendOk(await post(url, String(i)));
      const r = await get(`${url}?offset=-1&consistency=leader`);
      assert.equal(r.status, 200);
      assert.equal(r.text, "a" + "01234".slice(0, i + 1));
    }
    const l = await get(`${url}?offset=-1&consistency=local`);
    assert.equal(l.status, 200);
    assert.equal(l.text, "a01234");
  });

  test("any other value is rejected with 400 INVALID_QUERY", async () => {
    const { url } = await stream("a");
    for (const v of ["foo", "LEADER", "Local", "strong", "leader,local", "1"]) {
      assertError(await get(`${url}?offset=-1&consistency=${v}`), 400, "INVALID_QUERY", { what: `consistency=${v}` });
    }
  });

  test("consistency=leader with live is rejected with 400 INVALID_QUERY", async () => {
    const { url, tail } = await stream("a");
    assertError(await get(`${url}?offset=${tail}&live=long-poll&consistency=leader&timeout_ms=100`), 400, "INVALID_QUERY", { what: "leader + long-poll" });
    assertError(await get(`${url}?offset=${tail}&live=sse&consistency=leader`), 400, "INVALID_QUERY", { what: "leader + sse" });
    // local with live is fine.
    const r = await get(`${url}?offset=${tail}&live=long-poll&consistency=local&timeout_ms=100`);
    assert.equal(r.status, 204);
  });
});

describe("§9.3 max_bytes", () => {
  test("a partial response has no Stream-Up-To-Date and a Stream-Next-Offset just past its bytes", async () => {
    const { url } = await stream("abcdefghij");
    const p1 = await get(`${url}?offset=-1&max_bytes=4`);
    assert.equal(p1.status, 200);
    assert.equal(p1.text, "abcd");
    assert.notEqual(p1.headers.get("stream-up-to-date"), "true");
    const o1 = p1.headers.get("stream-next-offset");
    const p2 = await get(`${url}?offset=${o1}&max_bytes=4`);
    assert.equal(p2.text, "efgh");
    assert.notEqual(p2.headers.get("stream-up-to-date"), "true");
    const p3 = await get(`${url}?offset=${p2.headers.get("stream-next-offset")}&max_bytes=4`);
    assert.equal(p3.text, "ij");
    assert.equal(p3.headers.get("stream-up-to-date"), "true");
    assert.equal(p3.headers.get("stream-next-offset"), (await head(url)).headers.get("stream-next-offset"));
  });

  test("max_bytes of one byte walks the stream a byte at a time", async () => {
    const body = "héllo"; // 6 bytes, one of them split in two
    const { url } = await stream(body);
    const pages = await readPages(url, { query: "&max_bytes=1" });
    assert.equal(pages.length, 6);
    for (const p of pages) assert.equal(p.body.length, 1);
    assert.equal(Buffer.concat(pages.map((p) => p.body)).toString("utf8"), body);
  });

  test("max_bytes at or above what remains returns it all, up to date", async () => {
    const { url } = await stream("abcdef");
    for (const m of [6, 7, 1000000000]) {
      const r = await get(`${url}?offset=-1&max_bytes=${m}`);
      assert.equal(r.status, 200);
      assert.equal(r.text, "abcdef");
      assert.equal(r.headers.get("stream-up-to-date"), "true", `max_bytes=${m}`);
    }
  });

  test("on a JSON stream a partial response may end inside a message; following it reassembles the exact bytes", async () => {
    const { url } = await stream('[{"alpha":1,"beta":[1,2,3]},"\\ud800",{"g":"h i"}]', "application/json");
    const want = '{"alpha":1,"beta":[1,2,3]}\n"\\ud800"\n{"g":"h i"}\n';
    const pages = await readPages(url, { query: "&max_bytes=5" });
    for (const p of pages.slice(0, -1)) {
      assert.equal(p.body.length, 5);
      assert.notEqual(p.headers.get("stream-up-to-date"), "true");
      assert.equal(mediaType(p.headers.get("content-type")), "application/x-ndjson");
    }
    assert.ok(pages.some((p) => !p.text.endsWith("\n")), "some page ends inside a message");
    assert.equal(pages.map((p) => p.text).join(""), want);
  });

  test("a partial read of a closed stream carries no Stream-Closed; the last page does", async () => {
    const { url } = await stream("abcdef");
    assert.equal((await post(url, undefined, { type: null, headers: { "stream-closed": "true" } })).status, 204);
    const pages = await readPages(url, { query: "&max_bytes=4" });
    assert.equal(pages.length, 2);
    assert.notEqual(pages[0].headers.get("stream-closed"), "true");
    assert.equal(pages[1].headers.get("stream-closed"), "true");
    assert.equal(pages.map((p) => p.text).join(""), "abcdef");
  });

  test("max_bytes bounds a long-poll answer", async () => {
    const { url, tail } = await stream("x");
    const lp = get(`${url}?offset=${tail}&live=long-poll&timeout_ms=5000&max_bytes=3`);
    await sleep(200);
    appendOk(await post(url, "hello world"));
    const r = await lp;
    assert.equal(r.status, 200);
    assert.equal(r.text, "hel");
    assert.notEqual(r.headers.get("stream-up-to-date"), "true");
    const rest = await get(`${url}?offset=${r.headers.get("stream-next-offset")}`);
    assert.equal(rest.text, "lo world");
  });

  test("max_bytes bounds each SSE data event (text stream)", async () => {
    const body = "the quick brown fox jumps";
    const { url } = await stream(body);
    const sse = await openSse(`${url}?offset=-1&live=sse&max_bytes=5`);
    try {
      assert.equal(sse.status, 200);
      const text = () => sse.events.filter((e) => e.type === "data").map((e) => e.data).join("");
      assert.ok(await sse.waitFor(() => text() === body, 5000), `got ${JSON.stringify(text())}`);
      for (const e of sse.events.filter((e) => e.type === "data")) {
        assert.ok(Buffer.byteLength(e.data) <= 5, `data event of ${Buffer.byteLength(e.data)} bytes: ${JSON.stringify(e.data)}`);
      }
    } finally {
      sse.close();
    }
  });

  test("a response shortened by the server's cap is partial too, and following it reassembles the stream", async () => {
    // 9 MiB + 123 bytes: more than any cap of 8 MiB or less.
    const size = 9 * 1024 * 1024 + 123;
    const data = Buffer.alloc(size);
    for (let i = 0; i < size; i++) data[i] = (i * 7 + (i >> 10)) & 0xff;
    const { url } = await stream(undefined, "application/octet-stream");
    appendOk(await post(url, data, { type: "application/octet-stream" }));
    const pages = await readPages(url, { query: "&max_bytes=100000000" });
    // 9 MiB is above the 8 MiB cap §9.3 names, so some response is capped.
    assert.ok(pages.length >= 2, `a 9 MiB stream came back in ${pages.length} response(s)`);
    assert.ok(pages[0].body.length <= 8 * 1024 * 1024, `first response holds ${pages[0].body.length} bytes`);
    for (const p of pages.slice(0, -1)) {
      assert.notEqual(p.headers.get("stream-up-to-date"), "true", "a capped page is not up to date");
      assert.ok(p.body.length > 0);
    }
    assert.equal(pages.at(-1).headers.get("stream-up-to-date"), "true");
    assert.ok(Buffer.concat(pages.map((p) => p.body)).equals(data), "the pages reassemble the exact bytes");
  });
});

describe("§9.5 binary SSE", () => {
  function decodeB64(e) {
    const s = e.data.replace(/[\r\n]/g, "");
    assert.match(s, /^[A-Za-z0-9+/]*={0,2}$/, `standard base64: ${s}`);
    assert.equal(s.length % 4, 0, "base64 length is a multiple of 4");
    return Buffer.from(s, "base64");
  }

  test("a binary stream's SSE is base64 with Stream-Data-Content-Type; each data event is a contiguous range and its control names the offset after it", async () => {
    const data = Buffer.from(Array.from({ length: 300 }, (_, i) => (i * 13) & 0xff));
    const { url } = await stream(data, "application/octet-stream");
    const sse = await openSse(`${url}?offset=-1&live=sse&max_bytes=64`);
    try {
      assert.equal(sse.status, 200);
      const h = sse.res.headers;
      assert.equal(mediaType(h.get("content-type")), "text/event-stream");
      assert.equal(h.get("stream-sse-data-encoding"), "base64");
      assert.equal(h.get("stream-data-content-type"), "application/octet-stream");
      const decodedLen = () => sse.events.filter((e) => e.type === "data").reduce((a, e) => a + decodeB64(e).length, 0);
      assert.ok(await sse.waitFor((ev) => decodedLen() >= data.length && ev.at(-1).type === "control", 5000), "all bytes arrive");
      let pos = 0;
      const chunks = [];
      for (let i = 0; i < sse.events.length; i++) {
        const e = sse.events[i];
        if (e.type !== "data") continue;
        const bytes = decodeB64(e);
        assert.ok(bytes.length <= 64, `event of ${bytes.length} bytes with max_bytes=64`);
        assert.ok(bytes.equals(data.subarray(pos, pos + bytes.length)), `data event at byte ${pos} is the next contiguous range`);
        chunks.push(bytes);
        pos += bytes.length;
        const next = sse.events[i + 1];
        assert.equal(next?.type, "control", "a data event is followed by a control event");
        const ctl = JSON.parse(next.data);
        assert.ok(ctl.streamNextOffset, "control carries streamNextOffset");
        // streamNextOffset is just past the decoded bytes: reading from it yields the rest.
        const rest = await get(`${url}?offset=${ctl.streamNextOffset}`);
        assert.equal(rest.status, 200);
        assert.ok(rest.body.equals(data.subarray(pos)), `reading from streamNextOffset after byte ${pos} returns exactly the rest`);
      }
      assert.ok(chunks.length >= 5, `max_bytes=64 splits 300 bytes into ${chunks.length} events`);
      assert.ok(Buffer.concat(chunks).equals(data));
    } finally {
      sse.close();
    }
  });

  test("live appends arrive as base64 data events", async () => {
    const { url, tail } = await stream(undefined, "application/octet-stream");
    const sse = await openSse(`${url}?offset=${tail}&live=sse`);
    try {
      assert.equal(sse.status, 200);
      const payload = Buffer.from([0, 1, 2, 0xff, 0xfe, 10, 13, 0x80]);
      await sleep(100);
      appendOk(await post(url, payload, { type: "application/octet-stream" }));
      const ok = await sse.waitFor((ev) => ev.some((e) => e.type === "data" && e.data.length > 0) && ev.at(-1).type === "control", 5000);
      assert.ok(ok, `events: ${JSON.stringify(sse.events)}`);
      const got = Buffer.concat(sse.events.filter((e) => e.type === "data").map(decodeB64));
      assert.ok(got.equals(payload), `decoded ${got.toString("hex")}`);
      const ctl = sse.controls.at(-1);
      assert.equal(ctl.streamNextOffset, (await head(url)).headers.get("stream-next-offset"));
    } finally {
      sse.close();
    }
  });

  test("Stream-Data-Content-Type is the stream's content type for any binary type", async () => {
    for (const type of ["application/x-protobuf", "image/png", "application/vnd.custom+cbor"]) {
      const { url } = await stream(Buffer.from([1, 2, 3]), type);
      const sse = await openSse(`${url}?offset=-1&live=sse`);
      try {
        assert.equal(sse.status, 200);
        assert.equal(sse.res.headers.get("stream-sse-data-encoding"), "base64", type);
        assert.equal(mediaType(sse.res.headers.get("stream-data-content-type")), type);
        assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "data"), 5000));
        assert.ok(decodeB64(sse.events.find((e) => e.type === "data")).equals(Buffer.from([1, 2, 3])));
      } finally {
        sse.close();
      }
    }
  });

  test("a text/* stream's SSE is not base64", async () => {
    const { url } = await stream("plain text");
    const sse = await openSse(`${url}?offset=-1&live=sse`);
    try {
      assert.equal(sse.status, 200);
      assert.equal(sse.res.headers.get("stream-sse-data-encoding"), null);
      assert.ok(await sse.waitFor((ev) => ev.some((e) => e.type === "data" && e.data === "plain text"), 5000));
    } finally {
      sse.close();
    }
  });
});
