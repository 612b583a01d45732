// The console's entry: sign-in, the navigation (built from what the token may see,
// sys/internal/ui/mounts), the namespace picker and the hash router (#/..., no server routes).
import { h, add, clear, link } from "./dom.js";
import { ApiError, get, list, session, isDenied } from "./api.js";
import { renderOverview } from "./overview.js";
import { renderPki } from "./pki.js";
import { renderCert } from "./cert.js";
import { renderSync } from "./sync.js";
import { renderKv } from "./kv.js";

const main = document.getElementById("main");
const nav = document.getElementById("nav");
const sessionBox = document.getElementById("session");
let visible = { pki: [], kv: [], sync: false };

function signInForm(message) {
  const token = h("input", { id: "token", name: "token", type: "password", autocomplete: "off", required: true, spellcheck: "false" });
  const ns = h("input", { id: "signin-namespace", name: "namespace", type: "text", autocomplete: "off", value: session.namespace, placeholder: "root" });
  const status = h("p", { class: "status", role: "status", "aria-live": "polite" }, message ?? "");
  const form = h(
    "form",
    { class: "signin", "aria-label": "Sign in" },
    h("h1", {}, "Sign in"),
    h("p", {}, "Use a Lanyard (Vault) token. It stays in this tab only and is sent as a header to this server's /v1 API."),
    h("label", { for: "token" }, "Token"),
    token,
    h("label", { for: "signin-namespace" }, "Namespace (optional)"),
    ns,
    h("button", { type: "submit" }, "Sign in"),
    status,
  );
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    session.signIn(token.value.trim(), ns.value.trim());
    status.textContent = "Checking the token…";
    try {
      await get("auth/token/lookup-self");
    } catch (e) {
      session.signOut();
      status.textContent = isDenied(e) ? "That token was not accepted." : `Sign-in failed: ${e.message}`;
      return;
    }
    await start();
  });
  clear(nav);
  clear(sessionBox);
  clear(main);
  add(main, [form]);
  token.focus();
}

async function loadVisible() {
  visible = { pki: [], kv: [], sync: false };
  try {
    const mounts = (await get("sys/internal/ui/mounts"))?.data?.secret ?? {};
    for (const [path, m] of Object.entries(mounts).sort()) {
      if (m.type === "pki") visible.pki.push(path.replace(/\/$/, ""));
      if (m.type === "kv" && String(m.options?.version ?? "") === "2") visible.kv.push(path.replace(/\/$/, ""));
    }
  } catch (e) {
    if (!isDenied(e)) throw e;
  }
  try {
    await list("sys/sync/destinations");
    visible.sync = true;
  } catch (e) {
    if (!isDenied(e)) throw e;
  }
}

function renderNav() {
  clear(nav);
  const items = [link([""], "Overview")];
  for (const m of visible.pki) items.push(link(["pki", m], `PKI: ${m}`));
  for (const m of visible.kv) items.push(link(["kv", m], `KV: ${m}`));
  if (visible.sync) items.push(link(["sync"], "Secrets sync"));
  add(nav, [h("ul", {}, items.map((a) => h("li", {}, a)))]);
}

async function renderSession() {
  clear(sessionBox);
  const ns = h("input", { id: "namespace", type: "text", list: "namespaces", value: session.namespace, placeholder: "root", autocomplete: "off", size: 12 });
  const options = h("datalist", { id: "namespaces" });
  ns.addEventListener("change", async () => {
    session.setNamespace(ns.value.trim());
    await start();
  });
  const out = h("button", { type: "button" }, "Sign out");
  out.addEventListener("click", () => {
    session.signOut();
    location.hash = "#/";
    signInForm("Signed out.");
  });
  add(sessionBox, [h("label", { for: "namespace" }, "Namespace"), ns, options, out]);
  try {
    const keys = (await list("sys/namespaces")).keys ?? [];
    add(options, [keys.map((k) => h("option", { value: String(k).replace(/\/$/, "") }))]);
  } catch {
    // A token that may not list namespaces still types one in.
  }
}

async function render() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").filter((x) => x !== "").map(decodeURIComponent);
  clear(main);
  const [page, ...rest] = parts;
  if (page === "pki" && rest[0] && rest[1] === "cert" && rest[2]) add(main, [renderCert(rest[0], rest[2])]);
  else if (page === "pki" && rest[0]) add(main, [renderPki(rest[0])]);
  else if (page === "kv" && rest[0]) add(main, [renderKv(rest[0], rest.slice(1).join("/") + (rest.length > 1 && location.hash.endsWith("/") ? "/" : ""))]);
  else if (page === "sync") add(main, [renderSync()]);
  else add(main, [renderOverview(visible)]);
  for (const a of nav.querySelectorAll("a")) {
    if (a.getAttribute("href") === location.hash || (a.getAttribute("href") === "#/" && !page)) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function start() {
  try {
    await get("auth/token/lookup-self");
  } catch (e) {
    if (e instanceof ApiError && isDenied(e)) {
      session.signOut();
      signInForm("Your token was not accepted; sign in again.");
      return;
    }
  }
  await loadVisible();
  renderNav();
  await renderSession();
  await render();
}

window.addEventListener("hashchange", async () => {
  if (!session.token) return;
  await render();
  main.focus();
});

if (session.token) start();
else signInForm();
