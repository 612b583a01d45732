// Builds the page's nodes. Every value that comes from the API is inserted as text (text nodes,
// textContent, attributes set one by one), never parsed as HTML: a certificate whose common name
// is "<script>…" shows those characters and runs nothing (docs/console.md "Safety").

/** h("button", {type: "button", onclick: f}, "Label", child…): an element with attributes and children. */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  setAttrs(el, attrs);
  add(el, children);
  return el;
}

/** An SVG element (the expiry chart). */
export function svg(tag, attrs = {}, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  setAttrs(el, attrs);
  add(el, children);
  return el;
}

function setAttrs(el, attrs) {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on") && typeof v === "function") el.addEventListener(k.slice(2), v);
    else el.setAttribute(k, v === true ? "" : String(v));
  }
}

/** Appends children: nodes as they are, anything else as a text node. */
export function add(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function clear(el) {
  el.replaceChildren();
  return el;
}

/** A link inside the console: the hash route, each part encoded, so no value can leave "#/". */
export function link(parts, text, attrs = {}) {
  return h("a", { href: route(parts), ...attrs }, text);
}

export function route(parts) {
  return "#/" + parts.map((p) => encodeURIComponent(p)).join("/");
}

/** A table with header cells (scope col) and one row per item. */
export function table(caption, headers, rows) {
  return h(
    "table",
    {},
    h("caption", {}, caption),
    h("thead", {}, h("tr", {}, headers.map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, rows),
  );
}

/** A definition list from [term, value] pairs. */
export function facts(pairs) {
  return h("dl", { class: "facts" }, pairs.map(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]));
}

/** "in 3 days", "2 hours ago": how far a time is from now. */
export function relative(ms) {
  const d = ms - Date.now();
  const abs = Math.abs(d);
  const units = [["day", 86400e3], ["hour", 3600e3], ["minute", 60e3]];
  let text = "now";
  for (const [name, size] of units) {
    if (abs >= size) {
      const n = Math.floor(abs / size);
      text = `${n} ${name}${n === 1 ? "" : "s"}`;
      break;
    }
  }
  if (text === "now") return text;
  return d >= 0 ? `in ${text}` : `${text} ago`;
}

/** An RFC 3339 date-time, shortened to the minute in UTC. */
export function when(ms) {
  if (!Number.isFinite(ms) || ms <= 0) return "—";
  return new Date(ms).toISOString().slice(0, 16).replace("T", " ") + " UTC";
}

export function parseTime(v) {
  if (typeof v === "number") return v > 1e12 ? v : v * 1000;
  if (typeof v === "string" && v) return Date.parse(v);
  return NaN;
}
