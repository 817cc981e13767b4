// How long a metrics scrape holds other requests back on a large store
// (measured by hand; BENCHMARKS.md "Scrapes of a large store").
// Usage: node bench/scrape_stall.mjs URL [ROUNDS]
// Per round: one GET /__runnel/metrics on its own connection while a
// client on another kept-alive connection sends HEAD /__runnel/livez back
// to back from just before the scrape until just after it; prints the
// scrape's time and the longest and median HEAD answer times.
import http from "node:http";

const [url, roundsArg] = process.argv.slice(2);
if (!url) {
  console.error("usage: node bench/scrape_stall.mjs URL [ROUNDS]");
  process.exit(2);
}
const rounds = Number(roundsArg ?? 5);
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });

function get(path, method, a) {
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

for (let r = 0; r < rounds; r++) {
  let done = false;
  const heads = [];
  const prober = (async () => {
    while (!done) heads.push(await get("/__runnel/livez", "HEAD", agent));
  })();
  await new Promise((res) => setTimeout(res, 50));
  const scrape = await get("/__runnel/metrics", "GET", false);
  await new Promise((res) => setTimeout(res, 50));
  done = true;
  await prober;
  heads.sort((a, b) => a - b);
  console.log(`round ${r + 1}: scrape ${scrape.toFixed(1)} ms; ${heads.length} HEADs: ` +
    `median ${heads[heads.length >> 1].toFixed(2)} ms, max ${heads[heads.length - 1].toFixed(1)} ms`);
  await new Promise((res) => setTimeout(res, 200));
}
agent.destroy();
