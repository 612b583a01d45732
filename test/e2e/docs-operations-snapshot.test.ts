/**
 * docs/operations.md "Snapshots", walked as written: its curl blocks (marked `ops-e2e: run:`) run
 * in bash against Workers of this file's own. Instance A holds KV versions, a policy and a token,
 * a CA with certificates and a revocation, a sync destination and association, an audit device;
 * the snapshot is taken while a load writes to A. Instance B, fresh, with the same SEAL_KEY:
 * the plain restore is refused (another deployment), the forced one installs everything written
 * before the snapshot began; the CA then issues, revokes and publishes a CRL numbered above A's.
 * hvac saves and restores too (Debian's python3-hvac), and instance C, with another SEAL_KEY,
 * refuses the snapshot with 400 and is left as it was.
 */
import "reflect-metadata";
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import * as x509 from "@peculiar/x509";
import { afterAll, beforeAll, expect, it } from "vitest";
import { BODIES } from "../helpers/sync-bodies";
import { fencedBlocks } from "./doc-blocks";
import { E2E_ROOT_TOKEN, E2E_SEAL_KEY } from "./env";
import { startLanyardWorker, type StartedWorker } from "./worker";

x509.cryptoProvider.set(crypto);
const run = promisify(execFile);
const OTHER_KEY = "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=";
const vars = (key: string) => ({ ENVIRONMENT: "development", ROOT_TOKEN: E2E_ROOT_TOKEN, SEAL_KEY: key });

let a = "";
let source: StartedWorker;
let b: StartedWorker;
let c: StartedWorker;
let dir = "";
let doc = "";

beforeAll(async () => {
  // A, B and C are this file's own Workers. A was the suite's shared Worker once: in full runs,
  // after the other e2e files had filled it, the forced restore of its whole database into B ended
  // with the local runtime restarting mid-request (not seen with a database of this file's size;
  // cause not yet found), so A is a fresh instance under this file's own write load.
  source = await startLanyardWorker(vars(E2E_SEAL_KEY));
  a = source.url;
  b = await startLanyardWorker(vars(E2E_SEAL_KEY));
  c = await startLanyardWorker(vars(OTHER_KEY));
  dir = await mkdtemp(path.join(tmpdir(), "lanyard-ops-snapshot-"));
  doc = await readFile(path.resolve(import.meta.dirname, "../../docs/operations.md"), "utf8");
}, 600_000);

afterAll(async () => {
  await Promise.all([source?.dispose(), b?.dispose(), c?.dispose()]);
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function call(base: string, method: string, p: string, body?: unknown, token: string = E2E_ROOT_TOKEN) {
  const headers: Record<string, string> = { "x-vault-token": token };
  if (body !== undefined) headers["content-type"] = method === "PATCH" ? "application/merge-patch+json" : "application/json";
  const res = await fetch(`${base}/v1/${p}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let parsed: any = null;
  try {
    parsed = text ? JSON.parse(text) : null;
  } catch {
    parsed = text;
  }
  return { status: res.status, text, body: parsed };
}

async function ok(base: string, method: string, p: string, body?: unknown, status = 200) {
  const r = await call(base, method, p, body);
  expect(r.status, `${method} ${p}: ${r.text}`).toBe(status);
  return r;
}

/** The doc's block marked `ops-e2e: run: <name>`, run as written in bash against `base`. */
async function runBlock(name: string, base: string): Promise<{ code: number; out: string }> {
  const block = fencedBlocks(doc, "ops-e2e").find((bl) => bl.marker?.kind === "run" && bl.marker.why === name);
  expect(block, `docs/operations.md has the block ${name}`).toBeTruthy();
  const env = { ...process.env, VAULT_ADDR: base, VAULT_TOKEN: E2E_ROOT_TOKEN };
  return run("bash", ["-euo", "pipefail", "-c", block?.body ?? "false"], { cwd: dir, env, maxBuffer: 1 << 24 }).then(
    (r) => ({ code: 0, out: r.stdout + r.stderr }),
    (e: { code?: number; stdout?: string; stderr?: string }) => ({ code: e.code ?? 1, out: `${e.stdout ?? ""}${e.stderr ?? ""}` }),
  );
}

/** What A holds before the snapshot, to find again in B. */
const uid = crypto.randomUUID().slice(0, 8);
const KV = `secret-${uid}`;
const PKI = `pki-${uid}`;
const DEST = `prod-${uid}`;

async function populate(base: string) {
  await ok(base, "POST", `sys/mounts/${KV}`, { type: "kv", options: { version: "2" } }, 204);
  for (const v of ["one", "two", "three"]) await ok(base, "POST", `${KV}/data/app`, { data: { password: `pw-${v}` } });
  await ok(base, "POST", `sys/policies/acl/app-read-${uid}`, { policy: `path "${KV}/data/app" { capabilities = ["read"] }` }, 204);
  const token = (await ok(base, "POST", "auth/token/create", { policies: [`app-read-${uid}`], ttl: "24h" })).body.auth.client_token as string;
  await ok(base, "POST", `sys/mounts/${PKI}`, { type: "pki" }, 204);
  const root = (await ok(base, "POST", `${PKI}/root/generate/internal`, { common_name: "Snapshot Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z" })).body.data.certificate as string;
  await ok(base, "POST", `${PKI}/roles/web`, { allowed_domains: "example.com", allow_subdomains: true, max_ttl: "72h" });
  const serials: string[] = [];
  for (const cn of ["a", "b", "c"]) serials.push((await ok(base, "POST", `${PKI}/issue/web`, { common_name: `${cn}.example.com`, ttl: "1h" })).body.data.serial_number);
  await ok(base, "POST", `${PKI}/revoke`, { serial_number: serials[0] });
  await ok(base, "POST", `sys/sync/destinations/cloudone-sm/${DEST}`, BODIES["cloudone-sm"]);
  await ok(base, "POST", `sys/sync/destinations/cloudone-sm/${DEST}/associations/set`, { mount: KV, secret_name: "app" });
  await ok(base, "POST", `sys/audit/log-${uid}`, { type: "stdout" }, 204);
  return { token, root, serials };
}

/** The CRL's number (RFC 5280 §5.2.3), from its DER: the extension's value is an INTEGER. */
const crlNumber = async (base: string) => {
  const der = await (await fetch(`${base}/v1/${PKI}/crl`)).arrayBuffer();
  const crl = new x509.X509Crl(der);
  const ext = crl.getExtension("2.5.29.20");
  return ext ? BigInt(`0x${Buffer.from(ext.value).toString("hex").slice(4)}`) : -1n;
};

/** KV writes to A from `workers` loops until `stop`, each write's completion time kept. */
function load(base: string, workers: number, stop: () => boolean) {
  const done: { key: string; at: number }[] = [];
  const loops = Array.from({ length: workers }, async (_, w) => {
    for (let i = 0; i < 400 && !stop(); i++) {
      const key = `load-${w}-${i}`;
      const r = await call(base, "POST", `${KV}/data/${key}`, { data: { n: i } });
      if (r.status === 200) done.push({ key, at: Date.now() });
    }
  });
  return { done, finished: Promise.all(loops) };
}

it("the Snapshots section: save under load, restore into a fresh instance, refused by a wrong key", async () => {
  const fx = await populate(a);
  const crlBefore = await crlNumber(a);
  let stopping = false;
  const writes = load(a, 4, () => stopping);
  await new Promise((r) => setTimeout(r, 1500));
  const startedAt = Date.now();
  const saved = await runBlock("snapshot-save", a);
  stopping = true;
  await writes.finished;
  expect(saved.code, saved.out).toBe(0);
  await ok(a, "DELETE", `sys/audit/log-${uid}`, undefined, 204);
  const before = writes.done.filter((w) => w.at < startedAt);
  expect(before.length).toBeGreaterThan(10);

  // B is another deployment: the plain restore refuses, the forced one installs it.
  const plain = await runBlock("snapshot-restore", b.url);
  expect(plain.code).not.toBe(0);
  expect(plain.out).toMatch(/another deployment/);
  const forced = await runBlock("snapshot-restore-force", b.url);
  expect(forced.code, forced.out).toBe(0);

  const kv = await ok(b.url, "GET", `${KV}/metadata/app`);
  expect(Object.keys(kv.body.data.versions)).toEqual(["1", "2", "3"]);
  for (const [v, pw] of [["1", "pw-one"], ["3", "pw-three"]]) expect((await ok(b.url, "GET", `${KV}/data/app?version=${v}`)).body.data.data.password).toBe(pw);
  for (const w of before) expect((await call(b.url, "GET", `${KV}/data/${w.key}`)).status, w.key).toBe(200);
  expect((await call(b.url, "GET", `${KV}/data/app`, undefined, fx.token)).status).toBe(200);
  expect((await call(b.url, "GET", `${KV}/metadata/app`, undefined, fx.token)).status).toBe(403);
  expect((await ok(b.url, "GET", `${PKI}/ca/pem`)).text.trim()).toBe(fx.root.trim());
  expect((await ok(b.url, "GET", `${PKI}/certs/revoked?list=true`)).body.data.keys).toContain(fx.serials[0]);
  expect(Object.keys((await ok(b.url, "GET", `sys/sync/destinations/cloudone-sm/${DEST}/associations`)).body.data.associated_secrets)).toHaveLength(1);
  expect((await ok(b.url, "GET", "sys/audit")).body.data[`log-${uid}/`]).toMatchObject({ type: "stdout" });

  // The CA keeps working: a new certificate from the restored root, a revocation, a higher CRL number.
  const fresh = (await ok(b.url, "POST", `${PKI}/issue/web`, { common_name: "d.example.com", ttl: "1h" })).body.data;
  expect(await new x509.X509Certificate(fresh.certificate).verify({ publicKey: new x509.X509Certificate(fx.root).publicKey, signatureOnly: true })).toBe(true);
  await ok(b.url, "POST", `${PKI}/revoke`, { serial_number: fx.serials[1] });
  expect(await crlNumber(b.url)).toBeGreaterThan(crlBefore);

  // hvac, as users run it: save from B, restore into B; force into C (another seal key) is refused.
  const hvac = `
import hvac, sys
b = hvac.Client(url=sys.argv[1], token=sys.argv[3])
snap = b.sys.take_raft_snapshot().content
print("restore", b.sys.restore_raft_snapshot(snap).status_code)
c = hvac.Client(url=sys.argv[2], token=sys.argv[3])
try:
    c.sys.force_restore_raft_snapshot(snap)
    print("foreign accepted")
except hvac.exceptions.InvalidRequest as e:
    print("foreign refused:", e)
`;
  const py = await run("/usr/bin/python3", ["-c", hvac, b.url, c.url, E2E_ROOT_TOKEN]);
  expect(py.stdout).toMatch(/restore 204/);
  expect(py.stdout).toMatch(/foreign refused:.*seal key this deployment does not have/);

  // The doc's force restore against C: 400, and C still has nothing of it.
  const wrong = await runBlock("snapshot-restore-force", c.url);
  expect(wrong.code).not.toBe(0);
  expect(wrong.out).toMatch(/"errors".*seal key this deployment does not have/);
  expect((await call(c.url, "GET", `${KV}/data/app`)).status).toBe(404);
  expect((await ok(c.url, "GET", "sys/health")).body.sealed).toBe(false);
}, 300_000);
