/**
 * Privileged signing judged by openssl (spec "Sign verbatim", "Sign self-issued"): sign-verbatim
 * leaves verify against their chain and carry the CSR's values (or the KU/EKU defaults);
 * sign-self-issued cross-certificates (root rolling) verify against the signing root, also for
 * self-signed CAs that openssl made itself and for RSA-PSS; the sudo rule and the refusals;
 * certificate metadata round trip.
 */
import { readFile } from "node:fs/promises";
import { beforeAll, describe, expect, it } from "vitest";
import { openssl, opensslCsr, verify, withFiles, x509Field, x509Text } from "../helpers/openssl";
import { CA_NOT_AFTER, call, ok, pkiMount } from "./client";

/** Runs openssl in a temporary directory; `files` are written first, `out` files read after. */
async function inDir(files: Record<string, string>, args: (p: (n: string) => string) => string[][], out: string[]): Promise<Record<string, string>> {
  return withFiles(files, async (p) => {
    for (const a of args(p)) {
      const r = await openssl(a);
      if (r.code !== 0) throw new Error(`openssl ${a.join(" ")} failed: ${r.stderr}`);
    }
    const res: Record<string, string> = {};
    for (const n of out) res[n] = await readFile(p(n), "utf8");
    return res;
  });
}

/** An EC key and a CSR with `-addext` extensions, made by openssl. */
async function csrWithExts(subject: string, addext: string[]): Promise<string> {
  const r = await inDir(
    {},
    (p) => [
      ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p("k.pem")],
      ["req", "-new", "-key", p("k.pem"), "-subj", subject, ...addext.flatMap((e) => ["-addext", e]), "-out", p("r.pem")],
    ],
    ["r.pem"],
  );
  return r["r.pem"] ?? "";
}

/** A self-signed CA made by openssl itself (not by the service's encoder). */
async function opensslRoot(subject: string, keyAlg: "ec" | "rsa-pss"): Promise<string> {
  const gen =
    keyAlg === "ec"
      ? ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"]
      : ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"];
  const sig = keyAlg === "rsa-pss" ? ["-sha256", "-sigopt", "rsa_padding_mode:pss", "-sigopt", "rsa_pss_saltlen:32"] : [];
  const r = await inDir(
    {},
    (p) => [
      [...gen, "-out", p("k.pem")],
      [
        "req", "-x509", "-new", "-key", p("k.pem"), "-subj", subject, "-days", "30", ...sig,
        "-addext", "basicConstraints=critical,CA:TRUE,pathlen:3",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        "-addext", "certificatePolicies=1.2.3.4.5",
        "-addext", "nsComment=kept verbatim",
        "-out", p("c.pem"),
      ],
    ],
    ["c.pem"],
  );
  return r["c.pem"] ?? "";
}

async function tokenFor(policy: string): Promise<string> {
  const name = `p-${crypto.randomUUID().slice(0, 8)}`;
  await ok("POST", `sys/policies/acl/${name}`, { policy }, 204);
  return (await ok("POST", "auth/token/create", { policies: [name] })).body.auth.client_token as string;
}

describe("sign-verbatim, judged by openssl", () => {
  let rootMount = "";
  let rootPem = "";
  let intMount = "";
  let intPem = "";

  beforeAll(async () => {
    rootMount = await pkiMount("vroot");
    rootPem = (await ok("POST", `${rootMount}/root/generate/internal`, { common_name: "Verbatim Root", key_type: "rsa", not_after: CA_NOT_AFTER })).body.data.certificate;
    intMount = await pkiMount("vint");
    const csr = await ok("POST", `${intMount}/intermediate/generate/internal`, { common_name: "Verbatim Int", key_type: "ec" });
    intPem = (await ok("POST", `${rootMount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "Verbatim Int", not_after: "2035-01-01T00:00:00Z" })).body.data.certificate;
    await ok("POST", `${intMount}/intermediate/set-signed`, { certificate: `${intPem}\n${rootPem}` });
  });

  it("a leaf with the CSR's subject and SANs and the default key usage verifies against its chain", async () => {
    const { csr } = await opensslCsr("/C=NL/O=Verbatim Org/OU=Edge/CN=edge.verbatim.test", "ec", ["DNS:edge.verbatim.test", "DNS:alt.other.test", "IP:192.0.2.10", "email:ops@verbatim.test"]);
    const r = await ok("POST", `${intMount}/sign-verbatim`, { csr, ttl: "2h" });
    const leaf = r.body.data.certificate as string;
    const v = await verify(leaf, rootPem, r.body.data.ca_chain.filter((c: string) => c.trim() !== rootPem.trim()));
    expect(v.ok, v.output).toBe(true);
    expect(await x509Field(leaf, "-subject")).toBe("subject=C = NL, O = Verbatim Org, OU = Edge, CN = edge.verbatim.test");
    const text = await x509Text(leaf);
    expect(text).toMatch(/X509v3 Subject Alternative Name:\s+DNS:edge\.verbatim\.test, DNS:alt\.other\.test, IP Address:192\.0\.2\.10, email:ops@verbatim\.test/);
    expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature, Key Encipherment, Key Agreement/);
    expect(text).not.toContain("Extended Key Usage");
    expect(text).not.toContain("Basic Constraints");
    expect(text).toContain("Issuer: CN = Verbatim Int");
    expect(r.body.data.ca_chain).toHaveLength(2);
    // The certificate is stored and served as issued.
    const stored = await ok("GET", `${intMount}/cert/${r.body.data.serial_number}`);
    expect(stored.body.data.certificate.trim()).toBe(leaf.trim());
  });

  it("keeps the CSR's key usage and extended key usage over the request's defaults", async () => {
    const csr = await csrWithExts("/CN=ku.verbatim.test", ["keyUsage=critical,digitalSignature", "extendedKeyUsage=clientAuth,codeSigning", "subjectAltName=DNS:ku.verbatim.test"]);
    const r = await ok("POST", `${rootMount}/sign-verbatim`, { csr, ttl: "1h", key_usage: ["KeyEncipherment", "DataEncipherment"], ext_key_usage: ["ServerAuth"] });
    const leaf = r.body.data.certificate as string;
    expect((await verify(leaf, rootPem)).ok).toBe(true);
    const text = await x509Text(leaf);
    expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature\n/);
    expect(text).toMatch(/X509v3 Extended Key Usage:\s+TLS Web Client Authentication, Code Signing\n/);
  });

  it("applies ext_key_usage, ext_key_usage_oids and key_usage (case-insensitive) when the CSR has none", async () => {
    const { csr } = await opensslCsr("/CN=defaults.verbatim.test", "rsa");
    const r = await ok("POST", `${rootMount}/sign-verbatim`, {
      csr,
      ttl: "1h",
      key_usage: "digitalsignature,KEYENCIPHERMENT",
      ext_key_usage: ["serverauth", "ClientAuth"],
      ext_key_usage_oids: "1.3.6.1.4.1.99999.1",
      signature_bits: 384,
    });
    const leaf = r.body.data.certificate as string;
    expect((await verify(leaf, rootPem)).ok).toBe(true);
    const text = await x509Text(leaf);
    expect(text).toMatch(/X509v3 Key Usage: critical\s+Digital Signature, Key Encipherment\n/);
    expect(text).toMatch(/X509v3 Extended Key Usage:\s+TLS Web Server Authentication, TLS Web Client Authentication, 1\.3\.6\.1\.4\.1\.99999\.1\n/);
    expect(text).toContain("Signature Algorithm: sha384WithRSAEncryption");
    const none = await ok("POST", `${rootMount}/sign-verbatim`, { csr, ttl: "1h", key_usage: [] });
    expect(await x509Text(none.body.data.certificate)).not.toContain("Key Usage");
  });

  it("an RSA-PSS signature (use_pss) that openssl verifies", async () => {
    const { csr } = await opensslCsr("/CN=pss.verbatim.test", "ec");
    const r = await ok("POST", `${rootMount}/sign-verbatim`, { csr, ttl: "1h", use_pss: true, signature_bits: 512 });
    const v = await verify(r.body.data.certificate, rootPem);
    expect(v.ok, v.output).toBe(true);
    const text = await x509Text(r.body.data.certificate);
    expect(text).toContain("Signature Algorithm: rsassaPss");
    expect(text).toContain("Hash Algorithm: sha512");
  });

  it("refuses a CA CSR, a malformed CSR and a ttl above the engine maximum", async () => {
    const ca = await csrWithExts("/CN=Sneaky CA", ["basicConstraints=critical,CA:TRUE"]);
    const r = await call("POST", `${rootMount}/sign-verbatim`, { csr: ca });
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toContain("CA");
    expect((await call("POST", `${rootMount}/sign-verbatim`, { csr: "-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----" })).status).toBe(400);
    const { csr } = await opensslCsr("/CN=long.verbatim.test", "ec");
    const long = await call("POST", `${rootMount}/sign-verbatim`, { csr, ttl: "10000h" });
    expect(long.status).toBe(400);
    expect(long.body.errors[0]).toContain("ttl");
  });
});

describe("sign-self-issued: root rolling, judged by openssl", () => {
  let oldMount = "";
  let oldRoot = "";
  let newMount = "";
  let newRoot = "";

  beforeAll(async () => {
    oldMount = await pkiMount("old");
    oldRoot = (await ok("POST", `${oldMount}/root/generate/internal`, { common_name: "Old Root", key_type: "ec", not_after: CA_NOT_AFTER })).body.data.certificate;
    newMount = await pkiMount("new");
    newRoot = (await ok("POST", `${newMount}/root/generate/internal`, { common_name: "New Root", key_type: "rsa", not_after: CA_NOT_AFTER })).body.data.certificate;
    await ok("POST", `${newMount}/roles/web`, { allowed_domains: "roll.test", allow_subdomains: true, key_type: "ec", ttl: "1h" });
  });

  it("the new root, signed by the old one, verifies against the old root and bridges leaves of the new root", async () => {
    const r = await ok("POST", `${oldMount}/root/sign-self-issued`, { certificate: newRoot });
    expect(Object.keys(r.body.data).sort()).toEqual(["certificate", "issuing_ca"]);
    const cross = r.body.data.certificate as string;
    const v = await verify(cross, oldRoot);
    expect(v.ok, v.output).toBe(true);
    const partial = await inDir({ "old.pem": oldRoot, "x.pem": cross }, (p) => [["verify", "-partial_chain", "-CAfile", p("old.pem"), p("x.pem")]], []);
    expect(partial).toEqual({});
    const text = await x509Text(cross);
    expect(text).toContain("Issuer: CN = Old Root");
    expect(text).toContain("Subject: CN = New Root");
    expect(text).toContain("Signature Algorithm: ecdsa-with-SHA256");
    expect(text).toMatch(/CA:TRUE/);
    // Serial, validity and subject key are the new root's.
    for (const f of ["-serial", "-startdate", "-enddate", "-pubkey"]) expect(await x509Field(cross, f)).toBe(await x509Field(newRoot, f));
    const oldSki = (await x509Field(oldRoot, "-ext", "subjectKeyIdentifier")).split("\n")[1]?.trim();
    expect((await x509Field(cross, "-ext", "authorityKeyIdentifier")).replace(/keyid:/i, "")).toContain(oldSki);
    // A leaf of the new root: trusted through the old root with the cross-certificate.
    const leaf = (await ok("POST", `${newMount}/issue/web`, { common_name: "a.roll.test" })).body.data.certificate as string;
    const bridged = await verify(leaf, oldRoot, [cross]);
    expect(bridged.ok, bridged.output).toBe(true);
    expect((await verify(leaf, oldRoot)).ok).toBe(false);
  });

  it("signs openssl's own self-signed CAs as they are (EC, and RSA-PSS kept by an RSA signer)", async () => {
    const foreign = await opensslRoot("/O=Foreign/CN=Foreign Root", "ec");
    const r = await ok("POST", `${oldMount}/issuer/default/sign-self-issued`, { certificate: foreign });
    const cross = r.body.data.certificate as string;
    const v = await verify(cross, oldRoot);
    expect(v.ok, v.output).toBe(true);
    const text = await x509Text(cross);
    expect(text).toMatch(/Basic Constraints: critical\s+CA:TRUE, pathlen:3/);
    expect(text).toContain("Policy: 1.2.3.4.5");
    expect(text).toContain("kept verbatim");
    expect(text).toContain("Subject: O = Foreign, CN = Foreign Root");

    const pssRoot = await opensslRoot("/CN=PSS Foreign Root", "rsa-pss");
    const rsaSigned = await ok("POST", `${newMount}/root/sign-self-issued`, { certificate: pssRoot, require_matching_certificate_algorithms: true });
    const pv = await verify(rsaSigned.body.data.certificate, newRoot);
    expect(pv.ok, pv.output).toBe(true);
    expect(await x509Text(rsaSigned.body.data.certificate)).toContain("Signature Algorithm: rsassaPss");
    const mismatch = await call("POST", `${oldMount}/root/sign-self-issued`, { certificate: pssRoot, require_matching_certificate_algorithms: true });
    expect(mismatch.status).toBe(400);
  });

  it("the root path needs sudo (403 without); the per-issuer path does not", async () => {
    const plain = await tokenFor(`path "${oldMount}/*" { capabilities = ["update"] }`);
    expect((await call("POST", `${oldMount}/root/sign-self-issued`, { certificate: newRoot }, plain)).status).toBe(403);
    expect((await call("POST", `${oldMount}/issuer/default/sign-self-issued`, { certificate: newRoot }, plain)).status).toBe(200);
    const sudo = await tokenFor(`path "${oldMount}/root/sign-self-issued" { capabilities = ["update", "sudo"] }`);
    expect((await call("POST", `${oldMount}/root/sign-self-issued`, { certificate: newRoot }, sudo)).status).toBe(200);
  });

  it("refuses a non-CA certificate, one that is not self-issued, and garbage", async () => {
    const leaf = (await ok("POST", `${newMount}/issue/web`, { common_name: "b.roll.test" })).body.data.certificate;
    const notCa = await call("POST", `${oldMount}/root/sign-self-issued`, { certificate: leaf });
    expect([notCa.status, notCa.body.errors]).toEqual([400, ["certificate: given certificate is not a CA certificate"]]);
    const intMount = await pkiMount("sint");
    const csr = await ok("POST", `${intMount}/intermediate/generate/internal`, { common_name: "Sub", key_type: "ec" });
    const sub = (await ok("POST", `${newMount}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "Sub", ttl: "2h" })).body.data.certificate;
    const notSelf = await call("POST", `${oldMount}/root/sign-self-issued`, { certificate: sub });
    expect([notSelf.status, notSelf.body.errors]).toEqual([400, ["certificate: given certificate is not self-issued"]]);
    for (const bad of ["", "not pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----"]) {
      const r = await call("POST", `${oldMount}/root/sign-self-issued`, { certificate: bad });
      expect(r.status).toBe(400);
      expect(r.body.errors[0]).toMatch(/^certificate: /);
    }
  });
});

describe("certificate metadata over HTTP", () => {
  it("round-trips through issue and cert-metadata, with clear refusals", async () => {
    const m = await pkiMount("meta");
    await ok("POST", `${m}/root/generate/internal`, { common_name: "Meta Root", key_type: "ec", not_after: CA_NOT_AFTER });
    await ok("POST", `${m}/roles/r`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    await ok("POST", `${m}/roles/quiet`, { allow_any_name: true, key_type: "ec", ttl: "1h", no_store_metadata: true });
    const value = Buffer.from("cost-center=42").toString("base64");
    const issued = await ok("POST", `${m}/issue/r`, { common_name: "m.example", cert_metadata: value });
    const meta = await ok("GET", `${m}/cert-metadata/${issued.body.data.serial_number}`);
    expect(meta.body.data.cert_metadata).toBe(value);
    expect(meta.body.data.role).toBe("r");
    expect(meta.body.data.serial_number).toBe(issued.body.data.serial_number);
    expect(new Date(meta.body.data.expiration).getTime() / 1000).toBe(Number(issued.body.data.expiration));
    expect((await ok("GET", `${m}/cert-metadata?list=true`)).body.data.keys).toEqual([issued.body.data.serial_number]);
    const { csr } = await opensslCsr("/CN=v.example", "ec");
    for (const [p, body] of [
      [`${m}/issue/quiet`, { common_name: "q.example", cert_metadata: value }],
      [`${m}/sign-verbatim`, { csr, cert_metadata: value }],
      [`${m}/issue/r`, { common_name: "q.example", cert_metadata: "%%%" }],
    ] as const) {
      const r = await call("POST", p, body);
      expect(r.status, p).toBe(400);
      expect(r.body.errors[0]).toMatch(/^cert_metadata: /);
    }
  });
});
