// Bucket surface: JSON streams.
// Covers extensions.txt "JSON Message Text" (validation, whitespace removal,
// byte-exact member/number/string text, one level of array flattening, the
// depth limit, all-or-nothing rejection, offsets over the stored text) and
// §9.4 JSON Stream Reads (NDJSON catch-up and long-poll, HEAD content type,
// SSE Stream-Data-Content-Type), over the base protocol's JSON mode (§9.1).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Server } from "./lib/server.mjs";
import {
  assertError, get, head, mediaType, openSse, post, put, readPages, req,
} from "./lib/bucket.mjs";

const server = new Server();
before(() => server.start());
after(() => server.stop());

const JSON_T = "application/json";
let n = 0;
// A fresh JSON stream URL in bucket "jsonb".
async function jsonStream(body, type = JSON_T) {
  const url = `${server.url}/jsonb/s${++n}`;
  const r = await put(url, { type, body });
  assert.equal(r.status, 201, `create answered ${r.status} ${r.text}`);
  return url;
}
// The whole stored NDJSON text of a stream.
async function stored(url) {
  const pages = await readPages(url);
  return Buffer.concat(pages.map((p) => p.body)).toString("utf8");
}
async function tail(url) {
  const h = await head(url);
  assert.equal(h.status, 200);
  return h.headers.get("stream-next-offset");
}
async function appendOk(url, body, type = JSON_T) {
  const r = await post(url, body, { type });
  assert.ok(r.status === 204 || r.status === 200, `append of ${JSON.stringify(String(body).slice(0, 80))} answered ${r.status} ${r.text}`);
  return r;
}
// Asserts a 400 for `body` and that the stream is unchanged.
async function rejected(url, body, what) {
  const before = await tail(url);
  const beforeText = await stored(url);
  const r = await post(url, body, { type: JSON_T });
  assertError(r, 400, undefined, { what: `POST ${what}` });
  assert.equal(await tail(url), before, `tail unchanged after ${what}`);
  assert.equal(await stored(url), beforeText, `content unchanged after ${what}`);
}

const deepObj = (d) => (d === 1 ? "{}" : `{"a":${deepObj(d - 1)}}`); // depth d
const deepArr = (d) => "[".repeat(d) + "]".repeat(d); // depth d

describe("JSON Message Text: storage", () => {
  test("insignificant whitespace is removed, whitespace inside strings is kept", async () => {
    const url = await jsonStream();
    await appendOk(url, ' \r\n\t{ "a" : [ 1 , 2 ] ,\r\n\t"b c" : "x  y\\t z" , "d":{ } }\n ');
    assert.equal(await stored(url), '{"a":[1,2],"b c":"x  y\\t z","d":{}}\n');
  });

  test("object members keep their order and duplicates", async () => {
    const url = await jsonStream();
    await appendOk(url, '{"b":1,"a":2,"a":3}');
    await appendOk(url, '{ "z" : 1 , "z" : 1 , "y" : { "q":0,"q":0 } }');
    assert.equal(await stored(url), '{"b":1,"a":2,"a":3}\n{"z":1,"z":1,"y":{"q":0,"q":0}}\n');
  });

  test("number text is stored as written (1.50e3, 1e400, -0, 0.10, 1E+2, big integers)", async () => {
    const url = await jsonStream();
    const nums = ["1.50e3", "1e400", "-0", "0.10", "1E+2", "-1.5E-7", "123456789012345678901234567890", "1e-400", "0", "-0.0e0"];
    for (const x of nums) await appendOk(url, x);
    await appendOk(url, '{"n":1.50e3,"m":[1e400, -0.0]}');
    assert.equal(await stored(url), nums.map((x) => x + "\n").join("") + '{"n":1.50e3,"m":[1e400,-0.0]}\n');
  });

  test("string literal text is stored as written: escapes are not decoded or re-encoded", async () => {
    const url = await jsonStream();
    const strs = ['"\\u00e9"', '"é"', '"\\u00E9"', '"\\/"', '"/"', '"\\"q\\""', '"\\ud83d\\ude00"', '"😀"', '"\\\\"', '"a\\nb"', '"\\b\\f\\r\\t"', '"\\u0000"'];
    for (const s of strs) await appendOk(url, s);
    const text = await stored(url);
    assert.equal(text, strs.map((s) => s + "\n").join(""));
    assert.equal(text.split("\n").length, strs.length + 1, "no LF inside a stored message");
  });

  test("\\u escapes of unpaired surrogates are valid and stored as written", async () => {
    const url = await jsonStream();
    for (const s of ['"\\ud800"', '{"k":"\\udc00x"}', '"\\uDBFF"', '["\\udc00\\ud800"]', '"a\\ud800\\u0041"']) {
      await appendOk(url, s);
    }
    // The array body flattens to its one element.
    assert.equal(await stored(url), '"\\ud800"\n{"k":"\\udc00x"}\n"\\uDBFF"\n"\\udc00\\ud800"\n"a\\ud800\\u0041"\n');
  });

  test("scalar messages: string, number, true, false, null", async () => {
    const url = await jsonStream();
    for (const s of ['"str"', " 42 ", "true", "false", "null"]) await appendOk(url, s);
    assert.equal(await stored(url), '"str"\n42\ntrue\nfalse\nnull\n');
  });

  test("a top-level array is flattened exactly one level", async () => {
    const url = await jsonStream();
    await appendOk(url, '[ {"a" : 1} , [1, 2] , [[3]] , "s" , null , 7 ]');
    await appendOk(url, "[[[1,2,3]]]");
    await appendOk(url, "[[]]");
    await appendOk(url, "[{}]");
    assert.equal(await stored(url), '{"a":1}\n[1,2]\n[[3]]\n"s"\nnull\n7\n[[1,2,3]]\n[]\n{}\n');
  });

  test("brackets, quotes and backslashes inside strings do not confuse flattening or depth", async () => {
    const url = await jsonStream();
    await appendOk(url, '[ "[1,2]" , "]" , "a\\\\" , "\\"]" , {"k":"}{"} ]');
    await appendOk(url, `"${"[".repeat(300)}"`); // depth 0: the brackets are string text
    await appendOk(url, '"a\x7fb"'); // DEL is not a control character in JSON
    assert.equal(await stored(url), '"[1,2]"\n"]"\n"a\\\\"\n"\\"]"\n{"k":"}{"}\n' + `"${"[".repeat(300)}"\n` + '"a\x7fb"\n');
  });

  test("the body of a creating PUT follows the same rule", async () => {
    const url = await jsonStream('[ {"b" : 1, "a" : 2} , 1.50e3 , "\\u00e9" ]');
    assert.equal(await stored(url), '{"b":1,"a":2}\n1.50e3\n"\\u00e9"\n');
    const url2 = await jsonStream(' { "x" : [ 1e400 ] } ');
    assert.equal(await stored(url2), '{"x":[1e400]}\n');
  });

  test("application/json with parameters follows the rule too", async () => {
    const type = "application/json; charset=utf-8";
    const url = await jsonStream(' { "a" : 1 } ', type);
    await appendOk(url, '[ 1 , { "b" : 2 } ]', type);
    assert.equal(await stored(url), '{"a":1}\n1\n{"b":2}\n');
    const before = await tail(url);
    assertError(await post(url, '{"a":', { type }), 400, undefined, { what: "invalid JSON with parameters" });
    assert.equal(await tail(url), before);
  });

  test("a non-JSON stream is not touched by the rule", async () => {
    const url = `${server.url}/jsonb/plain${++n}`;
    assert.equal((await put(url, { body: ' { "a" : 1 } ' })).status, 201);
    await appendOk(url, "not json at all", "text/plain");
    assert.equal(await stored(url), ' { "a" : 1 } not json at all');
  });
});

describe("JSON Message Text: depth limit", () => {
  test("a message of depth 127 is accepted and stored", async () => {
    const url = await jsonStream();
    await appendOk(url, deepObj(127));
    await appendOk(url, `{"k": ${deepArr(126).replace("[]", "[ ]")}}`); // object over arrays, depth 127
    assert.equal(await stored(url), deepObj(127) + "\n" + `{"k":${deepArr(126)}}` + "\n");
  });

  test("a message of depth 128 is rejected with 400 and nothing is stored", async () => {
    const url = await jsonStream("[1]");
    await rejected(url, deepObj(128), "object of depth 128");
    await rejected(url, `{"x":1,"y":${deepArr(127)}}`, "object holding an array of depth 127 (depth 128)");
  });

  test("a top-level array body may be one level deeper than its deepest message", async () => {
    const url = await jsonStream();
    await appendOk(url, deepArr(128)); // one message of depth 127
    await appendOk(url, `[${deepObj(127)}, 5]`);
    assert.equal(await stored(url), deepArr(127) + "\n" + deepObj(127) + "\n5\n");
  });

  test("an array body whose message has depth 128 is rejected as a whole", async () => {
    const url = await jsonStream("[1]");
    await rejected(url, deepArr(129), "array body of depth 129");
    await rejected(url, `[{"ok":1}, ${deepObj(128)}]`, "array with one message of depth 128");
  });

  test("a creating PUT with a too-deep message is rejected and creates nothing", async () => {
    const url = `${server.url}/jsonb/deepput${++n}`;
    assertError(await put(url, { type: JSON_T, body: deepObj(128) }), 400, undefined, { what: "PUT depth 128" });
    assert.equal((await head(url)).status, 404, "the stream was not created");
  });
});

describe("JSON Message Text: invalid bodies", () => {
  const invalidText = [
    '{"a":}', '{"a":1,}', "[1,2,]", '{"a":1} x', "{} {}", "[1,2", "{", "]",
    "NaN", "Infinity", "-Infinity", "'s'", '"a\tb"', '"a\nb"', '"\\x"', '"\\u12G4"', '"\\u12"',
    "01", "+1", ".5", "1.", "1e", "1e+", "-", "tru", "nul", "{a:1}", '"unterminated', "/* c */ 1",
    '{"a":1}}', "[1 2]", '{"a" 1}', '{"a":1 "b":2}', "   ", "\u00a01", "\f1", "\v1",
    "-01", "1.e5", "1e5.5", '"\\u00"', '["a"]]', '[["a"]', "\u0000", '"\u0000',
  ];

  test("invalid JSON text is rejected with 400 and nothing is committed", async () => {
    const url = await jsonStream('{"seed":1}');
    for (const body of invalidText) await rejected(url, body, JSON.stringify(body));
  });

  test("invalid UTF-8 is rejected with 400 and nothing is committed", async () => {
    const url = await jsonStream('{"seed":1}');
    const bad = [
      ["ff", Buffer.from([0x22, 0xff, 0x22])],
      ["overlong /", Buffer.from([0x22, 0xc0, 0xaf, 0x22])],
      ["UTF-8 encoded surrogate", Buffer.from([0x22, 0xed, 0xa0, 0x80, 0x22])],
      ["truncated sequence", Buffer.from([0x22, 0xe2, 0x82, 0x22])],
      ["above U+10FFFF", Buffer.from([0x22, 0xf5, 0x80, 0x80, 0x80, 0x22])],
      ["lone continuation byte", Buffer.from([0x22, 0x80, 0x22])],
      ["in a key", Buffer.concat([Buffer.from('{"'), Buffer.from([0xfe]), Buffer.from('":1}')])],
    ];
    for (const [what, body] of bad) await rejected(url, body, what);
  });

  test("a batch with one invalid element commits none of its messages", async () => {
    const url = await jsonStream('{"seed":1}');
    await rejected(url, '[{"a":1},{"b":}]', "array with a syntax error in the 2nd element");
    await rejected(url, Buffer.concat([Buffer.from('[{"a":1},"'), Buffer.from([0xff]), Buffer.from('"]')]), "array with invalid UTF-8 in the 2nd element");
    await rejected(url, '[{"a":1},{"b":2}] trailing', "array followed by garbage");
  });

  test("an empty array POST is rejected; an empty array PUT creates an empty stream", async () => {
    const url = await jsonStream("[]");
    const h = await head(url);
    assert.equal(h.status, 200);
    assert.equal(await stored(url), "", "PUT [] stores no message");
    await rejected(url, "[]", "empty array");
    await rejected(url, " [ ] ", "empty array with whitespace");
  });

  test("a creating PUT with invalid JSON is rejected and creates nothing", async () => {
    for (const body of ['{"a":', Buffer.from([0x22, 0xff, 0x22]), '[{"a":1}, x]']) {
      const url = `${server.url}/jsonb/badput${++n}`;
      assertError(await put(url, { type: JSON_T, body }), 400, undefined, { what: `PUT ${JSON.stringify(String(body))}` });
      assert.equal((await head(url)).status, 404, "the stream was not created");
    }
  });
});

describe("JSON Message Text: offsets refer to the stored text", () => {
  test("a byte-limited read counts stored bytes, not request bytes", async () => {
    const url = await jsonStream();
    await appendOk(url, '{ "a" :   1 }');
    const r = await get(`${url}?offset=-1&max_bytes=3`);
    assert.equal(r.status, 200);
    assert.equal(r.text, '{"a');
    const rest = await get(`${url}?offset=${r.headers.get("stream-next-offset")}`);
    assert.equal(rest.text, '":1}\n');
  });

  test("the offset an append returns is the message boundary after it", async () => {
    const url = await jsonStream('{ "first" : 1 }');
    const o1 = await tail(url);
    const r = await appendOk(url, '[ {"b" : 2} , {"c" : 3} ]');
    const o2 = r.headers.get("stream-next-offset");
    await appendOk(url, ' "d" ');
    assert.equal((await get(`${url}?offset=${o1}`)).text, '{"b":2}\n{"c":3}\n"d"\n');
    assert.equal((await get(`${url}?offset=${o2}`)).text, '"d"\n');
  });
});

describe("§9.4 JSON stream reads", () => {
  test("SSE data events bounded by max_bytes may end inside a message and reassemble the exact NDJSON", async () => {
    const want = '{"alpha":1,"beta":[1,2,3]}\n"\\ud800"\n{"g":"h i"}\n';
    const url = await jsonStream('[{"alpha" : 1, "beta" : [1, 2, 3]}, "\\ud800", {"g":"h i"}]');
    const sse = await openSse(`${url}?offset=-1&live=sse&max_bytes=7`);
    try {
      assert.equal(sse.status, 200);
      assert.equal(sse.res.headers.get("stream-data-content-type"), "application/x-ndjson");
      const data = () => sse.events.filter((e) => e.type === "data").map((e) => e.data);
      assert.ok(await sse.waitFor((ev) => data().join("") === want && ev.at(-1).type === "control", 5000), `SSE data so far: ${JSON.stringify(data())}`);
      for (const d of data()) assert.ok(Buffer.byteLength(d) <= 7, `data event of ${Buffer.byteLength(d)} bytes: ${JSON.stringify(d)}`);
      assert.ok(data().some((d) => !d.endsWith("\n")), "some event ends inside a message");
    } finally {
      sse.close();
    }
  });

  test("catch-up reads are application/x-ndjson, each message followed by one LF; HEAD says application/json", async () => {
    const url = await jsonStream('[{"a":1},{"b":[2]}]');
    const g = await get(`${url}?offset=-1`);
    assert.equal(g.status, 200);
    assert.equal(mediaType(g.headers.get("content-type")), "application/x-ndjson");
    assert.equal(g.text, '{"a":1}\n{"b":[2]}\n');
    const h = await head(url);
    assert.equal(mediaType(h.headers.get("content-type")), "application/json");
  });

  test("a read at the tail returns no messages: an empty NDJSON body", async () => {
    const url = await jsonStream('{"a":1}');
    const t = await tail(url);
    const g = await get(`${url}?offset=${t}`);
    assert.equal(g.status, 200);
    assert.equal(mediaType(g.headers.get("content-type")), "application/x-ndjson");
    assert.equal(g.text, "");
    assert.equal(g.headers.get("stream-up-to-date"), "true");
  });

  test("a long-poll that gets data answers NDJSON", async () => {
    const url = await jsonStream('{"a":1}');
    const t = await tail(url);
    const lp = get(`${url}?offset=${t}&live=long-poll&timeout_ms=5000`);
    await new Promise((r) => setTimeout(r, 200));
    await appendOk(url, '[ {"x" : 1} , 2 ]');
    const r = await lp;
    assert.equal(r.status, 200);
    assert.equal(mediaType(r.headers.get("content-type")), "application/x-ndjson");
    assert.equal(r.text, '{"x":1}\n2\n');
  });

  test("SSE on a JSON stream carries Stream-Data-Content-Type: application/x-ndjson and the stored text unchanged", async () => {
    const first = '{"b":1,"a":2,"a":3}\n"\\ud800"\n1.50e3\n';
    const url = await jsonStream('[{"b":1,"a":2,"a":3}, "\\ud800", 1.50e3]');
    const sse = await openSse(`${url}?offset=-1&live=sse`);
    try {
      assert.equal(sse.status, 200);
      assert.equal(mediaType(sse.res.headers.get("content-type")), "text/event-stream");
      assert.equal(sse.res.headers.get("stream-data-content-type"), "application/x-ndjson");
      assert.equal(sse.res.headers.get("stream-sse-data-encoding"), null, "a JSON stream's SSE is not base64");
      const dataText = () => sse.events.filter((e) => e.type === "data").map((e) => e.data).join("");
      assert.ok(await sse.waitFor(() => dataText() === first, 5000), `SSE data so far: ${JSON.stringify(dataText())}`);
      await appendOk(url, '{ "live" : 1e400 }');
      const want = first + '{"live":1e400}\n';
      assert.ok(await sse.waitFor((ev) => dataText() === want && ev.at(-1).type === "control", 5000), `SSE data so far: ${JSON.stringify(dataText())}`);
      // Every data event is followed by a control event.
      const types = sse.events.map((e) => e.type);
      types.forEach((t, i) => {
        if (t === "data") assert.equal(types[i + 1], "control", `event after data #${i}`);
      });
    } finally {
      sse.close();
    }
  });
});
