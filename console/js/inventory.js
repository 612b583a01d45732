// The certificate inventory of a PKI mount: LIST <mount>/certs/detailed (OpenBao's path)
// page by page, ordered by expiry. The search box matches the common name or a SAN: two filtered
// lists (common_name=…, san=…) merged in the same order, each with its own cursor, so paging
// stays exact without asking the server for an OR. A substring-filtered page reads a bounded
// window of the inventory on the server and may hold fewer rows than asked while more follow
// (`next_after`, docs/pki-inventory.md "Substring search"): the search follows the cursor until
// it has a page or reaches the end, showing "Searching…" with a Stop button meanwhile.
import { h, add, clear, link, when, parseTime } from "./dom.js";
import { list, p } from "./api.js";
import { section, failure } from "./ui.js";

export const PAGE_SIZE = 50;

function rowOf(serial, info) {
  return {
    serial,
    commonName: String(info?.common_name ?? ""),
    notAfter: parseTime(info?.not_after),
    state: String(info?.state ?? (info?.revoked ? "revoked" : "")),
    sans: Array.isArray(info?.alt_names) ? info.alt_names.map(String) : [],
  };
}

const order = (a, b) => a.notAfter - b.notAfter || (a.serial < b.serial ? -1 : a.serial > b.serial ? 1 : 0);

/** One filtered stream: rows already fetched but not shown, and where the next fetch starts. */
function stream(filters) {
  return { filters, buffer: [], after: "", done: false, windowed: Boolean(filters.common_name || filters.san) };
}

/**
 * One request of a stream. A substring-filtered answer continues at `next_after` and ends only
 * without one (a short page with a cursor is not the end); other answers are OpenBao's keyset
 * pages, continued after their last key and ended by a short page.
 */
async function fetchOnce(mount, s) {
  const data = await list(p(mount, "certs", "detailed"), { ...s.filters, sort: "not_after", order: "asc", limit: String(PAGE_SIZE), after: s.after || undefined });
  const keys = (data.keys ?? []).map(String);
  s.buffer.push(...keys.map((k) => rowOf(k, data.key_info?.[k])));
  if (s.windowed) {
    if (typeof data.next_after === "string" && data.next_after) s.after = data.next_after;
    else s.done = true;
  } else {
    s.after = keys[keys.length - 1] ?? s.after;
    if (keys.length < PAGE_SIZE) s.done = true;
  }
}

/** Fetches until the stream has a row to show, is done, or the search is stopped. */
async function head(mount, s, ctl) {
  while (s.buffer.length === 0 && !s.done && !ctl.stopped) {
    await fetchOnce(mount, s);
    ctl.requests += 1;
    ctl.progress();
  }
}

/**
 * The next page of the merged streams; the streams advance past what it shows. A row is shown
 * only once every stream that is not done has a row to compare it with, so a stopped search
 * shows the rows known to come first and `Next` continues from there.
 */
export async function nextPage(mount, streams, ctl) {
  const page = [];
  const seen = new Set();
  while (page.length < PAGE_SIZE) {
    await Promise.all(streams.map((s) => head(mount, s, ctl)));
    if (streams.some((s) => s.buffer.length === 0 && !s.done)) break;
    const heads = streams.filter((s) => s.buffer.length > 0);
    if (heads.length === 0) break;
    const best = heads.reduce((a, b) => (order(b.buffer[0], a.buffer[0]) < 0 ? b : a));
    const row = best.buffer.shift();
    for (const s of streams) if (s !== best && s.buffer[0]?.serial === row.serial) s.buffer.shift();
    if (!seen.has(row.serial)) page.push(row);
    seen.add(row.serial);
  }
  const more = streams.some((s) => s.buffer.length > 0 || !s.done);
  return { page, more };
}

const snapshot = (streams) => streams.map((s) => ({ ...s, buffer: [...s.buffer], filters: { ...s.filters } }));

function filtersForm(onChange, stop) {
  const search = h("input", { id: "cert-search", type: "search", autocomplete: "off", placeholder: "common name or SAN" });
  const state = h("select", { id: "cert-state" }, ["", "valid", "expired", "revoked"].map((v) => h("option", { value: v }, v || "any")));
  const before = h("input", { id: "cert-before", type: "date" });
  const after = h("input", { id: "cert-after", type: "date" });
  const role = h("input", { id: "cert-role", type: "text", autocomplete: "off", size: 10 });
  const issuer = h("input", { id: "cert-issuer", type: "text", autocomplete: "off", size: 10, placeholder: "id or name" });
  const values = () => ({
    q: search.value.trim(),
    state: state.value,
    role: role.value.trim(),
    issuer_ref: issuer.value.trim(),
    expires_before: before.value ? `${before.value}T00:00:00Z` : "",
    expires_after: after.value ? `${after.value}T00:00:00Z` : "",
  });
  const form = h(
    "form",
    { class: "filters", role: "search", "aria-label": "Certificate filters" },
    h("label", { for: "cert-search" }, "Search certificates"), search,
    h("label", { for: "cert-state" }, "Status"), state,
    h("label", { for: "cert-role" }, "Role"), role,
    h("label", { for: "cert-issuer" }, "Issuer"), issuer,
    h("label", { for: "cert-after" }, "Expires after"), after,
    h("label", { for: "cert-before" }, "Expires before"), before,
    h("button", { type: "submit" }, "Search"),
    stop,
  );
  // Escape in the search box stops a search in progress, as the Stop button does.
  search.addEventListener("keydown", (ev) => {
    if (ev.key === "Escape" && !stop.hidden) {
      ev.preventDefault();
      stop.click();
    }
  });
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    onChange(values());
  });
  for (const el of [state, before, after]) el.addEventListener("change", () => onChange(values()));
  return form;
}

export function streamsFor(v) {
  const base = { state: v.state, role: v.role, issuer_ref: v.issuer_ref, expires_before: v.expires_before, expires_after: v.expires_after };
  if (!v.q) return [stream(base)];
  return [stream({ ...base, common_name: v.q }), stream({ ...base, san: v.q })];
}

export function inventory(mount) {
  const out = h("div", { class: "inventory" });
  const info = h("p", { class: "status", role: "status", "aria-live": "polite" });
  const prev = h("button", { type: "button", disabled: true }, "Previous");
  const next = h("button", { type: "button", disabled: true }, "Next");
  let history = [];
  let streams = streamsFor({ q: "", state: "" });
  let pageNo = 0;
  // The search in progress: Stop (or Escape in the search box) ends its fetching; a new search
  // stops the one before, whose answer is then dropped.
  let current = null;
  const stop = h("button", { type: "button", hidden: true, "aria-controls": "cert-status" }, "Stop search");
  info.id = "cert-status";
  stop.addEventListener("click", () => {
    if (current) current.stopped = true;
  });

  const show = async () => {
    if (current) current.stopped = true;
    const ctl = { stopped: false, requests: 0, progress: () => {} };
    current = ctl;
    const before = snapshot(streams);
    info.textContent = "Loading…";
    ctl.progress = () => {
      if (ctl !== current || ctl.requests <= streams.length) return;
      stop.hidden = false;
      info.textContent = `Searching… (${ctl.requests} requests so far)`;
    };
    prev.disabled = true;
    next.disabled = true;
    try {
      const { page, more } = await nextPage(mount, streams, ctl);
      if (ctl !== current) return;
      history[pageNo] = before;
      clear(out);
      add(out, [pageTable(mount, page)]);
      prev.disabled = pageNo === 0;
      next.disabled = !more;
      info.textContent = statusText(page.length, pageNo, more, ctl.stopped);
    } catch (e) {
      if (ctl !== current) return;
      clear(out);
      add(out, [failure(e)]);
    } finally {
      if (ctl === current) {
        stop.hidden = true;
        current = null;
      }
    }
  };
  next.addEventListener("click", async () => {
    pageNo += 1;
    await show();
  });
  prev.addEventListener("click", async () => {
    pageNo -= 1;
    streams = snapshot(history[pageNo]);
    await show();
  });
  const form = filtersForm(async (v) => {
    streams = streamsFor(v);
    history = [];
    pageNo = 0;
    await show();
  }, stop);
  return section("Certificates", async () => {
    await show();
    return h("div", {}, form, info, out, h("nav", { class: "pager", "aria-label": "Certificate pages" }, prev, next));
  });
}

function statusText(n, pageNo, more, stopped) {
  const rows = `${n} certificate${n === 1 ? "" : "s"}`;
  if (stopped) return `Search stopped: page ${pageNo + 1} shows ${rows} found so far; Next continues the search.`;
  if (n === 0) return "No certificate matches.";
  return `Page ${pageNo + 1}: ${rows}${more ? ", more on the next page" : ""}.`;
}

function pageTable(mount, rows) {
  const body = rows.map((r) =>
    h(
      "tr",
      {},
      h("td", {}, link(["pki", mount, "cert", r.serial], r.commonName || "(no common name)"), r.sans.length ? h("div", { class: "muted small" }, r.sans.join(", ")) : null),
      h("td", { class: "mono" }, r.serial),
      h("td", {}, when(r.notAfter)),
      h("td", {}, h("span", { class: `state state-${r.state}` }, r.state || "—")),
    ),
  );
  return h("table", {}, h("caption", {}, "Certificates"), h("thead", {}, h("tr", {}, ["Common name", "Serial", "Not after", "Status"].map((t) => h("th", { scope: "col" }, t)))), h("tbody", {}, body));
}
