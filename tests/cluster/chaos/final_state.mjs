// The final state of a chaos run, read after healing once the cluster
// showed equal applied indexes: every stream on every node, read with
// consistency=local, as the checker (checker.mjs) takes it. Each stream
// is walked one record at a time (max_bytes up to the next record
// boundary) from the offset of its first byte, so that the offset token
// of every record boundary on that replica is known, without assuming
// anything about the tokens' format; a HEAD gives the metadata.
import { request } from "./http.mjs";
import { RECORD_BYTES } from "./records.mjs";

// The metadata compared across replicas: the content type, the cluster
// id (extensions §10) and every Stream-* header of a HEAD.
function metadata(headers) {
  const m = {};
  for (const [name, value] of Object.entries(headers))
    if (name.startsWith("stream-") || name === "content-type" || name === "ursula-cluster-id") m[name] = value;
  return m;
}

// Walks stream s on node (its base URL) from token0. maxSteps bounds the
// walk. Returns {bytes, boundaries, head, error}.
export async function readReplica(url, path, token0, maxSteps) {
  const q = (extra) => `${url}${path}?${extra}consistency=local`;
  const h = await request(q(""), { method: "HEAD", timeoutMs: 10000 });
  if (h.status !== 200) return { error: `HEAD answered ${h.status ?? h.err} ${h.code ?? ""}`.trim() };
  const head = metadata(h.headers);
  const chunks = [];
  const boundaries = [[0, token0]];
  let pos = 0;
  let off = token0;
  for (let step = 0; step < maxSteps; step++) {
    const max = RECORD_BYTES - (pos % RECORD_BYTES);
    const a = await request(q(`offset=${encodeURIComponent(off)}&max_bytes=${max}&`), { timeoutMs: 10000 });
    if (a.status !== 200) return { error: `GET at ${off} (byte ${pos}) answered ${a.status ?? a.err} ${a.code ?? ""}`.trim() };
    const next = a.headers["stream-next-offset"];
    if (a.body.length > max) return { error: `GET at ${off} with max_bytes=${max} returned ${a.body.length} bytes` };
    if (a.body.length === 0) {
      if (a.headers["stream-up-to-date"] !== "true" || next !== off)
        return { error: `GET at ${off} returned no bytes, Stream-Next-Offset ${next}, without reaching the tail` };
      if (head["stream-next-offset"] !== off) return { error: `HEAD names the tail ${head["stream-next-offset"]} but the walk ended at ${off}` };
      return { bytes: Buffer.concat(chunks), boundaries, head, error: null };
    }
    chunks.push(a.body);
    pos += a.body.length;
    off = next;
    boundaries.push([pos, off]);
  }
  return { error: `no tail after ${maxSteps} reads` };
}

// Reads every stream on every node with at most `parallel` walks at once;
// maxSteps(s) bounds the walk of stream s.
export async function collectFinalState({ nodes, streams, path, token0, converged, note, maxSteps, parallel = 12 }) {
  const final = { converged, note, nodes: nodes.map((n) => n.id), streams: {} };
  const jobs = [];
  for (let s = 0; s < streams; s++) {
    final.streams[s] = {};
    for (const n of nodes) jobs.push([s, n]);
  }
  const worker = async () => {
    for (let job = jobs.shift(); job; job = jobs.shift()) {
      const [s, n] = job;
      final.streams[s][n.id] = token0[s] === undefined
        ? { error: "its first offset is unknown (setup's HEAD failed)" }
        : await readReplica(n.url, path(s), token0[s], maxSteps(s));
    }
  };
  await Promise.all(Array.from({ length: parallel }, worker));
  return final;
}
