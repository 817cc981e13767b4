// A strict RFC 2046 §5.1.1 multipart parser for the bootstrap tests
// (extensions.txt §3.2). WHATWG Response.formData() does not parse
// multipart/mixed, so this one does, and checks the framing exactly:
//
//   multipart-body := [preamble CRLF] dash-boundary transport-padding CRLF
//                     body-part *encapsulation close-delimiter
//                     transport-padding [CRLF epilogue]
//   encapsulation  := delimiter transport-padding CRLF body-part
//   delimiter      := CRLF dash-boundary          dash-boundary := "--" boundary
//   close-delimiter := delimiter "--"
//   body-part      := MIME-part-headers [CRLF *OCTET]
//
// By default it is stricter than the grammar in what it accepts from a
// server: no preamble, no transport padding, and after the close-delimiter
// nothing or CRLF plus an epilogue (returned, so a test can require it to be
// empty). Every part must carry its blank line that ends the headers, and a
// CRLF + dash-boundary inside the body area that is not followed by CRLF or
// "--" is an error: the boundary must not occur in the encapsulated data.
// Options: {allowPreamble, allowPadding} relax the first two.

const CRLF = Buffer.from("\r\n");

export class MultipartError extends Error {}

const BCHARS = /^[0-9A-Za-z'()+_,\-./:=? ]{0,69}[0-9A-Za-z'()+_,\-./:=?]$/;

// Validates a boundary as RFC 2046 defines it: 1-70 bchars, no trailing space.
export function validBoundary(b) {
  return typeof b === "string" && BCHARS.test(b);
}

// Extracts {type, boundary} from a Content-Type value such as
// `multipart/mixed; boundary=abc` or `multipart/mixed; boundary="a b"`.
// Throws on anything else (a missing, repeated or invalid boundary).
export function parseMultipartType(value) {
  if (typeof value !== "string") throw new MultipartError("no Content-Type");
  const [typePart, ...params] = value.split(";");
  const type = typePart.trim().toLowerCase();
  if (!/^multipart\/[a-z0-9!#$&^_.+-]+$/.test(type)) throw new MultipartError(`not a multipart type: ${value}`);
  let boundary = null;
  for (const p of params) {
    const m = /^\s*([A-Za-z0-9!#$%&'*+.^_`|~-]+)=("(?:[^"\\]|\\.)*"|[A-Za-z0-9!#$%&'*+.^_`|~-]+)\s*$/.exec(p);
    if (!m) throw new MultipartError(`malformed parameter ${JSON.stringify(p)} in ${value}`);
    if (m[1].toLowerCase() !== "boundary") continue;
    if (boundary !== null) throw new MultipartError(`two boundary parameters in ${value}`);
    let v = m[2];
    if (v.startsWith('"')) v = v.slice(1, -1).replace(/\\(.)/g, "$1");
    boundary = v;
  }
  if (boundary === null) throw new MultipartError(`no boundary parameter in ${value}`);
  if (!validBoundary(boundary)) throw new MultipartError(`invalid boundary ${JSON.stringify(boundary)}`);
  return { type, boundary };
}

// Skips transport padding (SP / HTAB) at i when allowed; returns the new index.
function skipPadding(buf, i, allow) {
  if (!allow) return i;
  while (i < buf.length && (buf[i] === 0x20 || buf[i] === 0x09)) i++;
  return i;
}

function expectCRLF(buf, i, what) {
  if (buf[i] !== 0x0d || buf[i + 1] !== 0x0a) {
    throw new MultipartError(`expected CRLF ${what} at byte ${i}, found ${JSON.stringify(buf.subarray(i, i + 8).toString("latin1"))}`);
  }
  return i + 2;
}

// Parses one body-part's bytes into {headers, rawHeaders, body}.
// headers: Map of lowercase name -> value (a repeated name is an error);
// rawHeaders: [[name, value], ...] as sent; body: Buffer (a view).
function parsePart(bytes, index) {
  let headerEnd; // index of the first body byte
  let headerText;
  if (bytes[0] === 0x0d && bytes[1] === 0x0a) {
    headerText = "";
    headerEnd = 2;
  } else {
    const end = bytes.indexOf("\r\n\r\n");
    if (end < 0) throw new MultipartError(`part ${index}: no blank line ends its headers`);
    headerText = bytes.subarray(0, end).toString("latin1");
    headerEnd = end + 4;
  }
  const headers = new Map();
  const rawHeaders = [];
  if (headerText !== "") {
    for (const line of headerText.split("\r\n")) {
      if (/[\r\n]/.test(line)) throw new MultipartError(`part ${index}: bare CR or LF in its headers`);
      if (/^[ \t]/.test(line)) throw new MultipartError(`part ${index}: folded header line ${JSON.stringify(line)}`);
      const m = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*(.*?)[ \t]*$/.exec(line);
      if (!m) throw new MultipartError(`part ${index}: malformed header line ${JSON.stringify(line)}`);
      const name = m[1].toLowerCase();
      if (headers.has(name)) throw new MultipartError(`part ${index}: header ${m[1]} repeated`);
      headers.set(name, m[2]);
      rawHeaders.push([m[1], m[2]]);
    }
  }
  return { headers, rawHeaders, body: bytes.subarray(headerEnd) };
}

// Parses a multipart body (Buffer or Uint8Array) with the given boundary.
// Returns {preamble, parts, epilogue}; throws MultipartError on any
// framing error.
export function parseMultipart(input, boundary, { allowPreamble = false, allowPadding = false } = {}) {
  if (!validBoundary(boundary)) throw new MultipartError(`invalid boundary ${JSON.stringify(boundary)}`);
  const buf = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
  const dash = Buffer.from(`--${boundary}`, "latin1");
  const delim = Buffer.concat([CRLF, dash]);

  // The first dash-boundary: at the start, or after a preamble + CRLF.
  let preamble = Buffer.alloc(0);
  let i;
  if (buf.subarray(0, dash.length).equals(dash)) {
    i = dash.length;
  } else {
    if (!allowPreamble) throw new MultipartError("the body does not start with the dash-boundary");
    const at = buf.indexOf(delim);
    if (at < 0) throw new MultipartError("no dash-boundary in the body");
    preamble = buf.subarray(0, at);
    i = at + delim.length;
  }
  i = skipPadding(buf, i, allowPadding);
  if (buf[i] === 0x2d && buf[i + 1] === 0x2d) throw new MultipartError("a multipart body needs at least one body part");
  i = expectCRLF(buf, i, "after the first dash-boundary");

  const parts = [];
  for (;;) {
    const at = buf.indexOf(delim, i);
    if (at < 0) throw new MultipartError(`part ${parts.length}: no delimiter ends it (missing close-delimiter)`);
    parts.push(parsePart(buf.subarray(i, at), parts.length));
    let j = at + delim.length;
    if (buf[j] === 0x2d && buf[j + 1] === 0x2d) {
      // close-delimiter transport-padding [CRLF epilogue]
      j = skipPadding(buf, j + 2, allowPadding);
      let epilogue = Buffer.alloc(0);
      if (j < buf.length) {
        j = expectCRLF(buf, j, "after the close-delimiter");
        epilogue = buf.subarray(j);
      }
      return { preamble, parts, epilogue };
    }
    j = skipPadding(buf, j, allowPadding);
    // Anything else after CRLF dash-boundary means the boundary occurred in
    // the data (or a malformed delimiter): both are framing errors.
    i = expectCRLF(buf, j, `after a delimiter (part ${parts.length} ends there)`);
  }
}

// Builds a multipart body from [{headers: [[name, value]], body}] (for the
// parser's own tests and for comparisons).
export function buildMultipart(boundary, parts, { epilogue } = {}) {
  const chunks = [];
  parts.forEach((p, k) => {
    chunks.push(Buffer.from(`${k === 0 ? "" : "\r\n"}--${boundary}\r\n`, "latin1"));
    for (const [n, v] of p.headers ?? []) chunks.push(Buffer.from(`${n}: ${v}\r\n`, "latin1"));
    chunks.push(CRLF, Buffer.from(p.body ?? ""));
  });
  chunks.push(Buffer.from(`\r\n--${boundary}--`, "latin1"));
  if (epilogue !== undefined) chunks.push(CRLF, Buffer.from(epilogue));
  return Buffer.concat(chunks);
}
