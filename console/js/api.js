// The console's only door to Lanyard: the public /v1 API with the signed-in token in the
// X-Vault-Token header (never a cookie), so the console can do exactly what the token may
// (docs/console.md "Sign-in, token storage and CSRF"). The token lives in this tab's
// sessionStorage: readable by this origin's scripts only (the same-origin policy), gone when the
// tab closes, never sent by the browser on its own.

const KEY_TOKEN = "lanyard.console.token";
const KEY_NS = "lanyard.console.namespace";

export class ApiError extends Error {
  constructor(status, errors) {
    super(errors.length > 0 ? errors.join("; ") : `HTTP ${status}`);
    this.status = status;
  }
}

export const session = {
  get token() {
    return sessionStorage.getItem(KEY_TOKEN) ?? "";
  },
  get namespace() {
    return sessionStorage.getItem(KEY_NS) ?? "";
  },
  signIn(token, namespace) {
    sessionStorage.setItem(KEY_TOKEN, token);
    this.setNamespace(namespace);
  },
  setNamespace(namespace) {
    sessionStorage.setItem(KEY_NS, namespace.replace(/^\/+|\/+$/g, ""));
  },
  signOut() {
    sessionStorage.removeItem(KEY_TOKEN);
    sessionStorage.removeItem(KEY_NS);
  },
};

/** A path with each segment percent-encoded: `p("pki", "cert", serial)`. */
export function p(...segments) {
  return segments
    .flatMap((s) => String(s).split("/"))
    .filter((s) => s !== "")
    .map((s) => encodeURIComponent(s))
    .join("/");
}

/** One call; resolves to the parsed body (null for 204), rejects with ApiError. */
export async function call(method, path, body, query) {
  const headers = { "X-Vault-Token": session.token };
  if (session.namespace) headers["X-Vault-Namespace"] = session.namespace;
  const init = { method, headers, credentials: "omit", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
    init.body = JSON.stringify(body);
  }
  const qs = query ? "?" + new URLSearchParams(Object.entries(query).filter(([, v]) => v !== undefined && v !== "")).toString() : "";
  const res = await fetch(`/v1/${path}${qs}`, init);
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!res.ok) throw new ApiError(res.status, Array.isArray(json?.errors) ? json.errors.map(String) : []);
  return json;
}

export const get = (path, query) => call("GET", path, undefined, query);
export const post = (path, body) => call("POST", path, body ?? {});

/** LIST as GET ?list=true (docs/http-conventions.md "Lists"); an empty list (404) is `{keys: []}`. */
export async function list(path, query = {}) {
  try {
    return (await get(path, { ...query, list: "true" }))?.data ?? { keys: [] };
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return { keys: [] };
    throw e;
  }
}

export function isDenied(e) {
  return e instanceof ApiError && (e.status === 403 || e.status === 401);
}
