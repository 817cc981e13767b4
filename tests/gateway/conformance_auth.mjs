// Preloaded into the conformance suite's processes (NODE_OPTIONS=--import,
// scripts/conformance_gateway.sh): the suite sends no credential, so every
// fetch to the gate's origin (GATE_AUTH_ORIGIN) that carries no
// Authorization header gets `Authorization: Bearer GATE_AUTH_KEY`. A
// request that sets its own Authorization (the subscription API's callback
// and claim tokens) is sent as it is.
const origin = process.env.GATE_AUTH_ORIGIN;
const key = process.env.GATE_AUTH_KEY;
if (!origin || !key) throw new Error("conformance_auth.mjs needs GATE_AUTH_ORIGIN and GATE_AUTH_KEY");

const original = globalThis.fetch;
globalThis.fetch = function fetchWithKey(input, init = undefined) {
  const url = input instanceof Request ? input.url : String(input);
  let sameOrigin = false;
  try {
    sameOrigin = new URL(url).origin === origin;
  } catch {
    /* not a URL: passed on as it is */
  }
  if (!sameOrigin) return original(input, init);
  const headers = new Headers(init?.headers ?? (input instanceof Request ? input.headers : undefined));
  if (!headers.has("authorization")) headers.set("authorization", `Bearer ${key}`);
  return original(input, { ...(init ?? {}), headers });
};
