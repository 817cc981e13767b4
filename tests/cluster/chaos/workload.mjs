// The chaos workload: producers (Producer-Id/epoch/seq, one write in flight
// each), plain appenders, catch-up readers (consistency=leader GET and
// HEAD, consistency=local GET) and live long-poll readers, paced, each
// request recorded in the history (history.mjs) with what it was answered.
//
// Retry rules, from extensions.txt §5.6, §5.7, §11.1:
// - a 307 is followed at once to its Location (at most MAX_HOPS hops);
// - NO_LEADER (and every refusal §11.1 names) applied nothing: back off
//   for Retry-After (bounded), then try again;
// - an unknown outcome (OUTCOME_UNKNOWN, another 5xx, a network error, a
//   timeout) may have applied: a producer repeats the same write (same
//   key, same body) until an answer resolves it; an appender, which has no
//   key, moves on.
// Every attempt of an appender carries a body of its own, and so does
// every attempt of a producer write until one of its answers is unknown
// (all earlier attempts were refused, so nothing under the key applied):
// the checker can then tell which attempt applied.
import crypto from "node:crypto";
import { performance } from "node:perf_hooks";
import { request, retryAfterMs, routingHeaders } from "./http.mjs";
import { classifyWrite } from "./outcomes.mjs";
import { makeRecord, recordId } from "./records.mjs";
import { sleep } from "./rng.mjs";

const MAX_HOPS = 5;
const CONTENT_TYPE = "text/plain";
const ACKED = new Set(["applied", "repeat"]);

// Spaces out operations to `rate` per second over all its callers.
class Pacer {
  constructor(rate) {
    this.gap = 1000 / rate;
    this.next = 0;
  }

  async take() {
    const now = performance.now();
    const at = Math.max(now, this.next);
    this.next = at + this.gap;
    if (at > now) await sleep(at - now);
  }
}

export class Workload {
  constructor({ history, nodes, rng, bucket = "chaos", streams = 8, producers = 6, appenders = 3, leaderReaders = 2,
    localReaders = 2, liveReaders = 3, writeRate = 150, readRate = 50, timeoutMs = 10000 }) {
    Object.assign(this, { history, nodes, rng, bucket, streams, producers, appenders, leaderReaders, localReaders,
      liveReaders, timeoutMs });
    this.writePacer = new Pacer(writeRate);
    this.readPacer = new Pacer(readRate);
    this.preferred = new Map(); // stream -> node that last took a write
    this.stopping = false;
    this.resolveBy = Infinity;
    this.halted = []; // clients that met an answer they cannot go on from
    this.loops = [];
    this.token0 = {}; // stream -> the offset of its first byte
    this.groupsSeen = new Set(); // groups routing answers named (x-ursula-raft-group): the streams' groups
  }

  // Odd streams are used through the /v1/stream/ surface, even ones
  // through the bucket surface (the same streams either way): every client
  // kind meets both.
  v1(s) {
    return s % 2 === 1;
  }

  // The stream's path on the bucket surface (the final state reads every
  // stream there: its walk needs max_bytes, which /v1/stream/ ignores).
  bucketPath(s) {
    return `/${this.bucket}/s${s}`;
  }

  path(s) {
    return this.v1(s) ? `/v1/stream${this.bucketPath(s)}` : this.bucketPath(s);
  }

  pick(s) {
    return this.preferred.get(s) ?? this.rng.pick(this.nodes);
  }

  // Sends one request and records it; returns {e, a}.
  async send(c, s, node, t, method, path, { headers = {}, body = null, extra = {} } = {}) {
    const e = { t, c, s, n: node.id, ...(this.v1(s) ? { v1: 1 } : {}), ...extra, sent: this.history.now() };
    const a = await request(node.url + path, { method, headers, body, timeoutMs: this.timeoutMs });
    Object.assign(e, { done: this.history.now(), st: a.status, code: a.code, err: a.err, h: routingHeaders(a.headers) });
    if (e.h.group !== undefined) this.groupsSeen.add(Number(e.h.group));
    this.history.add(e);
    return { e, a };
  }

  // Where a 307 points: {node, path}, or null when it names no node.
  target(a, from) {
    const loc = a.headers.location;
    if (!loc) return null;
    const u = new URL(loc, from.url);
    const node = this.nodes.find((n) => new URL(n.url).host === u.host);
    return node ? { node, path: u.pathname + u.search } : null;
  }

  // Creates every stream (following redirects, retrying refusals and
  // unknown outcomes: a create is idempotent) and learns each one's first
  // offset with a consistency=leader HEAD while it is empty. Bounded.
  async setup(ms = 60000) {
    const end = Date.now() + ms;
    for (let s = 0; s < this.streams; s++) {
      for (const [t, method, path] of [["create", "PUT", this.path(s)], ["head", "HEAD", `${this.path(s)}?consistency=leader`]]) {
        let node = this.rng.pick(this.nodes);
        let p = path;
        for (;;) {
          if (Date.now() > end) throw new Error(`stream ${s}: no ${method} succeeded within ${ms} ms`);
          const extra = t === "head" ? { cons: "leader" } : { rec: null };
          const { e, a } = await this.send("setup", s, node, t, method, p, { headers: { "content-type": CONTENT_TYPE }, extra });
          if (t === "create") e.out = classifyWrite("create", a.status, a.headers, a.code).outcome;
          if (a.status === 200 || a.status === 201) {
            if (t === "head") this.token0[s] = e.next = a.headers["stream-next-offset"];
            break;
          }
          const next = a.status === 307 ? this.target(a, node) : null;
          if (next) ({ node, path: p } = next);
          else {
            node = this.rng.pick(this.nodes);
            p = path;
            await sleep(200);
          }
        }
      }
    }
  }

  // Waits (bounded) until every node serves every stream from its own
  // replica, so that the first local reads do not meet a replica that has
  // not applied the create yet. Not recorded: it is no part of the load.
  async waitReplicas(ms = 30000) {
    const end = Date.now() + ms;
    for (let s = 0; s < this.streams; s++) {
      for (const n of this.nodes) {
        for (;;) {
          const a = await request(`${n.url}${this.path(s)}?consistency=local`, { method: "HEAD", timeoutMs: 2000 });
          if (a.status === 200) break;
          if (Date.now() > end) throw new Error(`node ${n.id} did not serve stream ${s} within ${ms} ms (HEAD answered ${a.status ?? a.err})`);
          await sleep(100);
        }
      }
    }
  }

  start() {
    const { streams } = this;
    for (let k = 0; k < this.producers; k++) this.loops.push(this.producer(k, k % streams));
    for (let k = 0; k < this.appenders; k++) this.loops.push(this.appender(k, (this.producers + k) % streams));
    for (let k = 0; k < this.leaderReaders; k++) this.loops.push(this.reader(k, "leader"));
    for (let k = 0; k < this.localReaders; k++) this.loops.push(this.reader(this.leaderReaders + k, "local"));
    for (let k = 0; k < this.liveReaders; k++) this.loops.push(this.liveReader(k, this.nodes[k % this.nodes.length], k % streams));
  }

  // Stops every client: no new write starts; a producer whose current
  // write had an unknown outcome keeps repeating it until it is resolved
  // or resolveMs have passed.
  async stop(resolveMs = 60000) {
    this.stopping = true;
    this.resolveBy = Date.now() + resolveMs;
    await Promise.all(this.loops);
  }

  async producer(k, s) {
    const c = `p${k}`;
    const headers = (seq) => ({ "content-type": CONTENT_TYPE, "producer-id": `chaos-${c}`, "producer-epoch": "0", "producer-seq": String(seq) });
    for (let seq = 0; !this.stopping; seq++) {
      await this.writePacer.take();
      let version = 0;
      let frozen = false; // an answer was unknown: repeat this very body
      for (let done = false; !done;) {
        if (this.stopping && (!frozen || Date.now() > this.resolveBy)) return;
        let node = this.pick(s);
        let path = this.path(s);
        for (let hop = 0; hop < MAX_HOPS; hop++) {
          const rec = recordId(c, seq, version);
          const { e, a } = await this.send(c, s, node, "pwrite", "POST", path, {
            headers: headers(seq), body: makeRecord(s, rec), extra: { rec, key: `chaos-${c}/0/${seq}` } });
          const { outcome, ack } = classifyWrite("pwrite", a.status, a.headers, a.code);
          Object.assign(e, { out: outcome, ack });
          if (ACKED.has(outcome)) {
            this.preferred.set(s, node);
            done = true;
            break;
          }
          if (!frozen && (outcome === "refused" || outcome === "redirected")) version++;
          if (outcome === "redirected") {
            const next = this.target(a, node);
            if (next) ({ node, path } = next);
            else break;
            continue;
          }
          this.preferred.delete(s);
          if (outcome === "refused" && a.status < 500) {
            this.halted.push(`${c}: ${e.st} ${e.code ?? ""} to chaos-${c}/0/${seq}`);
            return; // a sequential producer has no refusal to expect: stop
          }
          if (outcome === "unknown") frozen = true;
          await sleep(outcome === "refused" ? retryAfterMs(a.headers["retry-after"]) : this.rng.int(50, 250));
          break;
        }
      }
    }
  }

  async appender(k, s) {
    const c = `a${k}`;
    let n = 0;
    while (!this.stopping) {
      await this.writePacer.take();
      let node = this.pick(s);
      let path = this.path(s);
      for (let hop = 0; hop < MAX_HOPS && !this.stopping; hop++) {
        const rec = recordId(c, n++, 0);
        const { e, a } = await this.send(c, s, node, "append", "POST", path, {
          headers: { "content-type": CONTENT_TYPE }, body: makeRecord(s, rec), extra: { rec } });
        const { outcome, ack } = classifyWrite("append", a.status, a.headers, a.code);
        Object.assign(e, { out: outcome, ack });
        if (ACKED.has(outcome)) {
          this.preferred.set(s, node);
          break;
        }
        const next = outcome === "redirected" ? this.target(a, node) : null;
        if (next) {
          ({ node, path } = next);
          continue;
        }
        this.preferred.delete(s);
        if (outcome === "refused" && a.status < 500) {
          this.halted.push(`${c}: ${e.st} ${e.code ?? ""} to an append`);
          return;
        }
        await sleep(outcome === "refused" ? retryAfterMs(a.headers["retry-after"]) : this.rng.int(50, 250));
        break;
      }
    }
  }

  // Records what a read answered into its history entry.
  static readAnswer(e, a, withBody) {
    e.next = a.headers["stream-next-offset"];
    e.utd = a.headers["stream-up-to-date"] === "true";
    if (withBody) {
      e.len = a.body.length;
      e.dig = crypto.createHash("sha256").update(a.body).digest("hex");
    }
  }

  // Catch-up reads of random streams through random nodes. A leader
  // reader sends GET and HEAD with consistency=leader and follows 307s; a
  // local reader sends GET with consistency=local, each node from where
  // that node last answered (a lagging replica may lack another's tail).
  async reader(k, cons) {
    const c = `r${k}`;
    const from = new Map(); // "node|s" or "s" -> offset
    while (!this.stopping) {
      await this.readPacer.take();
      const s = this.rng.int(0, this.streams - 1);
      let node = this.rng.pick(this.nodes);
      const isHead = cons === "leader" && this.rng.next() < 0.25;
      const key = cons === "leader" ? `${s}` : `${node.id}|${s}`;
      const off = this.rng.next() < 0.05 ? "-1" : from.get(key) ?? "-1";
      let path = `${this.path(s)}?${isHead ? "" : `offset=${encodeURIComponent(off)}&`}consistency=${cons}`;
      for (let hop = 0; hop < MAX_HOPS; hop++) {
        const { e, a } = await this.send(c, s, node, isHead ? "head" : "read", isHead ? "HEAD" : "GET", path,
          { extra: isHead ? { cons } : { cons, off } });
        if (a.status === 200) {
          Workload.readAnswer(e, a, !isHead);
          if (!isHead && e.next) from.set(key, e.next);
          break;
        }
        const next = a.status === 307 ? this.target(a, node) : null;
        if (next) {
          ({ node, path } = next);
          continue;
        }
        if (a.status === 416) from.delete(key); // this replica is behind the offset: start over
        await sleep(a.status === 503 ? retryAfterMs(a.headers["retry-after"]) : this.rng.int(50, 250));
        break;
      }
    }
  }

  // A live reader: long-polls of one stream on one node (which may be a
  // follower), each from where the last answer ended.
  async liveReader(k, node, s) {
    const c = `l${k}`;
    let off = "-1";
    while (!this.stopping) {
      const path = `${this.path(s)}?offset=${encodeURIComponent(off)}&live=long-poll&timeout_ms=1000`;
      const { e, a } = await this.send(c, s, node, "live", "GET", path, { extra: { cons: "local", off } });
      if (a.status === 200 || a.status === 204) {
        Workload.readAnswer(e, a, a.status === 200);
        if (e.next) off = e.next;
      } else {
        await sleep(a.status === 503 ? retryAfterMs(a.headers["retry-after"]) : this.rng.int(100, 400));
      }
    }
  }
}
