/**
 * Revocation and CRLs judged by openssl (docs/pki-revocation-crl.md): `openssl crl -CAfile` verifies
 * every CRL (EC and RSA issuers, complete and delta), `openssl verify -crl_check` reports a
 * revoked certificate as revoked and a good one as OK, CRL numbers strictly increase,
 * revoke-with-key works with keys openssl generated (RSA, EC, Ed25519; PKCS#8 and traditional
 * PEM) and refuses a wrong key, 100 concurrent revocations across two issuers all land on the
 * CRLs, and bad input is a 4xx. The docs' walk-throughs run as written, the sharded one too
 * (docs/pki-revocation-crl.md "Sharded CRLs": openssl reads a shard, its critical IDP names the
 * certificate's CDP URL, `verify -crl_check` with the shard passes a good certificate and fails
 * a revoked one).
 */
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import path from "node:path";
import { promisify } from "node:util";
import { describe, expect, inject, it } from "vitest";
import { E2E_ROOT_TOKEN } from "./env";
import { openssl, opensslCsr, withFiles } from "../helpers/openssl";
import { CA_NOT_AFTER, call, ok, pkiMount } from "./client";

/** `openssl crl -CAfile`: verifies the signature; returns the text dump and whether it verified. */
async function crlCheck(crlPem: string, caPem: string): Promise<{ verified: boolean; text: string; number: number }> {
  return withFiles({ "crl.pem": crlPem, "ca.pem": caPem }, async (p) => {
    const r = await openssl(["crl", "-in", p("crl.pem"), "-CAfile", p("ca.pem"), "-noout", "-text", "-crlnumber"]);
    const out = `${r.stdout}${r.stderr}`;
    const num = /crlNumber=(?:0x)?([0-9A-Fa-f]+)/.exec(out)?.[1] ?? "";
    return { verified: r.code === 0 && /verify OK/.test(out), text: out, number: parseInt(num, 16) };
  });
}

async function verifyWithCrl(certPem: string, caPem: string, crls: string[], extra: string[] = []): Promise<{ ok: boolean; output: string }> {
  return withFiles({ "c.pem": certPem, "ca.pem": caPem, "crls.pem": crls.join("\n") }, async (p) => {
    const r = await openssl(["verify", "-crl_check", ...extra, "-CAfile", p("ca.pem"), "-CRLfile", p("crls.pem"), p("c.pem")]);
    return { ok: r.code === 0 && /: OK\s*$/.test(r.stdout.trim()), output: `${r.stdout}${r.stderr}` };
  });
}

const hexOf = (colon: string) => colon.replace(/:/g, "").toUpperCase().replace(/^0+/, "");
/** Serials listed in an `openssl crl -text` dump, as upper-case hex without leading zeros. */
const dumpSerials = (text: string) => [...text.matchAll(/Serial Number: ([0-9A-F]+)/g)].map((m) => (m[1] ?? "").replace(/^0+/, ""));

async function rootMount(keyType: "ec" | "rsa") {
  const p = await pkiMount("crl");
  const r = await ok("POST", `${p}/root/generate/internal`, { common_name: `CRL Root ${keyType}`, key_type: keyType, key_bits: keyType === "rsa" ? 2048 : 256, not_after: CA_NOT_AFTER });
  await ok("POST", `${p}/roles/leaf`, { allow_any_name: true, key_type: "ec", ttl: "24h" });
  await ok("POST", `${p}/roles/any`, { allow_any_name: true, key_type: "any", ttl: "24h" });
  return { path: p, root: r.body.data.certificate as string, issuerId: r.body.data.issuer_id as string };
}

async function issue(p: string, role = "leaf") {
  const r = await ok("POST", `${p}/issue/${role}`, { common_name: "leaf.crl.example" });
  return r.body.data as { certificate: string; serial_number: string; private_key: string };
}

describe.each(["ec", "rsa"] as const)("%s issuer: CRLs judged by openssl", (keyType) => {
  it("complete CRL verifies; verify -crl_check reports the revoked certificate and passes the good one; numbers grow", async () => {
    const { path: p, root } = await rootMount(keyType);
    const good = await issue(p);
    const bad = await issue(p);
    const first = await crlCheck((await call("GET", `${p}/crl/pem`, undefined, null)).text, root);
    expect(first.verified, first.text).toBe(true);
    expect(first.text).toContain("Version 2 (0x1)");
    expect(first.text).toContain("No Revoked Certificates");

    const rev = await ok("POST", `${p}/revoke`, { serial_number: bad.serial_number });
    expect(rev.body.data.state).toBe("revoked");
    const crlPem = (await call("GET", `${p}/crl/pem`, undefined, null)).text;
    const second = await crlCheck(crlPem, root);
    expect(second.verified, second.text).toBe(true);
    expect(second.text).toContain("X509v3 Authority Key Identifier");
    expect(second.text).toContain("X509v3 CRL Number");
    expect(dumpSerials(second.text)).toEqual([hexOf(bad.serial_number)]);
    expect(second.number).toBeGreaterThan(first.number);

    const revoked = await verifyWithCrl(bad.certificate, root, [crlPem]);
    expect(revoked.ok).toBe(false);
    expect(revoked.output).toContain("certificate revoked");
    const fine = await verifyWithCrl(good.certificate, root, [crlPem]);
    expect(fine.ok, fine.output).toBe(true);

    // The per-issuer DER and PEM forms are the same CRL.
    const issuerPem = (await call("GET", `${p}/issuer/default/crl/pem`, undefined, null)).text;
    expect(issuerPem).toBe(`${crlPem}\n`);
    const third = await crlCheck((await call("GET", `${p}/crl/delta/pem`, undefined, null)).text, root);
    expect(third.verified, third.text).toBe(true);
    expect(third.text).toMatch(/X509v3 Delta CRL Indicator: critical/);
    expect(third.number).toBeGreaterThan(second.number);
  });

  it("delta CRLs verify and carry the new revocation; the complete CRL has Freshest CRL", async () => {
    const { path: p, root } = await rootMount(keyType);
    await ok("POST", `${p}/config/urls`, { delta_crl_distribution_points: ["http://crl.example/delta.crl"] });
    await ok("POST", `${p}/config/crl`, { auto_rebuild: true, enable_delta: true });
    const leaf = await issue(p);
    await ok("POST", `${p}/revoke`, { serial_number: leaf.serial_number });
    await ok("GET", `${p}/crl/rotate-delta`);
    const complete = await crlCheck((await call("GET", `${p}/crl/pem`, undefined, null)).text, root);
    expect(complete.verified, complete.text).toBe(true);
    expect(complete.text).toContain("X509v3 Freshest CRL");
    expect(complete.text).toContain("http://crl.example/delta.crl");
    expect(dumpSerials(complete.text)).toEqual([]);
    const deltaPem = (await call("GET", `${p}/crl/delta/pem`, undefined, null)).text;
    const delta = await crlCheck(deltaPem, root);
    expect(delta.verified, delta.text).toBe(true);
    expect(delta.text).toMatch(/X509v3 Delta CRL Indicator: critical/);
    expect(dumpSerials(delta.text)).toEqual([hexOf(leaf.serial_number)]);
    expect(delta.number).toBeGreaterThan(complete.number);
    // With -use_deltas openssl combines the two and finds the revocation.
    const completePem = (await call("GET", `${p}/crl/pem`, undefined, null)).text;
    const v = await verifyWithCrl(leaf.certificate, root, [completePem, deltaPem], ["-use_deltas"]);
    expect(v.output).toContain("certificate revoked");
  });
});

describe("revoke-with-key with keys openssl made", () => {
  for (const alg of ["ec", "rsa", "ed25519"] as const) {
    it(`${alg}: PKCS#8 and traditional PEM prove possession; another key is refused`, async () => {
      const { path: p, root } = await rootMount("ec");
      const a = await opensslCsr("/CN=a.crl.example", alg);
      const b = await opensslCsr("/CN=b.crl.example", alg);
      const certA = (await ok("POST", `${p}/sign/any`, { csr: a.csr, common_name: "a.crl.example" })).body.data;
      const wrong = await call("POST", `${p}/revoke-with-key`, { serial_number: certA.serial_number, private_key: b.key });
      expect(wrong.status, wrong.text).toBe(400);
      expect(wrong.body.errors[0]).toBe("provided private key does not match certificate's public key");
      let key = a.key;
      if (alg !== "ed25519") {
        // The traditional containers: PKCS#1 "RSA PRIVATE KEY" and SEC1 "EC PRIVATE KEY".
        key = await withFiles({ "k.pem": a.key }, async (f) => {
          const r = await openssl([alg === "rsa" ? "rsa" : "ec", "-in", f("k.pem"), ...(alg === "rsa" ? ["-traditional"] : [])]);
          return r.stdout;
        });
        expect(key).toContain(alg === "rsa" ? "BEGIN RSA PRIVATE KEY" : "BEGIN EC PRIVATE KEY");
      }
      const r = await call("POST", `${p}/revoke-with-key`, { certificate: certA.certificate, private_key: key });
      expect(r.status, r.text).toBe(200);
      const crl = await crlCheck((await call("GET", `${p}/crl/pem`, undefined, null)).text, root);
      expect(crl.verified).toBe(true);
      expect(dumpSerials(crl.text)).toContain(hexOf(certA.serial_number));
    });
  }
});

describe("100 concurrent revocations across two issuers", () => {
  it("all 100 are on the CRLs, which verify, and CRL numbers strictly increased", async () => {
    const p = await pkiMount("crl100");
    const ec = await ok("POST", `${p}/root/generate/internal`, { common_name: "EC Root", key_type: "ec", not_after: CA_NOT_AFTER, issuer_name: "ec" });
    const rsa = await ok("POST", `${p}/issuers/generate/root/internal`, { common_name: "RSA Root", key_type: "rsa", key_bits: 2048, not_after: CA_NOT_AFTER, issuer_name: "rsa" });
    await ok("POST", `${p}/roles/ec`, { allow_any_name: true, key_type: "ec", issuer_ref: "ec", ttl: "24h" });
    await ok("POST", `${p}/roles/rsa`, { allow_any_name: true, key_type: "ec", issuer_ref: "rsa", ttl: "24h" });
    const leaves: { serial: string; issuer: "ec" | "rsa" }[] = [];
    for (let i = 0; i < 50; i++) {
      const [a, b] = await Promise.all([issue(p, "ec"), issue(p, "rsa")]);
      leaves.push({ serial: a.serial_number, issuer: "ec" }, { serial: b.serial_number, issuer: "rsa" });
    }
    const roots = { ec: ec.body.data.certificate as string, rsa: rsa.body.data.certificate as string };
    const before = {
      ec: (await crlCheck((await call("GET", `${p}/issuer/ec/crl/pem`, undefined, null)).text, roots.ec)).number,
      rsa: (await crlCheck((await call("GET", `${p}/issuer/rsa/crl/pem`, undefined, null)).text, roots.rsa)).number,
    };
    const answers = await Promise.all(leaves.map((l) => call("POST", `${p}/revoke`, { serial_number: l.serial })));
    for (const a of answers) expect(a.status, a.text).toBe(200);
    for (const issuer of ["ec", "rsa"] as const) {
      const crl = await crlCheck((await call("GET", `${p}/issuer/${issuer}/crl/pem`, undefined, null)).text, roots[issuer]);
      expect(crl.verified, crl.text).toBe(true);
      const listed = dumpSerials(crl.text).sort();
      expect(listed).toEqual(leaves.filter((l) => l.issuer === issuer).map((l) => hexOf(l.serial)).sort());
      expect(crl.number).toBeGreaterThan(before[issuer]);
    }
    // The judge can say no: the EC issuer's CRL does not verify under the RSA root.
    const crossed = await crlCheck((await call("GET", `${p}/issuer/ec/crl/pem`, undefined, null)).text, roots.rsa);
    expect(crossed.verified).toBe(false);
  });
});

describe("bad input is a 4xx", () => {
  it("both, neither, malformed PEM, a foreign certificate, a wrong key", async () => {
    const { path: p } = await rootMount("ec");
    const other = await rootMount("ec");
    const leaf = await issue(p);
    const foreign = await issue(other.path);
    const cases: [string, Record<string, unknown>][] = [
      ["revoke", { serial_number: leaf.serial_number, certificate: leaf.certificate }],
      ["revoke", {}],
      ["revoke", { certificate: "-----BEGIN CERTIFICATE-----\nnot base64 at all!!\n-----END CERTIFICATE-----" + " ".repeat(40) }],
      ["revoke", { certificate: foreign.certificate }],
      ["revoke", { serial_number: "not-hex" }],
      ["revoke-with-key", { serial_number: leaf.serial_number, private_key: foreign.private_key }],
      ["revoke-with-key", { serial_number: leaf.serial_number, private_key: `-----BEGIN PRIVATE KEY-----\n${"QUJD".repeat(20)}\n-----END PRIVATE KEY-----` }],
      ["revoke-with-key", { certificate: foreign.certificate, private_key: foreign.private_key }],
    ];
    for (const [endpoint, body] of cases) {
      const r = await call("POST", `${p}/${endpoint}`, body);
      expect(r.status, `${endpoint} ${JSON.stringify(body).slice(0, 80)}: ${r.text}`).toBeGreaterThanOrEqual(400);
      expect(r.status).toBeLessThan(500);
      expect(r.body.errors.length).toBeGreaterThan(0);
    }
  });
});

/** Runs the doc's block between `<!-- <tag>:start -->` and `<!-- <tag>:end -->` as written; its stdout. */
async function runDocBlock(tag: string, mountPrefix: string): Promise<string> {
  const doc = await readFile(path.resolve(import.meta.dirname, "../../docs/pki-revocation-crl.md"), "utf8");
  const block = new RegExp(`<!-- ${tag}:start -->\\s*\`\`\`bash\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${tag}:end -->`).exec(doc)?.[1];
  expect(block, `the doc has the ${tag} block`).toBeTruthy();
  return withFiles({}, async (p) => {
    const { stdout } = await promisify(execFile)("bash", ["-euo", "pipefail", "-c", block ?? ""], {
      cwd: path.dirname(p("x")),
      env: { ...process.env, LANYARD: inject("baseUrl"), ROOT: E2E_ROOT_TOKEN, M: `${mountPrefix}_${crypto.randomUUID().slice(0, 6)}` },
      timeout: 60_000,
    }).catch((e: { stdout?: string; stderr?: string }) => {
      throw new Error(`${tag} failed\nstdout:\n${e.stdout ?? ""}\nstderr:\n${e.stderr ?? ""}`);
    });
    return stdout;
  });
}

describe("docs/pki-revocation-crl.md", () => {
  it("the sharded-CRL walk-through runs as written: openssl reads the shard, its IDP is the certificate's CDP, verify passes the good and fails the revoked", async () => {
    const stdout = await runDocBlock("crl-shards-walkthrough", "pki_shards");
    const lines = stdout.trim().split("\n");
    expect(lines[0]).toBe("4");
    const cdp = /URI:(http\S+\/crl\/shard\/([0-3]))/.exec(stdout);
    expect(cdp, stdout).toBeTruthy();
    expect(stdout).toContain("revoked");
    expect(stdout).toContain("verify OK");
    expect(stdout).toMatch(/X509v3 Issuing Distribution Point: critical/);
    // The IDP names exactly the URI the revoked certificate carries.
    expect(stdout.split(cdp?.[1] ?? "\0").length).toBeGreaterThanOrEqual(3);
    expect(stdout).toContain("Only User Certificates");
    expect(stdout).toContain("good.pem: OK");
    expect(stdout).toContain("certificate revoked");
  });

  it("the walk-through runs as written and ends with CRLs openssl verifies", async () => {
    const stdout = await runDocBlock("crl-walkthrough", "pki_rev");
    const lines = stdout.trim().split("\n");
    expect(lines.slice(0, 2)).toEqual(["revoked", "revoked"]);
    expect(stdout).toContain("verify OK");
    expect(stdout).toContain("certificate revoked");
    expect(stdout).toContain("c.pem: OK");
    expect(stdout).toMatch(/X509v3 Delta CRL Indicator: critical/);
  });
});
