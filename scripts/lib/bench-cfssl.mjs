// The peer of `npm run bench -- issue` (scripts/bench.mjs; docs/pki-issuance-benchmark.md): CloudFlare's
// cfssl (Debian `golang-cfssl`) serving on loopback with an EC P-256 CA, loaded with the same
// generator and concurrency as the Worker. `startCfssl` makes the CA with `cfssl gencert
// -initca`, writes a signing config whose default profile is 24h with the usages signing, key
// encipherment and server auth (the Lanyard roles' TTL), and starts `cfssl serve` on a free port.
// Invariants: the server runs as our direct child, so its pid is the process whose CPU is read
// from /proc; `stop()` kills exactly that pid and removes the temporary directory.
// cfssl's per-request INFO log line is turned down (-loglevel 2) and goes to a file: Lanyard
// does not log per request either, and a pipe nobody reads would block it.
import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { onPath } from "./bench-load.mjs";

export const CFSSL_MISSING = "cfssl not installed: apt-get install golang-cfssl (the peer columns are skipped)";

/** A free loopback TCP port (bound, read, released). */
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.on("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** The peer's requests: newcert (a fresh EC P-256 key and certificate) and sign (a CSR). */
export function cfsslRequests(csrPem) {
  const json = { "content-type": "application/json" };
  return {
    newcert: {
      path: "/api/v1/cfssl/newcert",
      method: "POST",
      headers: json,
      body: JSON.stringify({ request: { CN: "a.bench.example", hosts: ["a.bench.example"], key: { algo: "ecdsa", size: 256 } } }),
    },
    sign: { path: "/api/v1/cfssl/sign", method: "POST", headers: json, body: JSON.stringify({ certificate_request: csrPem }) },
  };
}

/**
 * Starts `cfssl serve`; resolves with {base, pid, stop} once /api/v1/cfssl/newcert answers 200,
 * or with null when cfssl is not on PATH.
 */
export async function startCfssl() {
  if (!onPath("cfssl", ["version"])) return null;
  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-cfssl-"));
  const file = (f) => path.join(dir, f);
  writeFileSync(file("ca-csr.json"), JSON.stringify({ CN: "Bench cfssl Root", key: { algo: "ecdsa", size: 256 } }));
  // gencert prints {cert, key, csr} as JSON on stdout (cfssljson would only split it into files).
  const ca = JSON.parse(execFileSync("cfssl", ["gencert", "-initca", file("ca-csr.json")], { stdio: ["ignore", "pipe", "ignore"] }).toString());
  writeFileSync(file("ca.pem"), ca.cert);
  writeFileSync(file("ca-key.pem"), ca.key, { mode: 0o600 });
  writeFileSync(file("config.json"), JSON.stringify({ signing: { default: { expiry: "24h", usages: ["signing", "key encipherment", "server auth"] } } }));
  const port = await freePort();
  const log = openSync(file("serve.log"), "w");
  const child = spawn(
    "cfssl",
    ["serve", "-address", "127.0.0.1", "-port", String(port), "-ca", file("ca.pem"), "-ca-key", file("ca-key.pem"), "-config", file("config.json"), "-loglevel", "2"],
    { stdio: ["ignore", log, log] },
  );
  let exited = false;
  child.on("exit", () => (exited = true));
  const stop = () => {
    if (!exited) child.kill("SIGTERM");
    rmSync(dir, { recursive: true, force: true });
  };
  const base = `http://127.0.0.1:${port}`;
  const probe = cfsslRequests("").newcert;
  for (let i = 0; i < 100; i++) {
    if (exited) break;
    try {
      const res = await fetch(`${base}${probe.path}`, { method: "POST", headers: probe.headers, body: probe.body });
      await res.arrayBuffer();
      if (res.ok) return { base, pid: child.pid, stop };
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  const tail = readFileSync(file("serve.log"), "utf8").trim().split("\n").slice(-5).join("\n");
  stop();
  throw new Error(`cfssl serve did not answer on ${base}:\n${tail}`);
}
