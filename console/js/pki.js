// A PKI mount: its issuers as a tree (root → intermediates, matched by the issuer name of each
// certificate against the subjects of the others, RFC 5280 §6.1), its roles, the expiry chart
// and the certificate inventory (./inventory.js).
import { h, relative, when } from "./dom.js";
import { get, list, p } from "./api.js";
import { parseCertificate } from "./der.js";
import { section } from "./ui.js";
import { expiryChart } from "./chart.js";
import { inventory } from "./inventory.js";

async function loadIssuers(mount) {
  const listed = await list(p(mount, "issuers"));
  const ids = listed.keys ?? [];
  const issuers = await Promise.all(
    ids.map(async (id) => {
      const d = (await get(p(mount, "issuer", id))).data;
      let facts = null;
      try {
        facts = parseCertificate(d.certificate);
      } catch {
        facts = null;
      }
      return { id, name: d.issuer_name || listed.key_info?.[id]?.issuer_name || "", isDefault: Boolean(listed.key_info?.[id]?.is_default), facts };
    }),
  );
  return issuers;
}

/** Children of each issuer: the ones whose certificate names it as issuer (self-signed ones are roots). */
export function issuerTree(issuers) {
  const bySubject = new Map();
  for (const i of issuers) if (i.facts) (bySubject.get(i.facts.subjectDer) ?? bySubject.set(i.facts.subjectDer, []).get(i.facts.subjectDer)).push(i);
  const children = new Map(issuers.map((i) => [i.id, []]));
  const roots = [];
  for (const i of issuers) {
    const parents = i.facts && i.facts.issuerDer !== i.facts.subjectDer ? (bySubject.get(i.facts.issuerDer) ?? []) : [];
    if (parents.length === 0) roots.push(i);
    else children.get(parents[0].id).push(i);
  }
  return { roots, children };
}

function issuerItem(i, children) {
  const f = i.facts;
  const expiry = f ? `expires ${when(f.notAfter)} (${relative(f.notAfter)})` : "";
  const kids = children.get(i.id) ?? [];
  return h(
    "li",
    {},
    h("span", { class: "issuer" }, h("strong", {}, i.name || i.id), i.isDefault ? h("span", { class: "badge" }, "default") : null, " ", f ? f.subject : "", " · ", f ? f.key : "", " · ", h("span", { class: f && f.notAfter < Date.now() + 30 * 86400e3 ? "warn" : "" }, expiry)),
    i.name ? h("div", { class: "muted small" }, `id ${i.id}`) : null,
    kids.length > 0 ? h("ul", {}, kids.map((k) => issuerItem(k, children))) : null,
  );
}

function issuersSection(mount) {
  return section("Issuers", async () => {
    const issuers = await loadIssuers(mount);
    if (issuers.length === 0) return h("p", {}, "No issuer yet.");
    const { roots, children } = issuerTree(issuers);
    return h("ul", { class: "tree", "aria-label": "Issuer hierarchy" }, roots.map((r) => issuerItem(r, children)));
  });
}

function rolesSection(mount) {
  return section("Roles", async () => {
    const keys = (await list(p(mount, "roles"))).keys ?? [];
    if (keys.length === 0) return h("p", {}, "No role yet.");
    return h("ul", { class: "inline-list" }, keys.map((k) => h("li", {}, String(k))));
  });
}

/** The histogram's answer as [{date, count}] for the next `days` days. */
export function histogramDays(data, days) {
  const counts = new Map();
  const rows = Array.isArray(data?.days) ? data.days : Array.isArray(data?.histogram) ? data.histogram : Array.isArray(data?.buckets) ? data.buckets : [];
  for (const r of rows) counts.set(String(r.date ?? r.day ?? "").slice(0, 10), Number(r.count ?? 0));
  const start = data?.from ? Date.parse(data.from) : Date.now();
  const out = [];
  for (let i = 0; i < days; i++) {
    const date = new Date(start + i * 86400e3).toISOString().slice(0, 10);
    out.push({ date, count: counts.get(date) ?? (Array.isArray(data?.counts) ? Number(data.counts[i] ?? 0) : 0) });
  }
  return out;
}

function chartSection(mount) {
  return section("Expiring in the next 90 days", async () => {
    const [data, counts] = await Promise.all([get(p(mount, "certs", "expiry-histogram"), { days: "90" }), get(p(mount, "certs", "counts"))]);
    const c = counts.data;
    return h("div", {},
      h("p", {}, `${c.total} stored certificate${c.total === 1 ? "" : "s"}: ${c.valid} valid, ${c.expired} expired, ${c.revoked} revoked (certificates issued with no_store are never stored, so never counted).`),
      expiryChart(histogramDays(data.data, 90)));
  });
}

export function renderPki(mount) {
  return h(
    "div",
    { class: "page" },
    h("h1", {}, `PKI mount ${mount}`),
    issuersSection(mount),
    rolesSection(mount),
    chartSection(mount),
    inventory(mount),
  );
}
