// The two places tests/client_ts/client.test.mjs points the official client
// at: a single node (`runnel serve`) and a 3-node cluster reached through a
// node that leads no Raft group, so every write is forwarded and every read
// answered as a follower answers it. Each target gives the base URL of the
// node the client talks to (`base()`), and says afterwards whether that
// node still led no group (`stillFollower()`).
//
// The cluster runs with the nodes' defaults (writes for another node's
// group forwarded to its leader, reads on a follower confirmed with the
// leader first), 2 groups and a 2 s election timeout: with 3 nodes and 2
// groups at least one node leads nothing. CLIENT_TS_CLUSTER_ARGS adds serve
// flags: `--forward-writes=false` (307s instead) or `--follower-reads local`
// make the checks fail the way issue 28 describes.
import { Cluster } from "../cluster/runnel_cluster.mjs";
import { Server } from "../lib/server.mjs";

const GROUPS = 2;
const SANITIZER_REPORT = /ERROR: (Address|Leak)Sanitizer|runtime error:/;
export const CLUSTER_ARGS = (process.env.CLIENT_TS_CLUSTER_ARGS ?? "").split(/\s+/).filter(Boolean);

export class SingleNode {
  name = "single";

  async start() {
    this.server = await new Server().start();
  }

  base() {
    return this.server.url;
  }

  async stillFollower() {
    return true;
  }

  // Stops with SIGTERM: true when it exited 0 and its log holds no
  // sanitizer report.
  async stop() {
    const r = await this.server?.stop();
    return (r === null || r?.code === 0) && !SANITIZER_REPORT.test(this.server?.log ?? "");
  }
}

export class ClusterThroughFollower {
  name = "cluster";

  async start() {
    this.cluster = await Cluster.start({ groups: GROUPS, args: ["--election-timeout-ms", "2000", ...CLUSTER_ARGS] });
    this.node = await this.#leadingNone();
  }

  // The nodes leading a group (as every node agrees), and one that leads
  // none: the current one when it still leads none.
  async #leadingNone() {
    const leaders = new Set();
    for (let g = 0; g < GROUPS; g++) leaders.add((await this.cluster.leaderOf(g)).node);
    if (this.node && !leaders.has(this.node)) return this.node;
    for (let n = 1; n <= this.cluster.nodes; n++) if (!leaders.has(n)) return n;
    throw new Error(`every node leads a group (${[...leaders]}): cannot happen with ${GROUPS} groups`);
  }

  // Picks the node for the next check (the same one unless it became a
  // leader meanwhile).
  async pick() {
    this.node = await this.#leadingNone();
    return this.node;
  }

  base() {
    return this.cluster.url(this.node);
  }

  async stillFollower() {
    return (await this.#leadingNone()) === this.node;
  }

  // Stops every node with SIGTERM: true when all exited cleanly and no
  // node's log holds a sanitizer report.
  async stop() {
    if (!this.cluster) return true;
    const clean = this.cluster.stop();
    return clean && this.cluster.sanitizerReports() === ""; // after the exits: leaks are reported there
  }
}
