// Paging the operator's listings across more than 10,000 streams
// (docs/ADMIN.md "Pages"): 10,000 streams of one bucket walked in pages of
// 1,000 and of 997 (a limit that does not divide the count), every stream
// exactly once and in key order; a prefix selecting a tenth of them; a
// cursor that stays valid while streams before it are deleted and after it
// created; 1,200 buckets paged by 100. The streams are made with 32
// requests in flight (about 4 s on the shared 2-core machine); the pages
// take well under a second. The streams have no bytes, so no stream file
// is made for them.
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { del, put, req } from "./lib/bucket.mjs";

const server = new Server();
const N = 10000;
const names = Array.from({ length: N }, (_, i) => `s${String(i).padStart(5, "0")}`);

// Runs make(i) for i in [0, n) with `width` in flight.
async function parallel(n, width, make) {
  let next = 0;
  const worker = async () => {
    for (let i; (i = next++) < n; ) await make(i);
  };
  await Promise.all(Array.from({ length: width }, worker));
}

before(async () => {
  await server.start();
  await parallel(N, 32, async (i) => {
    const r = await put(`${server.url}/many/${names[i]}`); /* no body: no stream files to make */
    assert.equal(r.status, 201, r.text);
  });
  await parallel(1200, 32, async (i) => {
    const r = await put(`${server.url}/b${String(i).padStart(4, "0")}/s`);
    assert.equal(r.status, 201, r.text);
  });
});
after(async () => {
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
});

async function page(path) {
  const r = await req(`${server.url}/__runnel/admin/${path}`);
  assert.equal(r.status, 200, r.text);
  return JSON.parse(r.text);
}

// Every entry of a listing, page by page; asserts each page's size.
async function walk(base, field, limit) {
  const seen = [];
  let cursor = null;
  for (let pages = 0; ; pages++) {
    assert.ok(pages < 100000, "the listing ends");
    const sep = base.includes("?") ? "&" : "?";
    const p = await page(`${base}${sep}limit=${limit}${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`);
    const list = p[field];
    assert.ok(list.length <= limit, `a page holds at most ${limit}`);
    assert.ok(list.length > 0 || pages === 0, "a next_cursor never leads to an empty page");
    seen.push(...list);
    if (p.next_cursor === null) return seen;
    assert.equal(list.length, limit, "only the last page is short");
    cursor = p.next_cursor;
  }
}

const byteOrder = (a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b));

test("10,000 streams in pages of 1,000 and 997: each once, in order", async () => {
  for (const limit of [1000, 997]) {
    const got = (await walk("buckets/many/streams", "streams", limit)).map((s) => s.stream);
    assert.equal(got.length, N);
    assert.deepEqual(got, [...names].sort(byteOrder));
  }
});

test("a prefix selects its streams across pages", async () => {
  const got = (await walk("buckets/many/streams?prefix=s03", "streams", 300)).map((s) => s.stream);
  assert.deepEqual(got, names.filter((n) => n.startsWith("s03")));
});

test("a cursor holds while streams before it go and new ones come after it", async () => {
  const first = await page("buckets/many/streams?limit=500");
  const last = first.streams.at(-1).stream;
  assert.equal(last, "s00499");
  for (const n of ["s00000", "s00001", "s00499"]) assert.equal((await del(`${server.url}/many/${n}`)).status, 204);
  assert.equal((await put(`${server.url}/many/s00499x`)).status, 201);
  const next = await page(`buckets/many/streams?limit=3&cursor=${encodeURIComponent(first.next_cursor)}`);
  assert.deepEqual(next.streams.map((s) => s.stream), ["s00499x", "s00500", "s00501"]);
});

test("1,200 buckets in pages of 100", async () => {
  const got = (await walk("buckets", "buckets", 100)).map((b) => b.bucket);
  const want = ["many", ...Array.from({ length: 1200 }, (_, i) => `b${String(i).padStart(4, "0")}`)].sort(byteOrder);
  assert.deepEqual(got, want);
  const usage = (await walk("usage", "buckets", 250)).map((b) => b.bucket);
  assert.deepEqual(usage, want);
});
