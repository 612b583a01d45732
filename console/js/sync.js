// Secrets sync (docs/secrets-sync.md): destinations grouped by type, and one table of every
// association with its status, last error, attempts, next retry, drift and dead letter. The
// actions are the API's: associations/set (also how a failed or dead-lettered sync is retried),
// associations/remove, and a destination's reconcile. The page re-reads every 5 s while shown.
import { h, add, clear, when, parseTime } from "./dom.js";
import { get, list, post, p } from "./api.js";
import { section, statusLine, act, confirmDialog, failure } from "./ui.js";

const REFRESH_MS = 5000;

async function destinations() {
  const data = await list("sys/sync/destinations");
  const byType = data.key_info ?? {};
  return Object.entries(byType).flatMap(([type, names]) => (Array.isArray(names) ? names : []).map((name) => ({ type: type.replace(/\/$/, ""), name: String(name) })));
}

async function associationsOf(dests) {
  const rows = [];
  await Promise.all(
    dests.map(async (d) => {
      try {
        const data = (await get(p("sys/sync/destinations", d.type, d.name, "associations"))).data;
        for (const a of Object.values(data.associated_secrets ?? {})) rows.push({ dest: d, a });
      } catch (e) {
        rows.push({ dest: d, error: e });
      }
    }),
  );
  return rows.sort((x, y) => `${x.dest.type}/${x.dest.name}`.localeCompare(`${y.dest.type}/${y.dest.name}`) || secretOf(x).localeCompare(secretOf(y)));
}

const secretOf = (r) => (r.a ? `${r.a.mount}${r.a.mount?.endsWith("/") ? "" : "/"}${r.a.secret_name}${r.a.sub_key ? ` (${r.a.sub_key})` : ""}` : "");

function actions(row, status, refresh) {
  const { dest, a } = row;
  const member = { mount: a.mount, secret_name: a.secret_name };
  const base = p("sys/sync/destinations", dest.type, dest.name, "associations");
  const label = a.dead_letter ? "Retry" : "Sync again";
  const again = h("button", { type: "button", "aria-label": `${label} ${secretOf(row)} to ${dest.type}/${dest.name}` }, label);
  again.addEventListener("click", async () => {
    await act(again, status, () => post(`${base}/set`, member), `${secretOf(row)} queued for ${dest.type}/${dest.name}.`);
    refresh();
  });
  const remove = h("button", { type: "button", class: "danger", "aria-label": `Remove ${secretOf(row)} from ${dest.type}/${dest.name}` }, "Remove");
  remove.addEventListener("click", async () => {
    if (!(await confirmDialog("Remove this association?", `Lanyard deletes its copy of ${secretOf(row)} at ${dest.type}/${dest.name} (what existed there before Lanyard stays).`, "Remove association"))) return;
    await act(remove, status, () => post(`${base}/remove`, member), "Removed.");
    refresh();
  });
  return [again, " ", remove];
}

function assocRow(row, status, refresh) {
  const { dest, a } = row;
  const destName = `${dest.type}/${dest.name}`;
  if (!a) return h("tr", {}, h("td", {}, "—"), h("td", {}, destName), h("td", { colspan: 7 }, failure(row.error)));
  const drift = Number(a.drift_count ?? 0) > 0 ? `${a.drift_count} (last ${when(parseTime(a.drift_detected_at))})` : "none";
  const dead = a.dead_letter ? `yes, since ${when(parseTime(a.dead_lettered_at))}` : "no";
  return h(
    "tr",
    {},
    h("td", {}, secretOf(row)),
    h("td", {}, destName),
    h("td", {}, h("span", { class: `sync sync-${String(a.sync_status).toLowerCase()}` }, String(a.sync_status))),
    h("td", { class: "error-text" }, String(a.last_error || "")),
    h("td", {}, String(a.attempts ?? 0)),
    h("td", {}, a.next_retry_at ? when(parseTime(a.next_retry_at)) : "—"),
    h("td", {}, drift),
    h("td", {}, dead),
    h("td", {}, actions(row, status, refresh)),
  );
}

function setForm(dests, status, refresh) {
  const mount = h("input", { id: "assoc-mount", type: "text", required: true, autocomplete: "off", size: 10 });
  const secret = h("input", { id: "assoc-secret", type: "text", required: true, autocomplete: "off", size: 14 });
  const dest = h("select", { id: "assoc-dest" }, dests.map((d) => h("option", { value: `${d.type}/${d.name}` }, `${d.type}/${d.name}`)));
  const submit = h("button", { type: "submit" }, "Set association");
  const form = h("form", { class: "filters", "aria-label": "Set an association" },
    h("label", { for: "assoc-mount" }, "KV mount"), mount, h("label", { for: "assoc-secret" }, "Secret path"), secret,
    h("label", { for: "assoc-dest" }, "Destination"), dest, submit);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const [type, ...name] = dest.value.split("/");
    await act(submit, status, () => post(p("sys/sync/destinations", type, name.join("/"), "associations", "set"), { mount: mount.value.trim(), secret_name: secret.value.trim() }), "Association set.");
    refresh();
  });
  return form;
}

function destinationList(dests, status, refresh) {
  const types = [...new Set(dests.map((d) => d.type))].sort();
  return h("div", {}, types.map((t) => h("section", { "aria-label": `Destinations of type ${t}` }, h("h3", {}, t), h("ul", {}, dests.filter((d) => d.type === t).map((d) => {
    const rec = h("button", { type: "button", "aria-label": `Reconcile ${d.type}/${d.name}` }, "Reconcile");
    rec.addEventListener("click", async () => {
      await act(rec, status, () => post(p("sys/sync/destinations", d.type, d.name, "reconcile")), `Drift check queued for ${d.type}/${d.name}.`);
      refresh();
    });
    return h("li", {}, `${d.name} `, rec);
  })))));
}

export function renderSync() {
  const status = statusLine();
  const dests = h("div", {});
  const assocs = h("div", {});
  let timer = 0;
  const refresh = async () => {
    clearTimeout(timer);
    if (!assocs.isConnected && timer) return;
    try {
      const ds = await destinations();
      const rows = await associationsOf(ds);
      if (!dests.firstChild) add(dests, [destinationList(ds, status, refresh), setForm(ds, status, refresh)]);
      clear(assocs);
      add(assocs, [h("table", {}, h("caption", {}, "Associations"),
        h("thead", {}, h("tr", {}, ["Secret", "Destination", "Status", "Last error", "Attempts", "Next retry", "Drift", "Dead letter", "Actions"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, rows.map((r) => assocRow(r, status, refresh))))]);
      if (rows.length === 0) add(assocs, [h("p", {}, "No association yet.")]);
    } catch (e) {
      clear(assocs);
      add(assocs, [failure(e)]);
    }
    timer = setTimeout(() => assocs.isConnected && refresh(), REFRESH_MS);
  };
  const refreshButton = h("button", { type: "button" }, "Refresh");
  refreshButton.addEventListener("click", refresh);
  refresh();
  return h("div", { class: "page" }, h("h1", {}, "Secrets sync"), status,
    h("section", { "aria-label": "Destinations" }, h("h2", {}, "Destinations"), dests),
    h("section", { "aria-label": "Associations" }, h("h2", {}, "Associations"), refreshButton, assocs));
}
