/**
 * Shared by the real-client ACME e2e tests (acme-lego.test.ts, acme-certbot.test.ts): a PKI
 * mount serving ACME (a root CA in one mount, the issuing intermediate in the ACME mount, so the
 * clients must bring the chain back), the client's challenge port registered with the http-01
 * relay (./acme-http01-relay.ts, the Worker's ACME_HTTP01_TARGET), running a client binary, and
 * openssl's verdicts: `openssl verify` against the mount's chain and `openssl ocsp` against its
 * responder.
 */
import { execFile } from "node:child_process";
import { writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import path from "node:path";
import { expect, inject } from "vitest";
import { decodePemBlocks, toPem } from "../../src/core/encoding";
import { openssl, verify, x509Field } from "../helpers/openssl";
import { CA_NOT_AFTER, ok, pkiMount } from "./client";

export interface AcmeCa {
  mount: string;
  rootPem: string;
  intermediatePem: string;
  /** The mount's default directory (`<mount>/acme/directory`). */
  directory: string;
}

/**
 * A root CA mount and an ACME mount holding the intermediate it signed, config/cluster set to the
 * mount's URL, a role `web` for `*.acme.test`, and ACME enabled with the defaults (sign-verbatim
 * on `acme/`, no EAB).
 */
export async function acmeCa(prefix: string): Promise<AcmeCa> {
  const base = inject("baseUrl");
  const rootMount = await pkiMount(`${prefix}-root`);
  const root = await ok("POST", `${rootMount}/root/generate/internal`, { common_name: `${prefix} Root`, key_type: "ec", key_bits: 256, not_after: CA_NOT_AFTER });
  const mount = await pkiMount(prefix);
  const csr = await ok("POST", `${mount}/intermediate/generate/internal`, { common_name: `${prefix} Issuing CA`, key_type: "ec", key_bits: 256 });
  const signed = await ok("POST", `${rootMount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: `${prefix} Issuing CA`, not_after: "2035-01-01T00:00:00Z" });
  await ok("POST", `${mount}/intermediate/set-signed`, { certificate: signed.body.data.certificate });
  await ok("POST", `${mount}/config/cluster`, { path: `${base}/v1/${mount}` });
  await ok("POST", `${mount}/roles/web`, { allowed_domains: ["acme.test"], allow_subdomains: true, key_type: "any", max_ttl: "720h" });
  await ok("POST", `${mount}/config/acme`, { enabled: true });
  return { mount, rootPem: root.body.data.certificate, intermediatePem: signed.body.data.certificate, directory: `${base}/v1/${mount}/acme/directory` };
}

/** A TCP port free right now on this machine, for a client's standalone challenge server. */
export async function freePort(): Promise<number> {
  const s = createServer();
  await new Promise<void>((r) => s.listen(0, "127.0.0.1", r));
  const address = s.address();
  const port = typeof address === "object" && address ? address.port : 0;
  await new Promise((r) => s.close(r));
  return port;
}

/** Routes http-01 validations of `host` to the client listening on `port`. */
export async function relayHost(host: string, port: number): Promise<void> {
  const r = await fetch(`${inject("http01Relay")}/__relay/${encodeURIComponent(host)}`, { method: "PUT", body: String(port) });
  expect(r.status).toBe(200);
}

export interface ToolRun {
  code: number;
  out: string;
  ms: number;
}

/** Runs a client binary with stdin closed (neither may ever prompt); the output is stdout and stderr together. */
export async function runTool(cmd: string, args: string[], opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {}): Promise<ToolRun> {
  const started = Date.now();
  return new Promise((resolve) => {
    const child = execFile(cmd, args, { cwd: opts.cwd, env: { ...process.env, ...opts.env }, timeout: opts.timeoutMs ?? 120_000, maxBuffer: 8 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof (err as { code?: unknown }).code === "number" ? ((err as { code: number }).code) : 1) : 0;
      resolve({ code, out: `${stdout}${stderr}`, ms: Date.now() - started });
    });
    child.stdin?.end();
  });
}

/** Fails with the tool's output unless it exited 0. */
export function expectSuccess(r: ToolRun, what: string): void {
  expect(r.code, `${what} failed:\n${r.out.slice(-6000)}`).toBe(0);
}

/** The certificates of a PEM bundle, each re-armored. */
export function pemCerts(bundle: string): string[] {
  return decodePemBlocks(bundle)
    .filter((b) => b.label === "CERTIFICATE")
    .map((b) => toPem("CERTIFICATE", b.der));
}

/**
 * `openssl verify` of the leaf against the mount's root as the only trust anchor, the
 * intermediate the client was given (the rest of its bundle) as untrusted: the client must have
 * received the right chain. Also checks the leaf's DNS names are exactly `names`.
 */
export async function expectChainVerifies(ca: AcmeCa, bundle: string, names: string | string[]): Promise<string> {
  const [leaf, ...chain] = pemCerts(bundle);
  if (!leaf) throw new Error("no certificate in the bundle");
  expect(chain.length, "the client's bundle carries the issuing CA").toBeGreaterThan(0);
  const v = await verify(leaf, ca.rootPem, chain);
  expect(v.ok, v.output).toBe(true);
  expect((await dnsNamesOf(leaf)).sort(), "the leaf's names").toEqual((typeof names === "string" ? [names] : names).slice().sort());
  return leaf;
}

/** `openssl ocsp` against the mount's responder: "good", "revoked" or "unknown". */
export async function ocspStatus(ca: AcmeCa, leafPem: string, dir: string): Promise<string> {
  const tag = crypto.randomUUID().slice(0, 8);
  const files = { issuer: path.join(dir, `${tag}-issuer.pem`), cert: path.join(dir, `${tag}-leaf.pem`), ca: path.join(dir, `${tag}-root.pem`) };
  await writeFile(files.issuer, `${ca.intermediatePem}\n`);
  await writeFile(files.cert, `${leafPem}\n`);
  await writeFile(files.ca, `${ca.rootPem}\n${ca.intermediatePem}\n`);
  const r = await openssl(["ocsp", "-issuer", files.issuer, "-cert", files.cert, "-url", `${inject("baseUrl")}/v1/${ca.mount}/ocsp`, "-CAfile", files.ca]);
  const out = `${r.stdout}\n${r.stderr}`;
  expect(r.code, out).toBe(0);
  expect(out).toContain("Response verify OK");
  const m = new RegExp(`${files.cert.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}: (\\w+)`).exec(out);
  return m?.[1] ?? `unparsed: ${out}`;
}

/** The leaf's serial as the API writes it (colon-separated lower-case hex). */
export async function serialOf(leafPem: string): Promise<string> {
  const hex = (await x509Field(leafPem, "-serial")).replace(/^serial=/, "").toLowerCase();
  return (hex.length % 2 ? `0${hex}` : hex).match(/../g)?.join(":") ?? hex;
}

/** The subjectAltName DNS names of a certificate. */
export async function dnsNamesOf(leafPem: string): Promise<string[]> {
  const text = await x509Field(leafPem, "-ext", "subjectAltName");
  return [...text.matchAll(/DNS:([^,\s]+)/g)].map((m) => m[1] ?? "");
}
