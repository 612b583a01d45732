/**
 * lego (Debian package `lego`), a real ACME client, against a Lanyard PKI mount (docs/pki-acme.md):
 * `run` gets a certificate over http-01 from lego's standalone server (reached through the
 * http-01 relay with `Host: <name>`), `renew` gets another, `revoke` revokes it, and openssl is
 * the judge: `openssl verify` against the mount's chain, `openssl ocsp` against its responder.
 * The commands are the README's ("Certificates over ACME"). Then dns-01 with lego's `exec` DNS
 * provider and a wildcard name, against a fake DNS server, through both kinds of `dns_resolver`:
 * Vault's `host:port` (DNS over TCP) and a DNS-over-HTTPS URL. A missing lego fails with the
 * install command (.ci/run installs it).
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ok } from "./client";
import { startFakeDns, type FakeDns } from "./acme-fake-dns";
import { acmeCa, expectChainVerifies, expectSuccess, freePort, ocspStatus, pemCerts, relayHost, runTool, serialOf, type AcmeCa } from "./acme-clients";

const LEGO = "/usr/bin/lego";

let dir = "";
let ca: AcmeCa;
let port = 0;
const name = `lego-${crypto.randomUUID().slice(0, 8)}.acme.test`;

beforeAll(async () => {
  const v = await runTool(LEGO, ["--version"]);
  if (v.code !== 0) throw new Error(`lego is not installed (${v.out.trim()}): apt-get install -y lego`);
  dir = await mkdtemp(path.join(tmpdir(), "lanyard-lego-"));
  ca = await acmeCa("acme-lego");
  port = await freePort();
  await relayHost(name, port);
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** The global options every lego command of this test takes, as the README writes them. */
const common = (): string[] => ["--server", ca.directory, "--email", "x@example.com", "--accept-tos", "--domains", name, "--http", "--http.port", `:${port}`, "--path", path.join(dir, "lego")];
const certFile = (): string => path.join(dir, "lego", "certificates", `${name}.crt`);

describe("lego", () => {
  let first = "";
  let serial = "";

  it("run: registers, orders, answers http-01 and gets a certificate that openssl verifies against the mount's chain", async () => {
    const r = await runTool(LEGO, [...common(), "run"]);
    expectSuccess(r, "lego run");
    console.info(`lego run: ${r.ms} ms`);
    const bundle = await readFile(certFile(), "utf8");
    expect(pemCerts(bundle).length).toBe(2);
    first = await expectChainVerifies(ca, bundle, name);
    serial = await serialOf(first);
    // Stored and listed like any other certificate of the mount.
    const stored = await ok("GET", `${ca.mount}/cert/${serial}`);
    expect(pemCerts(stored.body.data.certificate)[0]).toBe(first);
    expect((await ok("GET", `${ca.mount}/certs?list=true`)).body.data.keys).toContain(serial);
  });

  it("renew --days 9999 --no-random-sleep: a new certificate for the same name", async () => {
    expect(first, "run must pass first").not.toBe("");
    const r = await runTool(LEGO, [...common(), "renew", "--days", "9999", "--no-random-sleep"]);
    expectSuccess(r, "lego renew");
    console.info(`lego renew: ${r.ms} ms`);
    const renewed = await expectChainVerifies(ca, await readFile(certFile(), "utf8"), name);
    expect(renewed).not.toBe(first);
    expect(await serialOf(renewed)).not.toBe(serial);
    serial = await serialOf(renewed);
    expect(await ocspStatus(ca, renewed, dir)).toBe("good");
  });

  it("revoke: the certificate is revoked, and OCSP says so", async () => {
    expect(serial, "renew must pass first").not.toBe("");
    const leaf = pemCerts(await readFile(certFile(), "utf8"))[0] ?? "";
    const r = await runTool(LEGO, ["--server", ca.directory, "--email", "x@example.com", "--domains", name, "--path", path.join(dir, "lego"), "revoke"]);
    expectSuccess(r, "lego revoke");
    const stored = await ok("GET", `${ca.mount}/cert/${serial}`);
    expect(stored.body.data.revocation_time).toBeGreaterThan(0);
    expect(await ocspStatus(ca, leaf, dir)).toBe("revoked");
    // The first certificate was not revoked by revoking the renewed one.
    expect(await ocspStatus(ca, first, dir)).toBe("good");
  });
});

describe("lego with dns-01 (exec provider) and a wildcard", () => {
  let dns: FakeDns;
  let dnsCa: AcmeCa;
  let hook = "";
  const base = `dns-${crypto.randomUUID().slice(0, 8)}.acme.test`;
  const names = [base, `*.${base}`];

  beforeAll(async () => {
    dns = await startFakeDns();
    dnsCa = await acmeCa("acme-lego-dns");
    await ok("POST", `${dnsCa.mount}/config/acme`, { dns_resolver: dns.resolver });
    // lego's exec provider runs `<hook> present|cleanup <fqdn> <value>`: the hook sets the record.
    hook = path.join(dir, "dns-hook.mjs");
    await writeFile(
      hook,
      `#!${process.execPath}\nconst [mode, fqdn, value] = process.argv.slice(2);\nawait fetch(${JSON.stringify(dns.api)} + "/txt/" + encodeURIComponent(fqdn), { method: mode === "present" ? "PUT" : "DELETE", body: mode === "present" ? value : undefined });\n`,
    );
    await chmod(hook, 0o755);
  });
  afterAll(async () => {
    await dns?.close();
  });

  const legoDns = (): string[] => ["--server", dnsCa.directory, "--email", "x@example.com", "--accept-tos", ...names.flatMap((n) => ["--domains", n]), "--dns", "exec", "--dns.resolvers", dns.resolver, "--dns.disable-cp", "--path", path.join(dir, "lego-dns")];
  const execEnv = (): Record<string, string> => ({ EXEC_PATH: hook, EXEC_PROPAGATION_TIMEOUT: "30", EXEC_POLLING_INTERVAL: "1", EXEC_SEQUENCE_INTERVAL: "1" });
  const dnsCert = (): string => path.join(dir, "lego-dns", "certificates", `${base}.crt`);

  it("run: the TXT records are checked over DNS over TCP (dns_resolver host:port)", async () => {
    const r = await runTool(LEGO, [...legoDns(), "run"], { env: execEnv(), timeoutMs: 45_000 });
    expectSuccess(r, "lego run (dns-01)");
    console.info(`lego run (dns-01): ${r.ms} ms`);
    await expectChainVerifies(dnsCa, await readFile(dnsCert(), "utf8"), names);
    expect(dns.asked).toContain(`tcp _acme-challenge.${base}/16`);
  });

  it("renew: the same through a DNS-over-HTTPS dns_resolver", async () => {
    await ok("POST", `${dnsCa.mount}/config/acme`, { dns_resolver: dns.doh });
    const before = dns.asked.length;
    const r = await runTool(LEGO, [...legoDns(), "renew", "--days", "9999", "--no-random-sleep"], { env: execEnv() });
    expectSuccess(r, "lego renew (dns-01)");
    await expectChainVerifies(dnsCa, await readFile(dnsCert(), "utf8"), names);
    expect(dns.asked.slice(before)).toContain(`doh _acme-challenge.${base}/16`);
    expect(dns.asked.slice(before).filter((q) => q.startsWith("tcp "))).toEqual([]);
  });
});
