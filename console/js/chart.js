// The chart of certificates expiring per day: an inline SVG drawn here (no library), one bar a
// day, labelled for screen readers as an image named "Certificates expiring per day" whose
// description gives the busiest days; each bar also carries its own <title>.
import { svg, h } from "./dom.js";

const W = 720;
const H = 180;
const PAD = { left: 36, right: 8, top: 10, bottom: 26 };

/** `days`: [{date: "YYYY-MM-DD", count}] in date order. */
export function expiryChart(days) {
  const max = Math.max(1, ...days.map((d) => d.count));
  const total = days.reduce((s, d) => s + d.count, 0);
  const bw = (W - PAD.left - PAD.right) / Math.max(1, days.length);
  const y = (n) => PAD.top + (H - PAD.top - PAD.bottom) * (1 - n / max);
  const busiest = [...days].filter((d) => d.count > 0).sort((a, b) => b.count - a.count).slice(0, 3);
  const summary = `${total} certificate${total === 1 ? "" : "s"} expire in the next ${days.length} days` +
    (busiest.length ? `; most on ${busiest.map((d) => `${d.date} (${d.count})`).join(", ")}` : "");
  const bars = days.map((d, i) =>
    d.count === 0 ? null : svg("rect", { x: (PAD.left + i * bw + 0.5).toFixed(1), y: y(d.count).toFixed(1), width: Math.max(1, bw - 1).toFixed(1), height: (H - PAD.bottom - y(d.count)).toFixed(1), class: "bar" }, svg("title", {}, `${d.date}: ${d.count}`)),
  );
  const ticks = [0, Math.ceil(max / 2), max].filter((v, i, a) => a.indexOf(v) === i);
  const labels = [0, 30, 60, days.length - 1].filter((i) => days[i]).map((i) => svg("text", { x: PAD.left + (i + 0.5) * bw, y: H - 8, class: "axis", "text-anchor": i === 0 ? "start" : i === days.length - 1 ? "end" : "middle" }, days[i].date.slice(5)));
  const chart = svg(
    "svg",
    { role: "img", "aria-label": "Certificates expiring per day", "aria-describedby": "chart-summary", viewBox: `0 0 ${W} ${H}`, class: "chart" },
    ticks.map((t) => [svg("line", { x1: PAD.left, x2: W - PAD.right, y1: y(t), y2: y(t), class: "grid" }), svg("text", { x: 2, y: y(t) + 4, class: "axis" }, String(t))]),
    bars,
    labels,
  );
  return h("figure", { class: "chart-box" }, chart, h("figcaption", { id: "chart-summary" }, summary));
}
