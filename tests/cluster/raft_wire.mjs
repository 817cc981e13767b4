// What the cluster tests that play a rogue peer share: libraft's wire
// format and the hello before it (src/consensus/wire.h), a rogue that writes
// them to a node's Raft port, and what to compare before and after (every
// node's terms, leaders and voters; the refusals counted in the metrics).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import net from "node:net";
import tls from "node:tls";
import { req } from "./runnel_cluster.mjs";

// ---- what the cluster looks like: per group, every node's term and leader, and its voters
export async function clusterState(cl) {
  const out = [];
  for (let n = 1; n <= cl.nodes; n++) {
    const r = await cl.report(n);
    out.push(r.groups.map((g) => ({ term: g.term, leader: g.leader,
      voters: g.replicas.filter((x) => x.role === "voter").map((x) => x.node).sort().join() })));
  }
  return out;
}

// Asserts that no node's term passed 1000 (the rogue's) and that every
// node's view of every group is what `before` (clusterState) held.
export async function assertUnchanged(cl, before, groups) {
  const now = await clusterState(cl);
  for (let n = 0; n < cl.nodes; n++)
    for (let g = 0; g < groups; g++) {
      assert.ok(now[n][g].term < 1000, `node ${n + 1} group ${g}: term ${now[n][g].term}`);
      assert.deepEqual(now[n][g], before[n][g], `node ${n + 1} group ${g} unchanged`);
    }
}

export async function refusedCount(url, channel) {
  const text = (await req(`${url}/__runnel/metrics`)).text;
  let sum = 0;
  for (const m of text.matchAll(new RegExp(`runnel_cluster_peer_refused_total\\{channel="${channel}",reason="[a-z_]+"\\} (\\d+)`, "g")))
    sum += Number(m[1]);
  return sum;
}

// ---- libraft's wire format, as a peer's connection carries it (src/consensus/wire.h's hello first)
function hashBytes(buf) { // util/map.c rn_hash_bytes
  const M = 0xffffffffffffffffn;
  let h = 0xcbf29ce484222325n ^ BigInt(buf.length);
  let i = 0;
  for (; i + 8 <= buf.length; i += 8) {
    h = ((h ^ buf.readBigUInt64LE(i)) * 0x100000001b3n) & M;
    h ^= h >> 29n;
  }
  for (; i < buf.length; i++) h = ((h ^ BigInt(buf[i])) * 0x100000001b3n) & M;
  h ^= h >> 30n; h = (h * 0xbf58476d1ce4e5b9n) & M;
  h ^= h >> 27n; h = (h * 0x94d049bb133111ebn) & M;
  h ^= h >> 31n;
  return h || 1n;
}

export function hello({ group, sender, clusterId, address, auth }) {
  const b = Buffer.alloc(32);
  b.writeUInt32LE(0x46524e52, 0); b.writeUInt16LE(1, 4); b.writeUInt16LE(address.length, 6);
  b.writeUInt32LE(group, 8); b.writeUInt32LE(auth, 12);
  b.writeBigUInt64LE(BigInt(sender), 16); b.writeBigUInt64LE(hashBytes(Buffer.from(clusterId)), 24);
  return Buffer.concat([b, Buffer.from(address)]);
}

const u64s = (...v) => { const b = Buffer.alloc(8 * v.length); v.forEach((x, i) => b.writeBigUInt64LE(BigInt(x), 8 * i)); return b; };

// RequestVote (type 3): term, candidate, last index, last term, flags (1: disrupt the leader)
export const requestVote = (term, candidate) => Buffer.concat([u64s(3, 40), u64s(term, candidate, 1000000, term - 1, 1)]);
// AppendEntries (type 1) with one 8-byte command entry: term, previous index and term, commit,
// the batch (count, then per entry term, type byte, 3 unused, u32 length), 8 unused, the payload
export function appendEntries(term) {
  const entry = Buffer.alloc(16); entry.writeBigUInt64LE(BigInt(term), 0); entry[8] = 1; entry.writeUInt32LE(8, 12);
  const header = Buffer.concat([u64s(term, 0, 0, 1000000, 1), entry, Buffer.alloc(8)]);
  return Buffer.concat([u64s(1, header.length), header, Buffer.from("rogue!!!")]);
}

// Connects to a Raft port and writes hello + messages, resolving with what
// the node wrote back once it closed the connection or 1.5 s passed.
// wrongKey: first answers the challenge with a proof made with that key.
// tls ({ca, cert, key}, PEM; cert and key optional): all of it inside TLS,
// as a node with peer certificates speaks (src/consensus/peer_link.h).
export function rogue(port, helloBytes, messages, { wrongKey = null, tls: tlsOpts = null } = {}) {
  return new Promise((resolve) => {
    const s = tlsOpts
      ? tls.connect({ port, host: "127.0.0.1", ...tlsOpts, checkServerIdentity: () => undefined })
      : net.connect(port, "127.0.0.1");
    let got = Buffer.alloc(0);
    const done = () => { s.destroy(); resolve(got); };
    s.on(tlsOpts ? "secureConnect" : "connect", () => {
      s.write(helloBytes);
      if (!wrongKey) s.write(Buffer.concat(messages));
    });
    s.on("data", (d) => {
      got = Buffer.concat([got, d]);
      if (wrongKey && got.length === 40 && got.toString("latin1", 0, 4) === "RNCH") {
        const nc = crypto.randomBytes(32);
        const proof = crypto.createHmac("sha256", wrongKey)
          .update(Buffer.concat([Buffer.from("runnel raft client 1"), helloBytes, got.subarray(8, 40), nc])).digest();
        s.write(Buffer.concat([nc, proof, ...messages]));
      }
    });
    s.on("error", done);
    s.on("close", done);
    setTimeout(done, 1500);
  });
}

// The refusal a node writes (src/consensus/handshake.h): "RNNO" and the
// reason's number, or null when bytes are not one.
const REASONS = ["ok", "missing", "malformed", "mode", "stale", "bad_proof", "wrong_id", "untrusted_cert", "cert_id"];
export function refusal(bytes) {
  if (bytes.length < 40 || bytes.toString("latin1", 0, 4) !== "RNNO") return null;
  return REASONS[bytes.readUInt32LE(4)] ?? "unknown";
}
