// chart.js: a small live line chart in SVG (one or two series over the
// last points), drawn by hand: the console needs a few sparklines, not a
// charting library. The SVG has role="img" and a label that says the
// latest values, for screen readers.

const W = 300, H = 90, PAD = 4;

export class Chart {
  // title: the caption; unit: formats a value; names: the series' names.
  constructor(title, format, names = [null], points = 60) {
    Object.assign(this, { title, format, names, points });
    this.series = names.map(() => []);
    const ns = "http://www.w3.org/2000/svg";
    this.svg = document.createElementNS(ns, "svg");
    this.svg.setAttribute("class", "chart");
    this.svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
    this.svg.setAttribute("preserveAspectRatio", "none");
    this.svg.setAttribute("role", "img");
    for (const y of [PAD, H / 2, H - PAD]) {
      const g = document.createElementNS(ns, "line");
      g.setAttribute("class", "grid");
      g.setAttribute("x1", 0);
      g.setAttribute("x2", W);
      g.setAttribute("y1", y);
      g.setAttribute("y2", y);
      this.svg.append(g);
    }
    this.lines = names.map((_, i) => {
      const p = document.createElementNS(ns, "polyline");
      p.setAttribute("class", i ? "line b" : "line");
      this.svg.append(p);
      return p;
    });
    this.now = document.createElement("span");
    this.now.className = "now";
    this.max = document.createElement("span");
    const caption = document.createElement("figcaption");
    const t = document.createElement("span");
    t.textContent = title;
    caption.append(t, this.now);
    this.figure = document.createElement("figure");
    this.figure.append(caption, this.svg);
    if (names.length > 1) {
      const legend = document.createElement("div");
      legend.className = "legend";
      names.forEach((n, i) => {
        const s = document.createElement("span");
        s.className = i ? "b" : "";
        s.textContent = `${i ? " · " : ""}${n}`;
        legend.append(s);
      });
      legend.append(this.max);
      this.figure.append(legend);
    } else {
      this.max.className = "legend";
      this.figure.append(this.max);
    }
    this.draw();
  }

  // Adds one point per series (null: a gap, drawn as 0).
  push(...values) {
    values.forEach((v, i) => {
      this.series[i].push(v);
      if (this.series[i].length > this.points) this.series[i].shift();
    });
    this.draw();
  }

  draw() {
    const top = Math.max(1e-9, ...this.series.flat().filter((v) => v !== null));
    this.lines.forEach((line, i) => {
      const s = this.series[i];
      const pts = s.map((v, k) => {
        const x = (W * (k + this.points - s.length)) / (this.points - 1);
        const y = H - PAD - ((v ?? 0) / top) * (H - 2 * PAD);
        return `${x.toFixed(1)},${y.toFixed(1)}`;
      });
      line.setAttribute("points", pts.join(" "));
    });
    const latest = this.series.map((s) => (s.length ? s[s.length - 1] : null));
    const text = latest.map((v) => (v === null ? "–" : this.format(v))).join(" / ");
    this.now.textContent = text;
    this.max.textContent = ` peak ${this.format(top === 1e-9 ? 0 : top)}`;
    this.svg.setAttribute("aria-label", `${this.title}: ${text}`);
  }
}
