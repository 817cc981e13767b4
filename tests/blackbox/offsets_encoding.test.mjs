// Percent-encoded offsets in path segments (issue 13, item 5).
// Covers extensions.txt §8 (clients and servers MUST apply URL decoding to
// offsets in path segments) for every resource with an offset in its path:
// snapshot publish and read (§2.2, §2.5), retention (§2.2), staged parts and
// their commit (§2.2), and the immutable chunk and snapshot resources
// (§4.1, whose token is a path segment too). An offset encoded in every
// character (upper or lower case hex) or in only some of them behaves
// exactly as the plain form; a malformed escape is a typed 400 (§11).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import { assertError, get, head, req } from "./lib/bucket.mjs";
import { append, createStream, h, offsetAfter, snapshotDigest, stopAndRemove } from "./lib/snap.mjs";

const OCTET = "application/octet-stream";
const server = new Server();
before(() => server.start());
after(() => stopAndRemove(server));

const pct = (s, lower = false) =>
  [...Buffer.from(s, "latin1")].map((b) => `%${b.toString(16).padStart(2, "0")[lower ? "toLowerCase" : "toUpperCase"]()}`).join("");

// Ways to write a path segment: every character escaped (either case), or
// only some (the first 20 characters, and the "_" alone).
const ENCODINGS = {
  "every character, upper-case hex": (s) => pct(s),
  "every character, lower-case hex": (s) => pct(s, true),
  "the first 20 characters": (s) => pct(s.slice(0, 20)) + s.slice(20),
  "only the underscore": (s) => s.replace("_", "%5F"),
};

// Requests with the offset segment sent as given (the lib's helpers encode
// it, which would turn "%" into "%25").
const publish = (url, seg, body) =>
  req(`${url}/snapshot/${seg}`, { method: "PUT", headers: { "content-type": OCTET }, body });
const stage = (url, seg, body) =>
  req(`${url}/snapshot/${seg}/parts`, { method: "POST", headers: { "content-type": OCTET }, body });
const commit = (url, seg, ids, digest) =>
  req(`${url}/snapshot/${seg}`, {
    method: "PUT",
    headers: { "content-type": OCTET, "stream-snapshot-parts": String(ids.length), "stream-snapshot-digest": digest },
    body: ids.map((i) => `${i}\n`).join(""),
  });

let n = 0;
async function stream() {
  const url = `${server.url}/encoded/s${++n}`;
  const c = await createStream(url, { type: OCTET });
  await append(url, Buffer.from("0123456789abcdefghij"), OCTET);
  return { url, token: c.token, first: c.tail, x: await offsetAfter(url, 10) };
}

describe("§8 offsets in path segments are percent-decoded", () => {
  for (const [how, encode] of Object.entries(ENCODINGS)) {
    test(`${how}: publish, snapshot reads, immutable reads and retention behave as with the plain offset`, async () => {
      const { url, token, first, x } = await stream();
      const ex = encode(x);
      assert.notEqual(ex, x);

      const pub = await publish(url, ex, "snap-body");
      assert.equal(pub.status, 204, `publish at ${ex} answered ${pub.status} ${pub.text}`);
      assert.equal(h(pub, "stream-snapshot-digest"), snapshotDigest(OCTET, "snap-body"));
      assert.equal(h(pub, "stream-snapshot-offset"), x, "the snapshot is at the decoded offset");
      const again = await publish(url, x, "snap-body");
      assert.equal(again.status, 204, "the plain form repeats the publish");
      assert.equal(h(again, "stream-snapshot-digest"), h(pub, "stream-snapshot-digest"));

      const plainRead = await get(`${url}/snapshot/${x}`);
      for (const path of [`snapshot/${ex}`, `incarnation/${token}/snapshot/${ex}`, `incarnation/${encode(token)}/snapshot/${ex}`]) {
        const r = await get(`${url}/${path}`);
        assert.equal(r.status, 200, `GET ${path} answered ${r.status} ${r.text}`);
        assert.equal(r.text, "snap-body");
        assert.equal(h(r, "etag"), h(plainRead, "etag"), `${path}: the ETag of the plain form`);
        assert.equal(h(r, "stream-snapshot-offset"), x);
      }

      const plainChunk = await get(`${url}/incarnation/${token}/chunk/${x}`);
      for (const path of [`incarnation/${token}/chunk/${ex}`, `incarnation/${encode(token)}/chunk/${encode(first)}`]) {
        const r = await get(`${url}/${path}`);
        assert.equal(r.status, 200, `GET ${path} answered ${r.status} ${r.text}`);
        if (path.endsWith(ex)) {
          assert.equal(r.text, plainChunk.text);
          assert.equal(h(r, "etag"), h(plainChunk, "etag"));
          assert.equal(h(r, "stream-offset"), x);
        } else {
          assert.equal(r.text, "0123456789abcdefghij");
          assert.equal(h(r, "stream-offset"), first);
        }
      }

      const ret = await req(`${url}/retention/${ex}`, { method: "PUT" });
      assert.equal(ret.status, 204, `retention at ${ex} answered ${ret.status} ${ret.text}`);
      assert.equal(h(ret, "stream-retained-offset"), x);
      assert.equal(h(await head(url), "stream-retained-offset"), x);
    });

    test(`${how}: a part staged and committed at an encoded offset`, async () => {
      const { url, x } = await stream();
      const ex = encode(x);
      const staged = await stage(url, ex, "part-body");
      assert.equal(staged.status, 201, `a part at ${ex} answered ${staged.status} ${staged.text}`);
      const id = h(staged, "stream-snapshot-part");
      const r = await commit(url, ex, [id], snapshotDigest(OCTET, "part-body"));
      assert.equal(r.status, 204, `commit at ${ex} answered ${r.status} ${r.text}`);
      assert.equal(h(r, "stream-snapshot-offset"), x);
    });
  }
});

describe("§8 / §11 a malformed escape in an offset segment is a typed 400", () => {
  // Each: a raw segment that does not decode (or decodes to no offset).
  const BAD = (x) => ({
    "a lone %": `${x.slice(0, 10)}%`,
    "a truncated escape": `${x}%4`,
    "a non-hex escape": `%zz${x.slice(1)}`,
    "an escape of a non-digit": `${x.slice(0, 5)}%41${x.slice(6)}`,
  });

  test("publish, snapshot read, retention, part and commit: 400 INVALID_OFFSET; nothing changes", async () => {
    const { url, x } = await stream();
    for (const [what, seg] of Object.entries(BAD(x))) {
      assertError(await publish(url, seg, "b"), 400, "INVALID_OFFSET", { what: `publish, ${what}` });
      assertError(await get(`${url}/snapshot/${seg}`), 400, "INVALID_OFFSET", { what: `snapshot read, ${what}` });
      assertError(await req(`${url}/retention/${seg}`, { method: "PUT" }), 400, "INVALID_OFFSET", { what: `retention, ${what}` });
      assertError(await stage(url, seg, "p"), 400, "INVALID_OFFSET", { what: `part, ${what}` });
      assertError(await commit(url, seg, ["id"], snapshotDigest(OCTET, "b")), 400, "INVALID_OFFSET", { what: `commit, ${what}` });
    }
    const hd = await head(url);
    assert.equal(h(hd, "stream-snapshot-offset"), null, "nothing was published");
  });

  test("the immutable chunk and snapshot: 400 INVALID_RESOURCE for a bad offset or token", async () => {
    const { url, token, x } = await stream();
    for (const [what, seg] of Object.entries(BAD(x))) {
      for (const kind of ["chunk", "snapshot"]) {
        assertError(await get(`${url}/incarnation/${token}/${kind}/${seg}`), 400, "INVALID_RESOURCE", { what: `${kind} offset, ${what}` });
      }
    }
    for (const seg of [`${token}%`, `%zz${token.slice(1)}`]) {
      for (const kind of ["chunk", "snapshot"]) {
        assertError(await get(`${url}/incarnation/${seg}/${kind}/${x}`), 400, "INVALID_RESOURCE", { what: `${kind} token ${seg}` });
      }
    }
  });
});
