// KV-v2 (Vault API: /secret/metadata/:path and /secret/data/:path): folders and secrets from
// LIST metadata/, a secret's versions from its metadata, and a version's value only when the
// user presses "Show value" (then as text, never as markup).
import { h, add, clear, link, when, parseTime } from "./dom.js";
import { get, list, p } from "./api.js";
import { section, failure } from "./ui.js";

function folder(mount, path) {
  return section(path ? `Folder ${path}` : "Secrets", async () => {
    const keys = ((await list(p(mount, "metadata", path))).keys ?? []).map(String);
    if (keys.length === 0) return h("p", {}, "Nothing here.");
    return h("ul", { class: "plain" }, keys.map((k) => h("li", {}, link(["kv", mount, ...`${path}${k}`.split("/").filter(Boolean)].concat(k.endsWith("/") ? [""] : []), k))));
  });
}

function valueView(mount, path, version) {
  const out = h("div", {});
  const button = h("button", { type: "button", "aria-label": `Show value of version ${version}` }, "Show value");
  button.addEventListener("click", async () => {
    clear(out);
    try {
      const d = (await get(p(mount, "data", path), { version: String(version) })).data;
      add(out, [h("pre", { class: "value" }, JSON.stringify(d?.data ?? null, null, 2)), hideButton()]);
      button.hidden = true;
    } catch (e) {
      add(out, [failure(e)]);
    }
  });
  const hideButton = () => {
    const hide = h("button", { type: "button" }, "Hide value");
    hide.addEventListener("click", () => {
      clear(out);
      button.hidden = false;
      button.focus();
    });
    return hide;
  };
  return h("div", {}, button, out);
}

function secret(mount, path) {
  return section(`Secret ${path}`, async () => {
    const m = (await get(p(mount, "metadata", path))).data;
    const versions = Object.entries(m.versions ?? {}).sort(([a], [b]) => Number(b) - Number(a));
    return h("div", {},
      h("p", {}, `Current version ${m.current_version}, ${versions.length} kept (max ${m.max_versions || "default"}). Updated ${when(parseTime(m.updated_time))}.`),
      h("table", {}, h("caption", {}, "Versions"),
        h("thead", {}, h("tr", {}, ["Version", "Created", "State", "Value"].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", {}, versions.map(([v, info]) => {
          const state = info.destroyed ? "destroyed" : info.deletion_time ? `deleted ${when(parseTime(info.deletion_time))}` : "live";
          return h("tr", {}, h("td", {}, v), h("td", {}, when(parseTime(info.created_time))), h("td", {}, state), h("td", {}, state === "live" ? valueView(mount, path, v) : "—"));
        }))));
  });
}

export function renderKv(mount, rawPath) {
  const isFolder = rawPath === "" || rawPath.endsWith("/");
  const parts = rawPath.split("/").filter(Boolean);
  const crumbs = [link(["kv", mount], mount)];
  parts.forEach((part, i) => crumbs.push(" / ", i === parts.length - 1 && !isFolder ? part : link(["kv", mount, ...parts.slice(0, i + 1), ""], part)));
  return h("div", { class: "page" }, h("h1", {}, `KV mount ${mount}`), h("nav", { "aria-label": "Path" }, crumbs), isFolder ? folder(mount, rawPath) : secret(mount, rawPath));
}
