/**
 * The data the console's browser test (./console-browser.test.ts) looks at, made through the
 * public API in a namespace of its own so the pictures in docs/console.md show only it: a PKI
 * mount with a root and an intermediate issuer, 250 leaf certificates (one with a script in its
 * common name), a second PKI mount and a KV-v2 mount the limited token may not see, a secret
 * whose path holds markup, a sync destination at the fake cloudthree provider, and a token that
 * may read one PKI mount only.
 */
import { expect, inject } from "vitest";
import { BODIES } from "../helpers/sync-bodies";
import { E2E_ROOT_TOKEN } from "./env";

export const NS = "console-demo";
export const PKI = "pki";
export const OTHER_PKI = "pki-partners";
export const KV = "secret";
export const CERT_COUNT = 250;
/** A common name and a KV path that would run script if the page inserted them as HTML. */
export const SCRIPT_CN = `<script>window.__injected=1</script><img src=x onerror="window.__injected=1">`;
export const SCRIPT_KV = `<img src=x onerror=window.__injected=1>`;

export interface ApiRes {
  status: number;
  // Parsed JSON of any shape: the test reads it field by field.
  body: any;
}

export async function api(method: string, path: string, body?: unknown, opts: { token?: string; ns?: string | null } = {}): Promise<ApiRes> {
  const headers: Record<string, string> = { "x-vault-token": opts.token ?? E2E_ROOT_TOKEN };
  const ns = opts.ns === undefined ? NS : opts.ns;
  if (ns) headers["x-vault-namespace"] = ns;
  if (body !== undefined) headers["content-type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
  const res = await fetch(`${inject("baseUrl")}/v1/${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

export async function must(method: string, path: string, body?: unknown, opts: { token?: string; ns?: string | null } = {}): Promise<ApiRes> {
  const r = await api(method, path, body, opts);
  expect(r.status, `${method} ${path}: ${JSON.stringify(r.body)}`).toBeLessThan(300);
  return r;
}

export interface Seeded {
  limitedToken: string;
  rootPem: string;
  /** serial → common name of every leaf issued on PKI. */
  leaves: Map<string, string>;
  scriptSerial: string;
  /** A leaf with a SAN that is not its common name, for the SAN search. */
  sanOnly: { serial: string; cn: string; san: string };
}

/** Runs `fn` over `items`, `width` at a time. */
async function pool<T>(items: T[], width: number, fn: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < items.length) await fn(items[next++] as T);
  }));
}

async function pkiWithIssuers(mount: string, rootName: string): Promise<string> {
  await must("POST", `sys/mounts/${mount}`, { type: "pki" });
  const root = await must("POST", `${mount}/root/generate/internal`, { common_name: rootName, key_type: "ec", key_bits: 256, not_after: "2036-01-01T00:00:00Z", issuer_name: "root" });
  const csr = await must("POST", `${mount}/intermediate/generate/internal`, { common_name: `${rootName} Issuing CA`, key_type: "ec", key_bits: 384 });
  const signed = await must("POST", `${mount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: `${rootName} Issuing CA`, ttl: "720h", issuer_ref: "root" });
  await must("POST", `${mount}/intermediate/set-signed`, { certificate: signed.body.data.certificate });
  await must("POST", `${mount}/config/issuers`, { default: "root" });
  await must("POST", `${mount}/roles/web`, { allow_any_name: true, enforce_hostnames: false, allow_ip_sans: true, key_type: "ec", key_bits: 256, max_ttl: "2160h", no_store: false });
  return root.body.data.certificate as string;
}

export async function seed(): Promise<Seeded> {
  await must("POST", `sys/namespaces/${NS}`, {}, { ns: null });
  const rootPem = await pkiWithIssuers(PKI, "Console Demo Root");
  await pkiWithIssuers(OTHER_PKI, "Partners Root");
  const leaves = new Map<string, string>();
  // Spread over the next 90 days so the chart has a shape: certificate i expires in ~(i % 90) days.
  const jobs = Array.from({ length: CERT_COUNT }, (_, i) => i);
  await pool(jobs, 16, async (i) => {
    const cn = `host-${String(i).padStart(3, "0")}.demo.example`;
    const hours = 24 * (1 + ((i * 37) % 88)) + 1;
    const r = await must("POST", `${PKI}/issue/web`, { common_name: cn, ttl: `${hours}h`, alt_names: `${cn},alias-${i}.demo.example` });
    leaves.set(r.body.data.serial_number, cn);
  });
  const script = await must("POST", `${PKI}/issue/web`, { common_name: SCRIPT_CN, ttl: "100h", exclude_cn_from_sans: true, alt_names: "script.demo.example" });
  const sanOnly = { cn: "billing.demo.example", san: "payments-gateway.demo.example", serial: "" };
  sanOnly.serial = (await must("POST", `${PKI}/issue/web`, { common_name: sanOnly.cn, alt_names: sanOnly.san, ttl: "300h" })).body.data.serial_number;
  await must("POST", `sys/mounts/${KV}`, { type: "kv-v2" });
  await must("POST", `${KV}/data/app/db`, { data: { password: "first-password" } });
  await must("POST", `${KV}/data/app/db`, { data: { password: "second-password", user: "app" } });
  await must("POST", `${KV}/data/${SCRIPT_KV}`, { data: { note: "<b>not bold</b>" } });
  await must("POST", "sys/policies/acl/pki-reader", {
    policy: `path "${PKI}/*" { capabilities = ["read", "list", "update"] }\npath "${PKI}" { capabilities = ["read"] }`,
  });
  const t = await must("POST", "auth/token/create", { policies: ["pki-reader"], ttl: "1h" });
  return { limitedToken: t.body.auth.client_token, rootPem, leaves, scriptSerial: script.body.data.serial_number, sanOnly };
}

/**
 * A destination at the fake cloudthree provider (no other test of the shared e2e Worker uses that
 * fake, so the throttling the browser test orders meets only this association) and a secret
 * associated with it.
 */
export async function seedSync(): Promise<void> {
  await must("POST", "sys/sync/destinations/cloudthree-sm/gcp-demo", BODIES["cloudthree-sm"]);
  await must("POST", `${KV}/data/app/api`, { data: { key: "k1" } });
  await must("POST", "sys/sync/destinations/cloudthree-sm/gcp-demo/associations/set", { mount: KV, secret_name: "app/api" });
}

export async function associationStatus(): Promise<string> {
  const r = await must("GET", "sys/sync/destinations/cloudthree-sm/gcp-demo/associations");
  const entries = Object.values(r.body.data.associated_secrets) as { sync_status: string }[];
  return entries.map((e) => e.sync_status).join(",");
}
