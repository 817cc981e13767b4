// The bytes every chaos write carries: one fixed-size record per write
// attempt, naming its stream and the attempt, so that a stream's bytes can
// be mapped back to the requests of the history exactly. A record is
// RECORD_BYTES long: "<stream>|<client>:<n>:<version>|" padded with "."
// and ended by LF. <n> numbers a client's writes (a producer's seq, an
// appender's attempt); <version> numbers a producer's bodies for one seq.
export const RECORD_BYTES = 64;
const ID_RE = /^[ap][0-9]+:[0-9]+:[0-9]+$/;

// The record id of a write: client name, write number, body version.
export const recordId = (client, n, version = 0) => `${client}:${n}:${version}`;

export function makeRecord(stream, id) {
  if (!ID_RE.test(id)) throw new Error(`bad record id ${id}`);
  const head = `${stream}|${id}|`;
  if (head.length > RECORD_BYTES - 1) throw new Error(`record id too long: ${id}`);
  return head + ".".repeat(RECORD_BYTES - 1 - head.length) + "\n";
}

// Splits a stream's bytes into records. Returns {records: [{pos, stream,
// id}], garbage: [{pos, text}]}: every slot that is not a well-formed
// record (and a tail shorter than a record) is garbage.
export function parseRecords(buf) {
  const records = [];
  const garbage = [];
  for (let pos = 0; pos < buf.length; pos += RECORD_BYTES) {
    const text = buf.subarray(pos, pos + RECORD_BYTES).toString("latin1");
    const parts = text.length === RECORD_BYTES && text.endsWith("\n") ? text.slice(0, -1).split("|") : [];
    const ok = parts.length === 3 && /^[0-9]+$/.test(parts[0]) && ID_RE.test(parts[1]) && /^\.*$/.test(parts[2]);
    if (ok) records.push({ pos, stream: Number(parts[0]), id: parts[1] });
    else garbage.push({ pos, text });
  }
  return { records, garbage };
}
