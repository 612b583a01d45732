// The Lanyard side's set-up and requests for `npm run bench -- issue` (scripts/bench.mjs).
// `setUpPki` (root token) mounts `bench` (PKI), generates an EC P-256 root, writes the roles `ec`
// (allow_any_name, EC, 24h), `ec-nostore` (the same with no_store) and `rsa`, issues one stored
// leaf for OCSP and revokes another so the CRL has an entry, writes the policy `bench` and mints
// a non-root token holding only it (no default policy): the root token skips the ACL's policy
// read, so the load rows must not use it. openssl makes the EC P-256 CSR for `sign`
// and the OCSP request (RFC 6960 §4.1, no nonce) for the stored leaf.
// `lanyardRequests` gives every load row as {path, method, headers, body}, all with that token.
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { call } from "./bench-common.mjs";

export const MOUNT = "bench";

/** Exactly the paths the load rows use (HCL, Vault's policy syntax). */
const POLICY = `
path "${MOUNT}/issue/ec" { capabilities = ["update"] }
path "${MOUNT}/issue/ec-nostore" { capabilities = ["update"] }
path "${MOUNT}/issue/rsa" { capabilities = ["update"] }
path "${MOUNT}/sign/ec" { capabilities = ["update"] }
path "${MOUNT}/config/urls" { capabilities = ["read"] }
path "${MOUNT}/ocsp" { capabilities = ["read", "update"] }
path "${MOUNT}/ocsp/*" { capabilities = ["read"] }
path "${MOUNT}/crl" { capabilities = ["read"] }
`;

/** Set-up with the root token; resolves with {token, csr, ocspDer}. */
export async function setUpPki(base) {
  await call(base, "POST", `sys/mounts/${MOUNT}`, { type: "pki" });
  const ca = await call(base, "POST", `${MOUNT}/root/generate/internal`, { common_name: "Bench Root", key_type: "ec", not_after: "2036-01-01T00:00:00Z" });
  await call(base, "POST", `${MOUNT}/roles/ec`, { allow_any_name: true, key_type: "ec", ttl: "24h" });
  await call(base, "POST", `${MOUNT}/roles/ec-nostore`, { allow_any_name: true, key_type: "ec", ttl: "24h", no_store: true });
  await call(base, "POST", `${MOUNT}/roles/rsa`, { allow_any_name: true, key_type: "rsa", key_bits: 2048, ttl: "24h" });
  const leaf = await call(base, "POST", `${MOUNT}/issue/ec`, { common_name: "ocsp.bench.example" });
  const gone = await call(base, "POST", `${MOUNT}/issue/ec`, { common_name: "revoked.bench.example" });
  await call(base, "POST", `${MOUNT}/revoke`, { serial_number: gone.data.serial_number });
  await call(base, "POST", "sys/policies/acl/bench", { policy: POLICY });
  const created = await call(base, "POST", "auth/token/create", { policies: ["bench"], no_default_policy: true, ttl: "4h" });
  const token = created.auth.client_token;

  const dir = mkdtempSync(path.join(tmpdir(), "lanyard-bench-openssl-"));
  const f = (n) => path.join(dir, n);
  try {
    execFileSync("openssl", ["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", f("k.pem"), "-subj", "/CN=csr.bench.example", "-out", f("r.pem")], { stdio: "ignore" });
    writeFileSync(f("ca.pem"), `${ca.data.certificate}\n`);
    writeFileSync(f("leaf.pem"), `${leaf.data.certificate}\n`);
    execFileSync("openssl", ["ocsp", "-issuer", f("ca.pem"), "-cert", f("leaf.pem"), "-reqout", f("ocsp.req"), "-no_nonce"], { stdio: "ignore" });
    return { token, csr: readFileSync(f("r.pem"), "utf8"), ocspDer: readFileSync(f("ocsp.req")) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Every Lanyard load row's request, keyed by row id; all carry the non-root token. */
export function lanyardRequests({ token, csr, ocspDer }) {
  const auth = { "x-service-token": token };
  const json = { ...auth, "content-type": "application/json" };
  const post = (p, body) => ({ path: `/v1/${MOUNT}/${p}`, method: "POST", headers: json, body: JSON.stringify(body) });
  return {
    health: { path: "/v1/sys/health", method: "GET", headers: auth },
    issue: post("issue/ec", { common_name: "a.bench.example" }),
    nostore: post("issue/ec-nostore", { common_name: "a.bench.example" }),
    sign: post("sign/ec", { csr, common_name: "b.bench.example" }),
    // RFC 6960 Appendix A.1: GET {url}/{url-encoding of base64 encoding of the DER request}.
    ocspGet: { path: `/v1/${MOUNT}/ocsp/${encodeURIComponent(ocspDer.toString("base64"))}`, method: "GET", headers: auth },
    ocspPost: { path: `/v1/${MOUNT}/ocsp`, method: "POST", headers: { ...auth, "content-type": "application/ocsp-request" }, body: ocspDer },
    crl: { path: `/v1/${MOUNT}/crl`, method: "GET", headers: auth },
    rsa: post("issue/rsa", { common_name: "c.bench.example" }),
  };
}

/**
 * D1 round trips per request in steady state: sends `n` requests one after another and averages
 * their X-Lanyard-D1 header (the Worker's BENCH_COUNT_D1 flag, answered to requests sending
 * X-Lanyard-Count-D1; error answers lack it). Resolves
 * with {d1, answered, failed, firstFailure} (d1 NaN when no answer carried the header;
 * firstFailure the first error answer's status and the start of its body).
 */
export async function d1PerRequest(base, req, n = 20) {
  let sum = 0;
  let r2 = 0;
  let answered = 0;
  let failed = 0;
  let firstFailure;
  for (let i = 0; i < n; i++) {
    const res = await fetch(`${base}${req.path}`, { method: req.method, headers: { ...req.headers, "x-lanyard-count-d1": "1" }, body: req.body });
    const text = await res.text();
    const h = res.headers.get("x-lanyard-d1");
    if (!res.ok) {
      failed++;
      firstFailure ??= `${res.status} ${text.slice(0, 200)}`;
    }
    if (h !== null && res.ok) {
      sum += Number(h);
      r2 += Number(res.headers.get("x-lanyard-r2") ?? "0");
      answered++;
    }
  }
  return { d1: answered > 0 ? sum / answered : NaN, r2: answered > 0 ? r2 / answered : NaN, answered, failed, firstFailure };
}
