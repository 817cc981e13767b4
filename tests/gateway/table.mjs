// One table of cases run against both forms of the gate: a describe per
// form (standalone gateway, embedded gate) with a fresh deployment each,
// every case a test, and a last test asserting that each case answered the
// same in both forms (status, body, header names; checks.mjs comparable).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { isDeepStrictEqual } from "node:util";
import { comparable } from "./checks.mjs";
import { MODES } from "./lib.mjs";

// title; start(mode) -> a context with `d` (a Deployment), stopped after
// the cases (stop(ctx) when given, else d.stop()); cases: [{name, run(ctx)
// -> the answer to compare across forms, or null}].
export function modeTable(title, { start, stop = null, cases }) {
  const seen = Object.fromEntries(MODES.map((m) => [m, new Map()]));
  for (const mode of MODES) {
    describe(`${title} (${mode})`, () => {
      let ctx = null;
      before(async () => {
        ctx = await start(mode);
      });
      after(async () => {
        if (ctx) await (stop ? stop(ctx) : ctx.d.stop());
      });
      for (const c of cases) {
        test(c.name, async () => {
          const r = await c.run(ctx);
          if (r) seen[mode].set(c.name, comparable(r));
        });
      }
    });
  }
  describe(`${title} (both forms)`, () => {
    test("each case answered the same standalone and embedded", () => {
      const diffs = [];
      let compared = 0;
      for (const [name, a] of seen.standalone) {
        const b = seen.embedded.get(name);
        if (!b) continue;
        compared++;
        if (!isDeepStrictEqual(a, b)) diffs.push({ name, standalone: a, embedded: b });
      }
      assert.ok(compared > 0, "some case answered in both forms");
      assert.deepEqual(diffs, [], "answers that differ between the forms");
    });
  });
}
