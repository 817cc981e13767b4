// --max-connections-per-ip: open connections from one client address are
// bounded; one more is closed at accept without an answer, other addresses
// are served, and a slot returns when a connection of that address closes.
// Without the option (the default) one address may open many. Clients bind
// 127.0.0.4 and 127.0.0.5 (both loopback) as their source address, so the
// keep-alive connection of Server.start()'s readiness poll (from 127.0.0.1)
// counts against neither.
import assert from "node:assert/strict";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Server, sleep } from "./lib/server.mjs";

// A keep-alive connection from localAddress that asks for readyz once.
// Resolves to { sock, answered: the status or null, closed: whether the
// server closed it } after an answer, a close or 3 s.
function ask(port, localAddress) {
  return new Promise((resolve) => {
    const sock = net.connect({ port, host: "127.0.0.1", localAddress });
    let data = "";
    let closed = false;
    const done = () => {
      clearTimeout(timer);
      const m = /^HTTP\/1\.1 (\d{3})/.exec(data);
      resolve({ sock, answered: m ? Number(m[1]) : null, closed });
    };
    const timer = setTimeout(done, 3000);
    sock.on("connect", () => sock.write("GET /__runnel/readyz HTTP/1.1\r\nHost: x\r\n\r\n"));
    sock.on("data", (d) => {
      data += d;
      if (data.includes("\r\n\r\nready\n")) done();
    });
    sock.on("error", () => {});
    sock.on("close", () => {
      closed = true;
      done();
    });
  });
}

describe("--max-connections-per-ip 3", () => {
  const srv = new Server({ args: ["--max-connections-per-ip", "3"] });
  before(() => srv.start());
  after(() => srv.stop());

  test("three connections of one address are served, a fourth is closed unanswered; another address is served; a slot returns on close", async () => {
    const held = [];
    for (let i = 0; i < 3; i++) held.push(await ask(srv.port, "127.0.0.4"));
    assert.deepEqual(held.map((c) => [c.answered, c.closed]), [[200, false], [200, false], [200, false]]);

    const fourth = await ask(srv.port, "127.0.0.4");
    assert.deepEqual([fourth.answered, fourth.closed], [null, true], "the fourth is closed at accept without an answer");

    const other = await ask(srv.port, "127.0.0.5");
    assert.deepEqual([other.answered, other.closed], [200, false], "another address is served");

    held[0].sock.destroy();
    let again = null;
    for (let i = 0; i < 20; i++) {
      again = await ask(srv.port, "127.0.0.4");
      if (again.answered === 200) break;
      await sleep(100);
    }
    assert.equal(again.answered, 200, "a slot returned once a connection closed");
    for (const c of [...held, other, again]) c.sock.destroy();
  });
});

describe("without the option", () => {
  const srv = new Server();
  before(() => srv.start());
  after(() => srv.stop());

  test("one address opens 20 connections, all served", async () => {
    const conns = await Promise.all(Array.from({ length: 20 }, () => ask(srv.port, "127.0.0.4")));
    assert.deepEqual(conns.map((c) => c.answered), Array(20).fill(200));
    for (const c of conns) c.sock.destroy();
  });
});
