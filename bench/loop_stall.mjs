// How long the server's loop holds requests back while it works through
// every stream (measured by hand; BENCHMARKS.md "Scrapes of a large store",
// "The expiry sweep on a large store" and "Listings of a large store").
// Usage: node bench/loop_stall.mjs scrape URL [ROUNDS]
//        node bench/loop_stall.mjs get URL PATH [ROUNDS]
//        node bench/loop_stall.mjs idle URL [SECONDS]
// A client on one kept-alive connection sends HEAD /__runnel/livez back to
// back and times each answer.
//   scrape: per round, one GET /__runnel/metrics on its own connection
//           while the HEADs run from 50 ms before it to 50 ms after it;
//           prints the scrape's time and the longest and median HEAD.
//   get:    the same with GET PATH (an operator's listing page, say
//           /__runnel/admin/buckets/bench/streams?limit=1000).
//   idle:   HEADs for SECONDS, nothing else; prints each second's longest
//           HEAD (the periodic expiry sweep shows there) and the median.
import http from "node:http";

const args = process.argv.slice(2);
const mode = args[0], url = args[1];
const path = mode === "get" ? args[2] : "/__runnel/metrics";
const countArg = mode === "get" ? args[3] : args[2];
if (!["scrape", "get", "idle"].includes(mode) || !url || !path) {
  console.error("usage: node bench/loop_stall.mjs scrape URL [ROUNDS] | get URL PATH [ROUNDS] | idle URL [SECONDS]");
  process.exit(2);
}
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

function timed(path, method, a) {
  const t0 = process.hrtime.bigint();
  return new Promise((resolve, reject) => {
    const rq = http.request(`${url}${path}`, { method, agent: a }, (rs) => {
      rs.resume();
      rs.on("end", () => resolve(Number(process.hrtime.bigint() - t0) / 1e6));
    });
    rq.on("error", reject);
    rq.end();
  });
}

const head = () => timed("/__runnel/livez", "HEAD", agent);
const median = (xs) => [...xs].sort((a, b) => a - b)[xs.length >> 1];

if (mode !== "idle") {
  const rounds = Number(countArg ?? 5);
  for (let r = 0; r < rounds; r++) {
    let done = false;
    const heads = [];
    const prober = (async () => {
      while (!done) heads.push(await head());
    })();
    await sleep(50);
    const scrape = await timed(path, "GET", false);
    await sleep(50);
    done = true;
    await prober;
    console.log(`round ${r + 1}: ${mode === "get" ? "GET" : "scrape"} ${scrape.toFixed(1)} ms; ${heads.length} HEADs: ` +
      `median ${median(heads).toFixed(2)} ms, max ${Math.max(...heads).toFixed(1)} ms`);
    await sleep(200);
  }
} else {
  const seconds = Number(countArg ?? 30);
  const all = [];
  for (let s = 0; s < seconds; s++) {
    const end = Date.now() + 1000;
    const heads = [];
    while (Date.now() < end) heads.push(await head());
    all.push(...heads);
    console.log(`second ${s + 1}: ${heads.length} HEADs, longest ${Math.max(...heads).toFixed(1)} ms`);
  }
  console.log(`${all.length} HEADs: median ${median(all).toFixed(2)} ms, longest ${Math.max(...all).toFixed(1)} ms`);
}
agent.destroy();
