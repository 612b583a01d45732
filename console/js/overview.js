// The overview: health and seal, version, secrets and auth mounts, audit devices and the secrets
// sync switch. Each section reads its own endpoint; one the token may not read shows "no access".
import { h, facts, table, link } from "./dom.js";
import { call, get } from "./api.js";
import { section, statusLine, act, confirmDialog } from "./ui.js";

function health() {
  return section("Health", async () => {
    const res = await fetch("/v1/sys/health", { cache: "no-store", credentials: "omit" });
    const d = await res.json();
    const seal = await get("sys/seal-status").catch(() => null);
    return facts([
      ["Status", res.ok ? "Ready" : "Not ready"],
      ["Sealed", d.sealed ? "Sealed" : "Unsealed"],
      ["Initialized", d.initialized ? "Yes" : "No"],
      ["Version", String(d.version ?? seal?.version ?? "")],
      ["Cluster", String(d.cluster_name ?? seal?.cluster_name ?? "")],
    ]);
  });
}

function mountRows(data, route) {
  return Object.entries(data ?? {})
    .filter(([, m]) => m && typeof m === "object" && "type" in m)
    .sort(([a], [b]) => a.localeCompare(b))
    .map(([path, m]) => {
      const target = route(path.replace(/\/$/, ""), m);
      return h("tr", {}, h("td", {}, target ? link(target, path) : path), h("td", {}, String(m.type)), h("td", {}, String(m.accessor ?? "")), h("td", {}, String(m.description ?? "")));
    });
}

function mounts() {
  return section("Secrets engines", async () => {
    const body = await get("sys/mounts");
    const route = (path, m) => (m.type === "pki" ? ["pki", path] : m.type === "kv" && String(m.options?.version) === "2" ? ["kv", path] : null);
    return table("Secrets engines", ["Path", "Type", "Accessor", "Description"], mountRows(body.data ?? body, route));
  });
}

function auths() {
  return section("Auth methods", async () => {
    const body = await get("sys/auth");
    return table("Auth methods", ["Path", "Type", "Accessor", "Description"], mountRows(body.data ?? body, () => null));
  });
}

function audit() {
  return section("Audit devices", async () => {
    const body = await get("sys/audit");
    const devices = Object.entries(body.data ?? body).filter(([, d]) => d && typeof d === "object" && "type" in d);
    if (devices.length === 0) return h("p", {}, "No audit device is enabled.");
    return table("Audit devices", ["Path", "Type", "Description"], devices.map(([path, d]) => h("tr", {}, h("td", {}, path), h("td", {}, String(d.type)), h("td", {}, String(d.description ?? "")))));
  });
}

function syncSwitch() {
  const el = section("Secrets sync", async () => {
    const cfg = (await get("sys/sync/config")).data;
    const status = statusLine();
    const disabled = Boolean(cfg.disabled);
    const button = h("button", { type: "button", class: disabled ? "" : "danger" }, disabled ? "Enable secrets sync" : "Disable secrets sync");
    button.addEventListener("click", async () => {
      if (!disabled && !(await confirmDialog("Disable secrets sync?", "Nothing reaches a provider until sync is enabled again; changes wait as PENDING.", "Disable"))) return;
      await act(button, status, () => call("PATCH", "sys/sync/config", { disabled: !disabled }), disabled ? "Enabled." : "Disabled.");
      el.reload();
    });
    return h("div", {}, facts([["State", disabled ? "Disabled" : "Enabled"], ["Queue capacity", String(cfg.queue_capacity)], ["Reconcile interval", String(cfg.reconcile_interval)]]), button, status);
  });
  return el;
}

export function renderOverview(visible) {
  const shortcuts = [
    ...visible.pki.map((m) => h("li", {}, link(["pki", m], `PKI mount ${m}`))),
    ...visible.kv.map((m) => h("li", {}, link(["kv", m], `KV mount ${m}`))),
  ];
  return h(
    "div",
    { class: "page" },
    h("h1", {}, "Overview"),
    shortcuts.length > 0 ? h("section", { "aria-label": "Your mounts" }, h("h2", {}, "Your mounts"), h("ul", {}, shortcuts)) : null,
    health(),
    mounts(),
    auths(),
    audit(),
    syncSwitch(),
  );
}
