/**
 * Revocation over HTTP (Vault API /pki/revoke, /pki/revoke-with-key,
 * /pki/issuer/:issuer_ref/revoke): by serial (colon, hyphen, any case) or PEM, idempotence, the refusals and their
 * messages, expired certificates, proof of possession with RSA / EC / Ed25519 keys in every PEM
 * container, issuer revocation, reads of revoked certificates, LIST certs/revoked, and whether
 * the CRL (read with @peculiar/x509, an independent parser) was rotated.
 */
import { describe, expect, it } from "vitest";
import { api, list, read, tokenWithPolicy, write } from "../helpers/api";
import { pkiWithRoot, x509 } from "../helpers/pki";

async function setup(opts: Parameters<typeof pkiWithRoot>[0] = {}) {
  const ctx = await pkiWithRoot(opts);
  await write(`${ctx.path}/roles/ec`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
  await write(`${ctx.path}/roles/rsa`, { allow_any_name: true, key_type: "rsa", key_bits: 2048, max_ttl: "24h" });
  await write(`${ctx.path}/roles/ed`, { allow_any_name: true, key_type: "ed25519", max_ttl: "24h" });
  return ctx;
}

async function issue(path: string, role = "ec", body: Record<string, unknown> = {}) {
  const r = await write(`${path}/issue/${role}`, { common_name: "leaf.example", ttl: "1h", ...body });
  return r.body.data as { serial_number: string; certificate: string; private_key: string };
}

/** Serials on the CRL as colon hex, read with @peculiar/x509. */
async function crlSerials(path: string, which = "crl"): Promise<{ serials: string[]; number: number }> {
  const r = await api("GET", `${path}/${which}/pem`, { token: null });
  expect(r.status).toBe(200);
  const crl = new x509.X509Crl(r.text);
  const num = crl.extensions.find((e) => e.type === "2.5.29.20");
  const n = num ? new Uint8Array(num.value).slice(2) : new Uint8Array();
  return {
    serials: crl.entries.map((e) => (e.serialNumber.match(/../g) ?? []).join(":").toLowerCase()),
    number: n.reduce((a, b) => a * 256 + b, 0),
  };
}

const colon = (s: string) => s.toLowerCase().replace(/^(00:)+/, "");

describe("revoke by serial", () => {
  it("answers revocation_time, rfc3339 and state, rotates the CRL, and is idempotent in any serial spelling", async () => {
    const { path, issuerId } = await setup();
    const leaf = await issue(path);
    const before = await crlSerials(path);
    const t0 = Math.floor(Date.now() / 1000);
    const r = await write(`${path}/revoke`, { serial_number: leaf.serial_number.toUpperCase() });
    expect(r.body.data.state).toBe("revoked");
    expect(Number.isInteger(r.body.data.revocation_time)).toBe(true);
    expect(r.body.data.revocation_time).toBeGreaterThanOrEqual(t0);
    expect(new Date(r.body.data.revocation_time_rfc3339).getTime() / 1000).toBe(r.body.data.revocation_time);
    const after = await crlSerials(path);
    expect(after.serials.map(colon)).toContain(leaf.serial_number);
    expect(after.number).toBeGreaterThan(before.number);

    // Hyphenated, upper case: the same certificate, the original time.
    const again = await write(`${path}/revoke`, { serial_number: leaf.serial_number.replace(/:/g, "-").toUpperCase() });
    expect(again.body.data.revocation_time).toBe(r.body.data.revocation_time);

    const cert = await read(`${path}/cert/${leaf.serial_number}`, { token: null });
    expect(cert.body.data.revocation_time).toBe(r.body.data.revocation_time);
    expect(cert.body.data.revocation_time_rfc3339).toBe(r.body.data.revocation_time_rfc3339);
    expect(cert.body.data.issuer_id).toBe(issuerId);
    const revoked = await list(`${path}/certs/revoked`);
    expect(revoked.body.data.keys).toContain(leaf.serial_number);
  });

  it("LIST certs and certs/revoked page with after and limit in key order, as the unpaged list", async () => {
    const { path } = await setup();
    const leaves = [];
    for (let i = 0; i < 5; i++) leaves.push(await issue(path));
    for (const leaf of leaves.slice(0, 4)) await write(`${path}/revoke`, { serial_number: leaf.serial_number });
    for (const kind of ["certs", "certs/revoked"]) {
      const all: string[] = (await list(`${path}/${kind}`)).body.data.keys;
      expect(all).toEqual([...all].sort());
      const walked: string[] = [];
      let after = "";
      for (;;) {
        const r = await api("GET", `${path}/${kind}?list=true&limit=2${after ? `&after=${encodeURIComponent(after)}` : ""}`);
        if (r.status === 404) break;
        const keys: string[] = r.body.data.keys;
        expect(keys.length).toBeLessThanOrEqual(2);
        walked.push(...keys);
        after = keys.at(-1) ?? "";
        if (!after) break;
      }
      expect(walked).toEqual(all);
      expect((await api("GET", `${path}/${kind}?list=true&after=${encodeURIComponent(all[1] ?? "")}`)).body.data.keys).toEqual(all.slice(2));
    }
  });

  it("a certificate not revoked reads with zero revocation fields and no issuer_id", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    const cert = await read(`${path}/cert/${leaf.serial_number}`, { token: null });
    expect(cert.body.data.revocation_time).toBe(0);
    expect(cert.body.data.revocation_time_rfc3339).toBe("");
    expect(cert.body.data.issuer_id).toBeUndefined();
    expect((await api("GET", `${path}/certs/revoked?list=true`)).status).toBe(404);
  });

  it("refuses both, neither, unknown and malformed serials, and issuers", async () => {
    const { path, issuerId, root } = await setup();
    const leaf = await issue(path);
    const both = await api("POST", `${path}/revoke`, { body: { serial_number: leaf.serial_number, certificate: leaf.certificate } });
    expect(both.status).toBe(400);
    expect(both.body.errors[0]).toBe("Must provide either the certificate or the serial to revoke; not both.");
    const neither = await api("POST", `${path}/revoke`, { body: {} });
    expect(neither.status).toBe(400);
    expect(neither.body.errors[0]).toBe("The serial number or certificate to revoke must be provided.");
    const unknown = await api("POST", `${path}/revoke`, { body: { serial_number: "01:02:03" } });
    expect(unknown.status).toBe(400);
    expect(unknown.body.errors[0]).toBe("certificate with serial 01:02:03 not found.");
    const bad = await api("POST", `${path}/revoke`, { body: { serial_number: "zz:yy" } });
    expect(bad.status).toBe(400);
    expect(bad.body.errors[0]).toContain("serial_number");
    const rootSerial = new x509.X509Certificate(root).serialNumber.toLowerCase();
    const issuer = await api("POST", `${path}/revoke`, { body: { serial_number: rootSerial } });
    expect(issuer.status).toBe(400);
    expect(issuer.body.errors[0]).toBe(`adding issuer (id: ${issuerId}) to its own CRL is not allowed`);
    const issuerPem = await api("POST", `${path}/revoke`, { body: { certificate: root } });
    expect(issuerPem.status).toBe(400);
    expect(issuerPem.body.errors[0]).toBe(`adding issuer (id: ${issuerId}) to its own CRL is not allowed`);
  });
});

describe("revoke by certificate", () => {
  it("revokes a PEM the mount issued; refuses malformed PEM and certificates of other CAs", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    const r = await write(`${path}/revoke`, { certificate: leaf.certificate });
    expect(r.body.data.state).toBe("revoked");
    expect((await crlSerials(path)).serials.map(colon)).toContain(leaf.serial_number);

    for (const garbage of ["short", `-----BEGIN CERTIFICATE-----\n${"A".repeat(80)}\n-----END CERTIFICATE-----`, "x".repeat(100)]) {
      const g = await api("POST", `${path}/revoke`, { body: { certificate: garbage } });
      expect(g.status, g.text).toBe(400);
    }
    const other = await setup();
    const foreign = await issue(other.path);
    const f = await api("POST", `${path}/revoke`, { body: { certificate: foreign.certificate } });
    expect(f.status).toBe(400);
    expect(f.body.errors[0]).toContain("unable to verify signature on presented cert from any present issuer in this mount");
  });

  it("stores and revokes a certificate the mount signed but did not store (no_store)", async () => {
    const { path } = await setup();
    await write(`${path}/roles/nostore`, { allow_any_name: true, key_type: "ec", no_store: true });
    const leaf = await issue(path, "nostore");
    expect((await api("GET", `${path}/cert/${leaf.serial_number}`, { token: null })).status).toBe(404);
    await write(`${path}/revoke`, { certificate: leaf.certificate });
    const cert = await read(`${path}/cert/${leaf.serial_number}`, { token: null });
    expect(cert.body.data.revocation_time).toBeGreaterThan(0);
    expect((await crlSerials(path)).serials.map(colon)).toContain(leaf.serial_number);
  });
});

describe("expired certificates", () => {
  it("are not revoked (200 with only a warning) unless allow_expired_cert_revocation", async () => {
    const { path } = await setup();
    // notAfter < now + 2s counts as expired (upstream's slack).
    const leaf = await issue(path, "ec", { ttl: "1s" });
    const r = await write(`${path}/revoke`, { serial_number: leaf.serial_number });
    expect(r.body.data).toBeNull();
    expect(r.body.warnings).toEqual([`certificate with serial ${leaf.serial_number} already expired; refusing to add to CRL`]);
    expect((await crlSerials(path)).serials.map(colon)).not.toContain(leaf.serial_number);
    await write(`${path}/config/crl`, { allow_expired_cert_revocation: true });
    const ok = await write(`${path}/revoke`, { serial_number: leaf.serial_number });
    expect(ok.body.data.state).toBe("revoked");
    expect((await crlSerials(path)).serials.map(colon)).toContain(leaf.serial_number);
  });
});

describe("revoke-with-key", () => {
  for (const role of ["ec", "rsa", "ed"] as const) {
    it(`${role}: the certificate's own key revokes it; another key is refused`, async () => {
      const { path } = await setup();
      const leaf = await issue(path, role);
      const other = await issue(path, role);
      const wrong = await api("POST", `${path}/revoke-with-key`, { body: { serial_number: leaf.serial_number, private_key: other.private_key } });
      expect(wrong.status).toBe(400);
      expect(wrong.body.errors[0]).toBe("provided private key does not match certificate's public key");
      const r = await write(`${path}/revoke-with-key`, { certificate: leaf.certificate, private_key: leaf.private_key });
      expect(r.body.data.state).toBe("revoked");
      expect((await crlSerials(path)).serials.map(colon)).toContain(leaf.serial_number);
    });
  }

  it("accepts PKCS#8 keys too, and refuses a key of another type, garbage and a missing key", async () => {
    const { path } = await setup();
    const leaf = await issue(path, "ec", { private_key_format: "pkcs8" });
    expect(leaf.private_key).toContain("BEGIN PRIVATE KEY");
    const rsa = await issue(path, "rsa");
    const typed = await api("POST", `${path}/revoke-with-key`, { body: { serial_number: leaf.serial_number, private_key: rsa.private_key } });
    expect(typed.status).toBe(400);
    expect(typed.body.errors[0]).toBe("provided private key type does not match certificate's public key type");
    const missing = await api("POST", `${path}/revoke-with-key`, { body: { serial_number: leaf.serial_number } });
    expect(missing.status).toBe(400);
    expect(missing.body.errors[0]).toBe("Must have private key to revoke via the /revoke-with-key path.");
    const short = await api("POST", `${path}/revoke-with-key`, { body: { serial_number: leaf.serial_number, private_key: "abc" } });
    expect(short.status).toBe(400);
    const garbage = `-----BEGIN EC PRIVATE KEY-----\n${btoa("not a key at all, just some bytes for the test")}\n-----END EC PRIVATE KEY-----`;
    const g = await api("POST", `${path}/revoke-with-key`, { body: { serial_number: leaf.serial_number, private_key: garbage } });
    expect(g.status, g.text).toBe(400);
    const ok = await write(`${path}/revoke-with-key`, { serial_number: leaf.serial_number, private_key: leaf.private_key });
    expect(ok.body.data.state).toBe("revoked");
  });

  it("needs a token (not the privileged revoke path), and works with update on revoke-with-key alone", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    const token = await tokenWithPolicy(`path "${path}/revoke-with-key" { capabilities = ["update"] }`);
    expect((await api("POST", `${path}/revoke-with-key`, { token: null, body: { serial_number: leaf.serial_number, private_key: leaf.private_key } })).status).toBe(403);
    expect((await api("POST", `${path}/revoke`, { token, body: { serial_number: leaf.serial_number } })).status).toBe(403);
    const r = await api("POST", `${path}/revoke-with-key`, { token, body: { serial_number: leaf.serial_number, private_key: leaf.private_key } });
    expect(r.status, r.text).toBe(200);
  });
});

describe("issuer/:ref/revoke", () => {
  it("puts an intermediate on its parent's CRL, never its own; the issuer stops issuing", async () => {
    const { path, issuerId: rootId } = await setup();
    const csr = await write(`${path}/intermediate/generate/internal`, { common_name: "Same-mount Intermediate", key_type: "ec" });
    const signed = await write(`${path}/root/sign-intermediate`, { csr: csr.body.data.csr, common_name: "Same-mount Intermediate", not_after: "2034-01-01T00:00:00Z" });
    const imported = await write(`${path}/intermediate/set-signed`, { certificate: signed.body.data.certificate });
    const intId = imported.body.data.imported_issuers[0] as string;
    const intSerial = signed.body.data.serial_number as string;
    await write(`${path}/roles/int`, { allow_any_name: true, key_type: "ec", issuer_ref: intId });
    const leaf = await issue(path, "int");
    await write(`${path}/revoke`, { serial_number: leaf.serial_number });

    const r = await write(`${path}/issuer/${intId}/revoke`, {});
    expect(r.body.data.revoked).toBe(true);
    expect(Number.isInteger(r.body.data.revocation_time)).toBe(true);
    expect(r.body.data.revocation_time_rfc3339).toBeTruthy();
    expect(r.body.data.usage).not.toContain("issuing-certificates");
    expect(r.body.warnings ?? []).not.toContain(expect.stringContaining("lacks another parent"));

    const rootCrl = await crlSerials(path, `issuer/${rootId}/crl`);
    expect(rootCrl.serials.map(colon)).toContain(intSerial);
    const intCrl = await crlSerials(path, `issuer/${intId}/crl`);
    expect(intCrl.serials.map(colon)).not.toContain(intSerial);
    expect(intCrl.serials.map(colon)).toContain(leaf.serial_number);
    expect(rootCrl.serials.map(colon)).not.toContain(leaf.serial_number);

    // The serial reads as revoked; issuance through it is refused; re-revoking changes nothing.
    expect((await read(`${path}/cert/${intSerial}`, { token: null })).body.data.revocation_time).toBe(r.body.data.revocation_time);
    expect((await api("POST", `${path}/issue/int`, { body: { common_name: "x.example" } })).status).toBe(400);
    const again = await write(`${path}/issuer/${intId}/revoke`, {});
    expect(again.body.data.revocation_time).toBe(r.body.data.revocation_time);
    expect(again.body.warnings).toBeNull();
  });

  it("a self-signed default root: warnings, and its serial on no CRL", async () => {
    const { path, issuerId, root } = await setup();
    const r = await write(`${path}/issuer/default/revoke`, {});
    expect(r.body.warnings).toEqual(
      expect.arrayContaining([expect.stringContaining("self-signed"), expect.stringContaining("lacks another parent issuer"), expect.stringContaining("default issuer")]),
    );
    const rootSerial = new x509.X509Certificate(root).serialNumber.toLowerCase();
    expect((await crlSerials(path, `issuer/${issuerId}/crl`)).serials.map(colon)).not.toContain(colon((rootSerial.match(/../g) ?? []).join(":")));
    expect((await api("POST", `${path}/issuer/nope/revoke`, { body: {} })).status).toBe(400);
  });
});

describe("auto_rebuild", () => {
  it("leaves the CRL to the schedule or crl/rotate, which then lists the revocation", async () => {
    const { path } = await setup();
    const leaf = await issue(path);
    await write(`${path}/config/crl`, { auto_rebuild: true });
    const before = await crlSerials(path);
    await write(`${path}/revoke`, { serial_number: leaf.serial_number });
    const same = await crlSerials(path);
    expect(same.number).toBe(before.number);
    expect(same.serials.map(colon)).not.toContain(leaf.serial_number);
    const rot = await read(`${path}/crl/rotate`);
    expect(rot.body.data).toEqual({ success: true });
    const after = await crlSerials(path);
    expect(after.serials.map(colon)).toContain(leaf.serial_number);
    expect(after.number).toBeGreaterThan(before.number);
  });
});
