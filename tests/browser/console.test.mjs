// The web console (/__runnel/console, docs/ADMIN.md "The console") in a
// real browser: Debian's chromium, headless, driven by puppeteer-core (as
// cors.test.mjs launches it). A node with an admin token and a few
// buckets: the page asks for the token, then shows the overview (health,
// version, uptime) and charts that move with appends made during the test;
// the buckets with their usage and a bucket's streams, reached with the
// keyboard; a stream's page whose live tail shows an append made during
// the test within one second (text, JSON and binary each shown as such),
// with its producers and subscriptions; the purge, whose button stays
// disabled until the bucket's name is typed, then purges it; on a node of
// a 3-node cluster, the nodes and each group's leader, term and replicas
// with their applied index and lag. No page logs an error. Screenshots at
// 1280x800 and at a phone's 390x844 go to RUNNEL_CONSOLE_SHOTS (default: a
// temporary directory); the current ones are docs/console/*.png. About
// 30 s.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { after, before, describe, test } from "node:test";
import { Server, sleep, tempDir } from "../lib/server.mjs";
import { Cluster } from "../cluster/runnel_cluster.mjs";

const CHROMIUM = process.env.RUNNEL_CHROMIUM ?? "/usr/bin/chromium";
const TOKEN = "console-test-token-0123456789";
const work = tempDir("runnel-console-");
const shots = process.env.RUNNEL_CONSOLE_SHOTS ?? path.join(work, "shots");
fs.mkdirSync(shots, { recursive: true });
const tokenFile = path.join(work, "admin.token");
fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
const server = new Server({ args: ["--admin-token-file", tokenFile] });

let browser, page;
const problems = []; // console errors and page errors, from every page

async function put(p, type, body, headers = {}) {
  const r = await fetch(`${server.url}${p}`, { method: "PUT", headers: { "content-type": type, ...headers }, body });
  assert.ok(r.status === 201 || r.status === 200, `PUT ${p}: ${r.status} ${await r.text()}`);
}
async function append(p, type, body, headers = {}) {
  const r = await fetch(`${server.url}${p}`, { method: "POST", headers: { "content-type": type, ...headers }, body });
  assert.ok(r.status === 204 || r.status === 200, `POST ${p}: ${r.status} ${await r.text()}`);
}

before(async () => {
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is missing (scripts/setup.sh test installs Debian's chromium)`);
  let puppeteer;
  try {
    puppeteer = (await import("puppeteer-core")).default;
  } catch (e) {
    assert.fail(`puppeteer-core is not installed (cd tests/browser && npm ci): ${e.message}`);
  }
  await server.start();
  await put("/shop/orders", "application/json", '[{"id":1,"total":12.5}]');
  await put("/shop/logs", "text/plain", "first line\n");
  await put("/shop/blob", "application/octet-stream", Buffer.from([0, 1, 2, 250]));
  await append("/shop/logs", "text/plain", "second line\n", { "producer-id": "web-1", "producer-epoch": "2", "producer-seq": "0" });
  for (let i = 0; i < 12; i++) await put(`/archive/item-${String(i).padStart(2, "0")}`, "text/plain", `archived ${i}`);
  await put("/scratch/a", "text/plain", "to be purged");
  const sub = await fetch(`${server.url}/v1/stream/__ds/subscriptions/console-sub`, {
    method: "PUT", headers: { "content-type": "application/json" },
    body: JSON.stringify({ type: "pull-wake", streams: ["shop/logs"], wake_stream: "shop/orders" }),
  });
  assert.ok(sub.status === 201 || sub.status === 200, await sub.text());
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: tempDir("runnel-chromium-"),
    args: ["--no-sandbox", "--headless", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"],
  });
  page = await browser.newPage();
  page.on("console", (m) => { if (m.type() === "error") problems.push(`console: ${m.text()}`); });
  page.on("pageerror", (e) => problems.push(`page: ${e.message}`));
  await page.setViewport({ width: 1280, height: 800 });
});

after(async () => {
  await browser?.close();
  const r = await server.stop();
  assert.equal(r?.code, 0, `graceful stop: ${JSON.stringify(r)}`);
  assert.ok(!/Sanitizer|runtime error/.test(server.log), `no sanitizer report:\n${server.logTail(40)}`);
});

const shot = (name) => page.screenshot({ path: path.join(shots, name), fullPage: false });
const text = (sel) => page.$eval(sel, (e) => e.textContent);

describe("the console", () => {
  test("asks for the admin token, then shows the overview", async () => {
    const r = await fetch(`${server.url}/__runnel/console`);
    assert.equal(r.status, 200);
    assert.match(r.headers.get("content-security-policy") ?? "", /default-src 'none'; script-src 'self'/);
    await page.goto(`${server.url}/__runnel/console`);
    await page.waitForSelector("#login:not([hidden])");
    await page.type("#token", TOKEN);
    await page.keyboard.press("Enter");
    await page.waitForSelector("#health");
    assert.match(await text("#health"), /ready/);
    assert.match(await text("#version"), /^\d+\.\d+\.\d+/);
    assert.equal(await text("#streams"), "16");
    assert.equal(await page.evaluate(() => sessionStorage.getItem("runnel-console-token")), TOKEN);
  });

  test("the charts move with appends made now", async () => {
    const first = () => page.$eval("#charts figure .now", (e) => e.textContent);
    await page.waitForFunction(() => document.querySelector("#charts figure .now")?.textContent !== "–", { timeout: 10000 });
    const points = () => page.$eval("#charts figure polyline", (e) => e.getAttribute("points"));
    const before = await points();
    const end = Date.now() + 6000;
    let moved = false;
    while (Date.now() < end && !moved) {
      for (let i = 0; i < 20; i++) await append("/shop/logs", "text/plain", `load ${i}\n`);
      await sleep(500);
      moved = (await points()) !== before && Number((await first()).split(" ")[0]) > 0;
    }
    assert.ok(moved, `the appends chart moved: ${before} -> ${await points()} (${await first()})`);
    await shot("overview-1280x800.png");
  });

  test("buckets with their usage, reached with the keyboard, and a bucket's streams", async () => {
    await page.focus('nav a[data-section="buckets"]');
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => [...document.querySelectorAll("td a")].some((a) => a.textContent === "archive"));
    const rows = await page.$$eval("tbody tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
    const shop = rows.find((r) => r[0] === "shop");
    assert.equal(shop[1], "3", "shop has three streams");
    assert.ok(Number(shop[7]) >= 4, `writes counted: ${shop}`);
    await page.goto(`${server.url}/__runnel/console#/bucket/archive`);
    await page.waitForSelector("#bucket-summary");
    await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 12);
    await page.type("#prefix", "item-1");
    await page.keyboard.press("Enter");
    await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 2);
  });

  test("a stream's live tail shows an append made now within a second", async () => {
    await page.goto(`${server.url}/__runnel/console#/stream/shop/logs`);
    await page.waitForSelector("#tail[data-live]");
    await page.waitForFunction(() => /^live/.test(document.getElementById("tail-status").textContent));
    assert.doesNotMatch(await page.$eval("#view", (e) => e.innerText), /\bnull\b|undefined/, "no placeholder leaks into the page");
    const producers = await page.$$eval("table tbody tr", (trs) => trs.map((tr) => tr.children[0].textContent));
    assert.ok(producers.includes("web-1") && producers.includes("console-sub"), `producers and subscriptions: ${producers}`);
    const marker = `appended during the test ${Date.now()}`;
    const t0 = Date.now();
    await append("/shop/logs", "text/plain", `${marker}\n`);
    await page.waitForFunction((m) => document.getElementById("tail").textContent.includes(m), { timeout: 5000 }, marker);
    const ms = Date.now() - t0;
    assert.ok(ms <= 1000, `the append showed after ${ms} ms`);
    await shot("stream-1280x800.png");
    await page.goto(`${server.url}/__runnel/console#/stream/shop/orders`);
    await page.waitForSelector("#tail[data-live]");
    await append("/shop/orders", "application/json", '[{"id": 2, "total": 7}]');
    await page.waitForFunction(() => document.getElementById("tail").textContent.includes('{"id":2,"total":7}'));
    await page.goto(`${server.url}/__runnel/console#/stream/shop/blob`);
    await page.waitForSelector("#tail[data-live]");
    await append("/shop/blob", "application/octet-stream", Buffer.from([0xde, 0xad, 0xbe, 0xef]));
    await page.waitForFunction(() => document.getElementById("tail").textContent.includes("4 bytes  de ad be ef"));
  });

  test("the purge waits for the bucket's name, then purges it", async () => {
    await page.goto(`${server.url}/__runnel/console#/bucket/scratch`);
    await page.waitForSelector("#purge-open");
    await page.click("#purge-open");
    await page.waitForSelector("#purge-dialog[open]");
    await page.type("#purge-confirm", "scratc");
    assert.equal(await page.$eval("#purge-go", (b) => b.disabled), true, "a partial name does not enable it");
    await page.keyboard.press("Enter");
    await sleep(300);
    assert.equal((await fetch(`${server.url}/scratch/again`, { method: "PUT" })).status, 201, "nothing purged yet");
    await page.type("#purge-confirm", "h");
    assert.equal(await page.$eval("#purge-go", (b) => b.disabled), false);
    await page.click("#purge-go");
    await page.waitForFunction(() => /Purged/.test(document.getElementById("purge-status").textContent), { timeout: 10000 });
    const r = await fetch(`${server.url}/scratch/again2`, { method: "PUT" });
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, "BUCKET_ERASED");
    await page.keyboard.press("Escape");
  });

  test("on a phone-sized screen: no sideways scrolling, and the same views", async () => {
    await page.setViewport({ width: 390, height: 844, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    await page.goto(`${server.url}/__runnel/console#/overview`);
    await page.reload(); /* a fresh page at the new size (sessionStorage keeps the token) */
    await page.waitForSelector("#health", { timeout: 10000 }).catch(async (e) => {
      throw new Error(`${e.message}; the page shows: ${await page.$eval("body", (b) => b.innerText.slice(0, 500))}`);
    });
    await page.waitForFunction(() => document.querySelector("#charts figure .now")?.textContent !== "–", { timeout: 10000 });
    const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(wide <= 0, `the page is ${wide} px wider than the screen`);
    await shot("overview-390x844.png");
    await page.goto(`${server.url}/__runnel/console#/stream/shop/logs`);
    await page.waitForSelector("#tail[data-live]");
    await append("/shop/logs", "text/plain", "seen on a phone\n");
    await page.waitForFunction(() => document.getElementById("tail").textContent.includes("seen on a phone"));
    assert.ok(await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth) <= 0);
    await shot("stream-390x844.png");
  });

  test("on a cluster node: the nodes, each group's leader, term and replicas", async () => {
    const c = await Cluster.start({ groups: 3 });
    try {
      await page.setViewport({ width: 1280, height: 800 });
      await page.goto(`${c.url(2)}/__runnel/console`);
      await page.waitForSelector("#login:not([hidden])");
      await page.type("#token", c.admin.authorization.slice("Bearer ".length));
      await page.keyboard.press("Enter");
      await page.waitForSelector("#cluster-title", { timeout: 15000 });
      assert.match(await text("#cluster-title"), new RegExp(`Cluster ${c.clusterId} \\(node 2\\)`));
      const groups = await page.$$eval("#cluster-groups tbody tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.innerText)));
      assert.equal(groups.length, 3);
      for (const [g, leader, , , replicas] of groups) {
        assert.match(leader, /^[123]$/, `group ${g} has a leader`);
        assert.match(replicas, /^node 1: \d+ · \d+ · voter\nnode 2: .*\nnode 3: /);
      }
      assert.equal(await page.$$eval("#cluster-nodes tbody tr", (trs) => trs.length), 3);
      await page.waitForFunction(() => document.querySelector("#charts figure .now")?.textContent !== "–", { timeout: 10000 });
      await shot("cluster-1280x800.png");
    } finally {
      c.stopChecked();
    }
  });

  test("no page logged an error", () => {
    assert.deepEqual(problems, []);
  });
});
