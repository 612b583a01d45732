/**
 * Patient validation (docs/pki-acme.md "Patient validation") with Debian's lego and certbot,
 * unmodified: what answers a challenge appears only about 20 seconds after the client posted it,
 * and the certificate is still issued, because Lanyard keeps the challenge `processing` and tries
 * again from its queue (attempts at 0, 3, 9, 21, 45, 90 s; this Worker has no
 * ACME_RETRY_DELAYS_S). For http-01 the client's standalone server is registered with the http-01
 * relay (./acme-http01-relay.ts) only 21 s after the client starts (it posts the challenge about
 * a second in); for dns-01 lego's `exec` hook returns at once and publishes the TXT record 20 s
 * later (lego posts the challenge right after the hook, `--dns.disable-cp`). openssl verifies
 * each certificate against the mount's chain. The three run concurrently (their own names, ports
 * and directories), so the file waits the 20 s once, not three times.
 */
import { chmod, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ok } from "./client";
import { startFakeDns, type FakeDns } from "./acme-fake-dns";
import { acmeCa, expectChainVerifies, expectSuccess, freePort, relayHost, runTool, type AcmeCa } from "./acme-clients";

const LATE_MS = 21_000;
let dir = "";
let ca: AcmeCa;
let dns: FakeDns;

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "lanyard-patient-"));
  ca = await acmeCa("acme-patient");
  dns = await startFakeDns();
});
afterAll(async () => {
  await dns?.close();
  if (dir) await rm(dir, { recursive: true, force: true });
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Runs a client while its challenge server becomes reachable only LATE_MS after it starts. */
async function lateResponder(name: string, port: number, cmd: string, args: string[]) {
  const started = Date.now();
  const run = runTool(cmd, args, { timeoutMs: 150_000 });
  await sleep(LATE_MS);
  await relayHost(name, port);
  const r = await run;
  return { ...r, ms: Date.now() - started };
}

it.concurrent("lego, http-01: the responder appears 20 s after the challenge POST; the certificate is issued", async () => {
  const name = `late-lego-${crypto.randomUUID().slice(0, 8)}.acme.test`;
  const port = await freePort();
  const r = await lateResponder(name, port, "/usr/bin/lego", ["--server", ca.directory, "--email", "x@example.com", "--accept-tos", "--domains", name, "--http", "--http.port", `:${port}`, "--path", path.join(dir, "lego"), "run"]);
  expectSuccess(r, "lego run (late responder)");
  expect(r.ms).toBeGreaterThan(LATE_MS);
  await expectChainVerifies(ca, await readFile(path.join(dir, "lego", "certificates", `${name}.crt`), "utf8"), name);
}, 180_000);

it.concurrent("certbot, http-01: the responder appears 20 s after the challenge POST; the certificate is issued", async () => {
  const name = `late-certbot-${crypto.randomUUID().slice(0, 8)}.acme.test`;
  const port = await freePort();
  const dirs = ["--config-dir", path.join(dir, "certbot", "config"), "--work-dir", path.join(dir, "certbot", "work"), "--logs-dir", path.join(dir, "certbot", "logs")];
  const r = await lateResponder(name, port, "/usr/bin/certbot", ["certonly", "--standalone", "--http-01-port", String(port), "--server", ca.directory, "-d", name, "--agree-tos", "-m", "x@example.com", "--non-interactive", ...dirs]);
  expectSuccess(r, "certbot certonly (late responder)");
  expect(r.ms).toBeGreaterThan(LATE_MS);
  await expectChainVerifies(ca, await readFile(path.join(dir, "certbot", "config", "live", name, "fullchain.pem"), "utf8"), name);
}, 180_000);

it.concurrent("lego, dns-01: the TXT record appears 20 s after the challenge POST; the certificate is issued", async () => {
  const dnsCa = await acmeCa("acme-patient-dns");
  await ok("POST", `${dnsCa.mount}/config/acme`, { dns_resolver: dns.doh });
  const name = `late-dns-${crypto.randomUUID().slice(0, 8)}.acme.test`;
  // lego's exec provider runs `<hook> present|cleanup <fqdn> <value>`; present publishes later.
  const hook = path.join(dir, "late-hook.sh");
  const api = `${dns.api}/txt/`;
  await writeFile(
    hook,
    `#!/bin/bash\nset -eu\nurl=${JSON.stringify(api)}"$2"\nif [ "$1" = present ]; then (sleep 20; curl -sf -X PUT --data-binary "$3" "$url") > /dev/null 2>&1 < /dev/null & else curl -sf -X DELETE "$url" > /dev/null; fi\n`,
  );
  await chmod(hook, 0o755);
  const started = Date.now();
  const r = await runTool("/usr/bin/lego", ["--server", dnsCa.directory, "--email", "x@example.com", "--accept-tos", "--domains", name, "--dns", "exec", "--dns.resolvers", dns.resolver, "--dns.disable-cp", "--path", path.join(dir, "lego-dns"), "run"], {
    env: { EXEC_PATH: hook, EXEC_PROPAGATION_TIMEOUT: "30", EXEC_POLLING_INTERVAL: "1", EXEC_SEQUENCE_INTERVAL: "1" },
    timeoutMs: 150_000,
  });
  expectSuccess(r, "lego run (late TXT record)");
  expect(Date.now() - started).toBeGreaterThan(20_000);
  await expectChainVerifies(dnsCa, await readFile(path.join(dir, "lego-dns", "certificates", `${name}.crt`), "utf8"), name);
}, 180_000);
