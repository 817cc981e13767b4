// A small seeded pseudo-random generator (mulberry32) so that a chaos run's
// workload choices and nemesis schedule repeat for one --seed.
export class Rng {
  constructor(seed) {
    this.state = seed >>> 0 || 1;
  }

  // A float in [0, 1).
  next() {
    let t = (this.state = (this.state + 0x6d2b79f5) >>> 0);
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }

  // An integer in [lo, hi] (both inclusive).
  int(lo, hi) {
    return lo + Math.floor(this.next() * (hi - lo + 1));
  }

  pick(list) {
    return list[Math.floor(this.next() * list.length)];
  }

  // A new generator derived from this one (for an independent client).
  fork() {
    return new Rng(Math.floor(this.next() * 4294967296));
  }
}

export { sleep } from "../../lib/server.mjs";
