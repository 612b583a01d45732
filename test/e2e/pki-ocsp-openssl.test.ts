/**
 * The OCSP responder judged by `openssl ocsp` (docs/pki-ocsp.md; RFC 6960): openssl builds the request,
 * sends it to `<base>/v1/<mount>/ocsp`, verifies the response's signature against -CAfile and
 * checks the nonce, and prints the status. Good and revoked, EC, RSA and Ed25519 issuers, with
 * and without a nonce; an intermediate CA whose root is the only trust anchor; and the GET form
 * (openssl writes the request, we send it as base64 in the path, openssl reads the answer).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { openssl } from "../helpers/openssl";
import { CA_NOT_AFTER, ok, pkiMount } from "./client";

let dir = "";
beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), "lanyard-ocsp-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function file(name: string, body: string | Uint8Array): Promise<string> {
  const p = path.join(dir, `${crypto.randomUUID().slice(0, 8)}-${name}`);
  await writeFile(p, typeof body === "string" && !body.endsWith("\n") ? `${body}\n` : body);
  return p;
}

const url = (mount: string) => `${inject("baseUrl")}/v1/${mount}/ocsp`;

/** `openssl ocsp` against the service; returns stdout and stderr together. */
async function query(mount: string, files: { issuer: string; cert: string; ca: string }, extra: string[] = []): Promise<string> {
  // Options first: a digest option (-sha256) applies to the -cert options after it.
  const r = await openssl(["ocsp", ...extra, "-issuer", files.issuer, "-cert", files.cert, "-url", url(mount), "-CAfile", files.ca, "-resp_text"]);
  const out = `${r.stdout}\n${r.stderr}`;
  expect(r.code, out).toBe(0);
  return out;
}

interface Ca {
  mount: string;
  rootPem: string;
  issuer: string;
  ca: string;
}

async function caWith(keyType: "ec" | "rsa" | "ed25519"): Promise<Ca> {
  const mount = await pkiMount(`ocsp-${keyType}`);
  const r = await ok("POST", `${mount}/root/generate/internal`, { common_name: `OCSP ${keyType} Root`, key_type: keyType, key_bits: keyType === "rsa" ? 2048 : keyType === "ec" ? 256 : 0, not_after: CA_NOT_AFTER });
  await ok("POST", `${mount}/roles/leaf`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  const rootPem = r.body.data.certificate as string;
  const p = await file("root.pem", rootPem);
  return { mount, rootPem, issuer: p, ca: p };
}

async function leaf(mount: string, cn: string): Promise<{ pem: string; serial: string; path: string }> {
  const r = await ok("POST", `${mount}/issue/leaf`, { common_name: cn, ttl: "1h" });
  return { pem: r.body.data.certificate, serial: r.body.data.serial_number, path: await file("leaf.pem", r.body.data.certificate) };
}

/** Revokes through the revoke endpoint (spec "Revoke certificate"). */
async function revoke(mount: string, serial: string): Promise<number> {
  const r = await ok("POST", `${mount}/revoke`, { serial_number: serial });
  return r.body.data.revocation_time as number;
}

function expectVerified(out: string, certPath: string, status: "good" | "revoked"): void {
  expect(out).toContain("Response verify OK");
  expect(out).toContain(`${certPath}: ${status}`);
  expect(out).toContain("OCSP Response Status: successful (0x0)");
  expect(out).toContain("Response Type: Basic OCSP Response");
  expect(out).toMatch(/Responder Id: .*CN ?= ?OCSP .* Root/);
  expect(out).toMatch(/This Update: .+\n\s+Next Update: .+/);
}

describe("openssl ocsp against the responder", () => {
  for (const keyType of ["ec", "rsa"] as const) {
    describe(`${keyType} issuer`, () => {
      let ca: Ca;
      beforeAll(async () => {
        ca = await caWith(keyType);
      });

      it("good, with a nonce that comes back (no nonce warning)", async () => {
        const l = await leaf(ca.mount, "good.example");
        const out = await query(ca.mount, { issuer: ca.issuer, cert: l.path, ca: ca.ca });
        expectVerified(out, l.path, "good");
        expect(out).toContain("OCSP Nonce:");
        expect(out).not.toContain("WARNING: no nonce in response");
        expect(out).toContain(keyType === "ec" ? "Signature Algorithm: ecdsa-with-SHA256" : "Signature Algorithm: sha256WithRSAEncryption");
      });

      it("good, -no_nonce", async () => {
        const l = await leaf(ca.mount, "good2.example");
        const out = await query(ca.mount, { issuer: ca.issuer, cert: l.path, ca: ca.ca }, ["-no_nonce"]);
        expectVerified(out, l.path, "good");
        expect(out).not.toContain("OCSP Nonce:");
      });

      it("revoked, with the revocation time and reason, with and without a nonce", async () => {
        const l = await leaf(ca.mount, "revoked.example");
        const when = await revoke(ca.mount, l.serial);
        for (const extra of [[], ["-no_nonce"], ["-sha256"]]) {
          const out = await query(ca.mount, { issuer: ca.issuer, cert: l.path, ca: ca.ca }, extra);
          expectVerified(out, l.path, "revoked");
          expect(out).toContain("Reason: unspecified");
          const printed = /Revocation Time: (.+)/.exec(out)?.[1] ?? "";
          expect(new Date(printed).getTime() / 1000).toBe(when);
        }
      });
    });
  }

  it("Ed25519 issuer: openssl verifies an Ed25519-signed response", async () => {
    const ca = await caWith("ed25519");
    const l = await leaf(ca.mount, "ed.example");
    const out = await query(ca.mount, { issuer: ca.issuer, cert: l.path, ca: ca.ca });
    expectVerified(out, l.path, "good");
    expect(out).toContain("Signature Algorithm: ED25519");
  });

  it("an intermediate in another mount: signed by the intermediate, verified up to the root", async () => {
    const root = await caWith("rsa");
    const intMount = await pkiMount("ocsp-int");
    const csr = await ok("POST", `${intMount}/intermediate/generate/internal`, { common_name: "OCSP Int Root", key_type: "ec", key_bits: 384 });
    const signed = await ok("POST", `${root.mount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "OCSP Int Root", not_after: "2035-01-01T00:00:00Z" });
    await ok("POST", `${intMount}/intermediate/set-signed`, { certificate: signed.body.data.certificate });
    await ok("POST", `${intMount}/roles/leaf`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const l = await leaf(intMount, "deep.example");
    const intPath = await file("int.pem", signed.body.data.certificate);
    const out = await query(intMount, { issuer: intPath, cert: l.path, ca: root.ca });
    expectVerified(out, l.path, "good");
    expect(out).toContain("Signature Algorithm: ecdsa-with-SHA384");
  });

  it("a certificate of another CA is unknown, signed by the default issuer", async () => {
    const ca = await caWith("ec");
    const other = await caWith("ec");
    const l = await leaf(other.mount, "elsewhere.example");
    const out = await query(ca.mount, { issuer: other.issuer, cert: l.path, ca: ca.ca }, ["-VAfile", ca.ca]);
    expect(out).toContain("Response verify OK");
    expect(out).toContain(`${l.path}: unknown`);
  });

  it("GET form: openssl's request as base64 in the path, openssl reads and verifies the answer", async () => {
    const ca = await caWith("ec");
    const l = await leaf(ca.mount, "get.example");
    await revoke(ca.mount, l.serial);
    for (const nonce of [true, false]) {
      const reqPath = path.join(dir, `${crypto.randomUUID()}.req`);
      const r = await openssl(["ocsp", "-issuer", ca.issuer, "-cert", l.path, "-reqout", reqPath, ...(nonce ? [] : ["-no_nonce"])]);
      expect(r.code, r.stderr).toBe(0);
      const b64 = Buffer.from(await readFile(reqPath)).toString("base64");
      const res = await fetch(`${url(ca.mount)}/${encodeURIComponent(b64)}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/ocsp-response");
      // An answer to a request with a nonce is built for that request alone (RFC 8954): no-store.
      // Without one it may be kept for what is left of CACHE_TTL_MS (docs/pki-ocsp.md "Caching").
      if (nonce) expect(res.headers.get("cache-control")).toBe("no-store");
      else expect(res.headers.get("cache-control")).toMatch(/^public, max-age=[01], no-transform, must-revalidate$/);
      const respPath = await file("resp.der", new Uint8Array(await res.arrayBuffer()));
      // -reqin (not -cert, which would make a new request with a new nonce) so the nonce is checked.
      const v = await openssl(["ocsp", "-reqin", reqPath, "-respin", respPath, "-issuer", ca.issuer, "-CAfile", ca.ca, "-resp_text"]);
      const out = `${v.stdout}\n${v.stderr}`;
      expect(v.code, out).toBe(0);
      expect(out).toContain("Response verify OK");
      expect(out).toContain("Cert Status: revoked");
      expect(out).toContain("Revocation Reason: unspecified (0x0)");
      expect(out).not.toContain("Nonce Verify error");
      expect(out.includes("OCSP Nonce:")).toBe(nonce);
    }
  });

  it("ocsp_disable: openssl reports the unauthorized status", async () => {
    const ca = await caWith("ec");
    const l = await leaf(ca.mount, "off.example");
    await ok("POST", `${ca.mount}/config/crl`, { ocsp_disable: true });
    // With ocsp_disable the responder answers HTTP 401, as Vault's does, and openssl's HTTP client
    // stops at that status ...
    const r = await openssl(["ocsp", "-issuer", ca.issuer, "-cert", l.path, "-url", url(ca.mount), "-CAfile", ca.ca]);
    expect(`${r.stdout}${r.stderr}`).toContain("code=401");
    // ... and the body it would have read is the OCSP "unauthorized" response.
    const reqPath = path.join(dir, `${crypto.randomUUID()}.req`);
    expect((await openssl(["ocsp", "-issuer", ca.issuer, "-cert", l.path, "-reqout", reqPath])).code).toBe(0);
    const res = await fetch(url(ca.mount), { method: "POST", headers: { "content-type": "application/ocsp-request" }, body: await readFile(reqPath) });
    expect(res.status).toBe(401);
    const respPath = await file("resp.der", new Uint8Array(await res.arrayBuffer()));
    const v = await openssl(["ocsp", "-respin", respPath, "-resp_text", "-noverify"]);
    expect(`${v.stdout}${v.stderr}`).toContain("Responder Error: unauthorized (6)");
  });
});
