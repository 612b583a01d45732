/**
 * certbot (Debian package `certbot`), a real ACME client, against a Lanyard PKI mount
 * (docs/pki-acme.md): `certonly --standalone` gets a certificate over http-01 (certbot's standalone
 * server reached through the http-01 relay with `Host: <name>`), `renew --force-renewal` gets
 * another, `revoke` revokes it; openssl verifies each against the mount's chain and asks the
 * mount's OCSP responder. This test uses the role directory `roles/web/acme/directory`. The
 * commands are the README's ("Certificates over ACME"). A missing certbot fails with the install
 * command (.ci/run installs it).
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ok } from "./client";
import { acmeCa, expectChainVerifies, expectSuccess, freePort, ocspStatus, pemCerts, relayHost, runTool, serialOf, type AcmeCa } from "./acme-clients";

const CERTBOT = "/usr/bin/certbot";

let dir = "";
let ca: AcmeCa;
let directory = "";
let port = 0;
const name = `certbot-${crypto.randomUUID().slice(0, 8)}.acme.test`;

beforeAll(async () => {
  const v = await runTool(CERTBOT, ["--version"]);
  if (v.code !== 0) throw new Error(`certbot is not installed (${v.out.trim()}): apt-get install -y certbot`);
  dir = await mkdtemp(path.join(tmpdir(), "lanyard-certbot-"));
  ca = await acmeCa("acme-certbot");
  directory = ca.directory.replace(/\/acme\/directory$/, "/roles/web/acme/directory");
  port = await freePort();
  await relayHost(name, port);
});
afterAll(async () => {
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** certbot's state directories: its own, so it needs neither root nor /etc/letsencrypt. */
const dirs = (): string[] => ["--config-dir", path.join(dir, "config"), "--work-dir", path.join(dir, "work"), "--logs-dir", path.join(dir, "logs")];
const live = (file: string): string => path.join(dir, "config", "live", name, file);

describe("certbot", () => {
  let first = "";
  let serial = "";

  it("certonly --standalone: a certificate that openssl verifies against the mount's chain", async () => {
    const r = await runTool(CERTBOT, ["certonly", "--standalone", "--http-01-port", String(port), "--server", directory, "-d", name, "--agree-tos", "-m", "x@example.com", "--non-interactive", ...dirs()]);
    expectSuccess(r, "certbot certonly");
    console.info(`certbot certonly: ${r.ms} ms`);
    first = await expectChainVerifies(ca, await readFile(live("fullchain.pem"), "utf8"), name);
    expect(pemCerts(await readFile(live("cert.pem"), "utf8"))[0]).toBe(first);
    serial = await serialOf(first);
    const stored = await ok("GET", `${ca.mount}/cert/${serial}`);
    expect(pemCerts(stored.body.data.certificate)[0]).toBe(first);
  });

  it("renew --force-renewal --no-random-sleep-on-renew: a new certificate for the same name", async () => {
    expect(first, "certonly must pass first").not.toBe("");
    const r = await runTool(CERTBOT, ["renew", "--force-renewal", "--no-random-sleep-on-renew", "--non-interactive", ...dirs()]);
    expectSuccess(r, "certbot renew");
    console.info(`certbot renew: ${r.ms} ms`);
    const renewed = await expectChainVerifies(ca, await readFile(live("fullchain.pem"), "utf8"), name);
    expect(renewed).not.toBe(first);
    serial = await serialOf(renewed);
    expect(await ocspStatus(ca, renewed, dir)).toBe("good");
  });

  it("revoke: the certificate is revoked, and OCSP says so", async () => {
    expect(serial, "renew must pass first").not.toBe("");
    const leaf = pemCerts(await readFile(live("cert.pem"), "utf8"))[0] ?? "";
    const r = await runTool(CERTBOT, ["revoke", "--cert-name", name, "--server", directory, "--non-interactive", "--no-delete-after-revoke", ...dirs()]);
    expectSuccess(r, "certbot revoke");
    const stored = await ok("GET", `${ca.mount}/cert/${serial}`);
    expect(stored.body.data.revocation_time).toBeGreaterThan(0);
    expect(await ocspStatus(ca, leaf, dir)).toBe("revoked");
    expect(await ocspStatus(ca, first, dir)).toBe("good");
  });
});
