/** Issuers, keys, defaults and imports (Vault API /pki/issuer/:issuer_ref, /pki/key/:key_ref), and the public read paths. */
import { describe, expect, it } from "vitest";
import { api, del, list, mount, patch, read, tokenWithPolicy, write } from "../helpers/api";
import { expectSignedBy, parseCert, pkiWithRoot, x509 } from "../helpers/pki";

describe("root generation", () => {
  it("answers the reference's fields and stores the root as a certificate of the mount", async () => {
    const path = await mount("pki");
    const r = await write(`${path}/root/generate/exported`, { common_name: "R1", key_type: "ec", issuer_name: "r1", key_name: "k1", ttl: "1h" });
    const d = r.body.data;
    expect(Object.keys(d).sort()).toEqual(
      ["certificate", "expiration", "issuer_id", "issuer_name", "issuing_ca", "key_id", "key_name", "private_key", "private_key_type", "serial_number"].sort(),
    );
    expect(d).toMatchObject({ issuer_name: "r1", key_name: "k1", private_key_type: "ec" });
    // Vault API /pki/issue/:name: expiration is Unix seconds as a decimal string, on every signing path.
    expect(typeof d.expiration).toBe("string");
    expect(d.expiration).toMatch(/^[1-9][0-9]*$/);
    expect(d.serial_number).toMatch(/^[0-9a-f]{2}(:[0-9a-f]{2})+$/);
    expect(d.issuing_ca).toBe(d.certificate);
    expect(r.body.warnings.some((w: string) => w.includes("authority information access (AIA)"))).toBe(true);
    expect((await list(`${path}/certs`)).body.data.keys).toEqual([d.serial_number]);
    // internal never returns the key
    const internal = await write(`${path}/root/generate/internal`, { common_name: "R2", key_type: "ec" });
    expect(internal.body.data.private_key).toBeUndefined();
  });

  it("refuses bad types, key sizes, names and formats with 400", async () => {
    const path = await mount("pki");
    const cases: [string, Record<string, unknown>, string][] = [
      ["root/generate/sideways", {}, 'the "exported" path parameter must be'],
      ["root/generate/kms", {}, "kms"],
      ["root/generate/internal", { key_type: "ec", key_bits: 225 }, "unsupported bit length for EC key: 225"],
      ["root/generate/internal", { key_type: "rsa", key_bits: 1000 }, "RSA keys < 2048 bits"],
      ["root/generate/internal", { key_type: "any" }, "any"],
      ["root/generate/internal", { format: "cbor" }, 'the "format" path parameter must be "pem", "der", or "pem_bundle"'],
      ["root/generate/internal", { issuer_name: "default" }, "reserved keyword 'default' can not be used as issuer name"],
      ["root/generate/internal", { issuer_name: "bad name" }, "issuer name contained invalid characters"],
      ["root/generate/internal", { ttl: "1h", not_after: "2030-01-01T00:00:00Z" }, "Either ttl or not_after"],
      ["root/generate/internal", { not_after: "tomorrow" }, "not_after"],
      ["root/generate/internal", { ttl: "769h" }, "is longer than the maximum allowed ttl"],
      ["root/generate/existing", { key_type: "ec" }, "key_type nor key_bits arguments can be set"],
      ["root/generate/existing", { key_ref: "nokey" }, "unable to find PKI key for reference: nokey"],
    ];
    for (const [p, body, msg] of cases) {
      const r = await write(`${path}/${p}`, body, {}, 400);
      expect(r.body.errors[0], `${p} ${JSON.stringify(body)}`).toContain(msg);
    }
    await list(`${path}/issuers`, { token: null }, 404);
    await list(`${path}/keys`, {}, 404);
  });

  it("existing: reuses a key of the mount; a duplicate issuer name is refused", async () => {
    const path = await mount("pki");
    const first = await write(`${path}/root/generate/internal`, { common_name: "A", key_type: "ec", issuer_name: "a", key_name: "shared" });
    const second = await write(`${path}/root/generate/existing`, { common_name: "B", key_ref: "shared", issuer_name: "b" });
    expect(second.body.data.key_id).toBe(first.body.data.key_id);
    const dup = await write(`${path}/root/generate/internal`, { common_name: "C", key_type: "ec", issuer_name: "a" }, {}, 400);
    expect(dup.body.errors[0]).toBe("issuer name already in use");
    expect((await list(`${path}/keys`)).body.data.keys).toHaveLength(1);
  });
});

describe("issuers and the default rules", () => {
  it("the first keyed issuer becomes default; later roots do not, unless default_follows_latest_issuer", async () => {
    const { path, issuerId } = await pkiWithRoot();
    expect((await read(`${path}/config/issuers`)).body.data).toEqual({ default: issuerId, default_follows_latest_issuer: false });
    const second = await write(`${path}/root/rotate/internal`, { common_name: "Next", key_type: "ec" });
    expect(second.body.data.issuer_name).toBe("next");
    expect((await read(`${path}/config/issuers`)).body.data.default).toBe(issuerId);
    await write(`${path}/root/replace`, {});
    expect((await read(`${path}/config/issuers`)).body.data.default).toBe(second.body.data.issuer_id);
    await write(`${path}/config/issuers`, { default: "root-ca", default_follows_latest_issuer: true });
    const third = await write(`${path}/root/generate/internal`, { common_name: "Third", key_type: "ec" });
    expect((await read(`${path}/config/issuers`)).body.data).toEqual({ default: third.body.data.issuer_id, default_follows_latest_issuer: true });
    const bad = await write(`${path}/config/issuers`, { default: "default" }, {}, 400);
    expect(bad.body.errors[0]).toBe("Invalid issuer specification; must be non-empty and can't be 'default'.");
    expect((await write(`${path}/config/issuers`, { default: "ghost" }, {}, 400)).body.errors[0]).toContain("Error resolving issuer reference");
  });

  it("LIST issuers is public and carries key_info", async () => {
    const { path, issuerId } = await pkiWithRoot();
    const r = await list(`${path}/issuers`, { token: null });
    expect(r.body.data.keys).toEqual([issuerId]);
    expect(r.body.data.key_info[issuerId]).toMatchObject({ issuer_name: "root-ca", is_default: true });
  });

  it("reads an issuer by id, name and 'default'; unknown refs are 400", async () => {
    const { path, issuerId, root } = await pkiWithRoot();
    for (const ref of [issuerId, "root-ca", "default"]) {
      const r = await read(`${path}/issuer/${ref}`);
      expect(r.body.data).toMatchObject({
        issuer_id: issuerId,
        issuer_name: "root-ca",
        leaf_not_after_behavior: "err",
        usage: "crl-signing,issuing-certificates,ocsp-signing,read-only",
        revocation_signature_algorithm: "ECDSAWithSHA256",
        manual_chain: null,
        revoked: false,
        issuing_certificates: [],
        ocsp_servers: [],
      });
      expect(r.body.data.certificate).toBe(`${root}\n`);
      expect(r.body.data.ca_chain).toEqual([`${root}\n`]);
    }
    expect((await read(`${path}/issuer/ghost`, {}, 400)).body.errors[0]).toBe("unable to find PKI issuer for reference: ghost");
    // GET issuer/:ref needs a token; its json/pem/der forms do not.
    expect((await api("GET", `${path}/issuer/${issuerId}`, { token: null })).status).toBe(403);
    const json = await read(`${path}/issuer/root-ca/json`, { token: null });
    expect(Object.keys(json.body.data).sort()).toEqual(["ca_chain", "certificate", "issuer_id", "issuer_name"]);
    const pem = await api("GET", `${path}/issuer/root-ca/pem`, { token: null });
    expect(pem.headers.get("content-type")).toBe("application/pem-certificate-chain");
    expect(pem.text).toBe(`${root}\n`);
    const der = await api("GET", `${path}/issuer/root-ca/der`, { token: null });
    expect(der.headers.get("content-type")).toBe("application/pkix-cert");
  });

  it("POST overwrites, PATCH merges, with validation", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/uses-name`, { issuer_ref: "root-ca" });
    const p = await patch(`${path}/issuer/root-ca`, { leaf_not_after_behavior: "truncate", issuing_certificates: "http://ca.example/ca" });
    expect(p.body.data).toMatchObject({ issuer_name: "root-ca", leaf_not_after_behavior: "truncate", issuing_certificates: ["http://ca.example/ca"], enable_aia_url_templating: false });
    const renamed = await write(`${path}/issuer/root-ca`, { issuer_name: "renamed" });
    expect(renamed.body.data).toMatchObject({ issuer_name: "renamed", leaf_not_after_behavior: "err", issuing_certificates: [] });
    expect(renamed.body.warnings[0]).toContain("1 roles reference root-ca");
    const cases: [Record<string, unknown>, string][] = [
      [{ leaf_not_after_behavior: "maybe" }, "Unknown value for field `leaf_not_after_behavior`"],
      [{ usage: "signing" }, "Unable to parse specified usages"],
      [{ revocation_signature_algorithm: "MD5WithRSA" }, "MD5WithRSA"],
      [{ revocation_signature_algorithm: "SHA256WithRSA" }, "cannot be used with this issuer's ec key"],
      [{ ocsp_servers: "not a url" }, "invalid URL found in Authority Information Access (AIA) parameter ocsp_servers: not a url"],
      [{ issuer_name: "" }, "expected non-empty issuer name"],
      [{ manual_chain: "ghost" }, "unable to find PKI issuer"],
    ];
    for (const [body, msg] of cases) expect((await write(`${path}/issuer/renamed`, body, {}, 400)).body.errors[0]).toContain(msg);
    const cleared = await patch(`${path}/issuer/renamed`, { issuer_name: "" });
    expect(cleared.body.data.issuer_name).toBe("");
  });

  it("usage without issuing-certificates stops issuance", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec" });
    await patch(`${path}/issuer/default`, { usage: "crl-signing,ocsp-signing" });
    const r = await write(`${path}/issue/r`, { common_name: "x.example" }, {}, 400);
    expect(r.body.errors[0]).toContain("issuing-certificates");
  });

  it("DELETE issuer: 200 with a warning for the default; idempotent; the key stays", async () => {
    const { path, issuerId } = await pkiWithRoot();
    const d = await api("DELETE", `${path}/issuer/root-ca`);
    expect(d.status).toBe(200);
    expect(d.body.warnings[0]).toContain(`Deleted issuer ${issuerId} (via issuer_ref root-ca); this was configured as the default issuer.`);
    expect((await api("DELETE", `${path}/issuer/root-ca`)).status).toBe(200);
    expect((await read(`${path}/config/issuers`)).body.data.default).toBe("");
    expect((await list(`${path}/keys`)).body.data.keys).toHaveLength(1);
    // No default issuer: raw CA paths are 204, cert/ca is 400.
    expect((await api("GET", `${path}/ca/pem`, { token: null })).status).toBe(204);
    expect((await api("GET", `${path}/cert/ca`, { token: null })).status).toBe(400);
  });
});

describe("keys", () => {
  it("lists, reads, renames and deletes keys with upstream's rules", async () => {
    const { path } = await pkiWithRoot();
    const keys = await list(`${path}/keys`);
    const [keyId] = keys.body.data.keys;
    expect(keys.body.data.key_info[keyId]).toEqual({ key_name: "", is_default: true });
    const k = await read(`${path}/key/${keyId}`);
    expect(k.body.data).toMatchObject({ key_id: keyId, key_name: "", key_type: "ec" });
    // The key's SKI equals the certificate's (RFC 5280 §4.2.1.2).
    const cert = parseCert((await read(`${path}/issuer/default`)).body.data.certificate);
    const ski = cert.getExtension(x509.SubjectKeyIdentifierExtension)?.keyId ?? "";
    expect(k.body.data.subject_key_id.replace(/:/g, "")).toBe(ski);
    const named = await write(`${path}/key/${keyId}`, { key_name: "main" });
    expect(named.body.data.key_name).toBe("main");
    expect((await read(`${path}/key/main`)).body.data.key_id).toBe(keyId);
    expect((await write(`${path}/key/main`, { key_name: "bad name" }, {}, 400)).body.errors[0]).toBe("new key name outside of valid character limits");
    const inUse = await api("DELETE", `${path}/key/main`);
    expect(inUse.status).toBe(400);
    expect(inUse.body.errors[0]).toMatch(/^Failed to Delete Key\. {2}Key in Use by Issuer: /);
    expect((await read(`${path}/key/ghost`, {}, 400)).body.errors[0]).toBe("unable to find PKI key for reference: ghost");
    await del(`${path}/key/ghost`);
    await api("DELETE", `${path}/issuer/default`);
    const gone = await api("DELETE", `${path}/key/main`);
    expect(gone.status).toBe(200);
    expect(gone.body.warnings[0]).toContain("this was configured as the default key");
  });

  it("generates and imports keys; config/keys picks the default", async () => {
    const path = await mount("pki");
    const g = await write(`${path}/keys/generate/exported`, { key_type: "ec", key_name: "gen" });
    expect(g.body.data.private_key).toContain("BEGIN EC PRIVATE KEY");
    const again = await write(`${path}/keys/import`, { pem_bundle: g.body.data.private_key, key_name: "dup" });
    expect(again.body.warnings).toEqual(["Key already imported, use key/ endpoint to update name."]);
    const other = await write(`${path}/keys/generate/internal`, { key_type: "rsa", key_bits: 2048 });
    expect((await read(`${path}/config/keys`)).body.data.default).toBe(g.body.data.key_id);
    await write(`${path}/config/keys`, { default: other.body.data.key_id });
    expect((await read(`${path}/config/keys`)).body.data.default).toBe(other.body.data.key_id);
    expect((await write(`${path}/keys/generate/internal`, { key_type: "ec", key_bits: 1 }, {}, 400)).body.errors[0]).toContain("Validation for key_type, key_bits failed");
  });
});

describe("imports", () => {
  it("imports a CA bundle with its key, idempotently, and issues from it", async () => {
    const src = await mount("pki");
    const root = await write(`${src}/root/generate/exported`, { common_name: "Imported Root", key_type: "ec" });
    const dst = await mount("pki");
    const bundle = `${root.body.data.private_key}\n${root.body.data.certificate}`;
    const first = await write(`${dst}/issuers/import/bundle`, { pem_bundle: bundle });
    expect(first.body.data.imported_issuers).toHaveLength(1);
    expect(first.body.data.imported_keys).toHaveLength(1);
    expect(first.body.data.existing_issuers).toBeNull();
    const issuerId = first.body.data.imported_issuers[0];
    expect(first.body.data.mapping).toEqual({ [issuerId]: first.body.data.imported_keys[0] });
    const second = await write(`${dst}/issuers/import/bundle`, { pem_bundle: bundle });
    expect(second.body.data).toMatchObject({ imported_issuers: null, imported_keys: null, existing_issuers: [issuerId] });
    await write(`${dst}/roles/r`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = await write(`${dst}/issue/r`, { common_name: "imported.example" });
    await expectSignedBy(leaf.body.data.certificate, root.body.data.certificate);
    // Imported issuers are not certificates issued by this mount: only the leaf is listed.
    expect((await list(`${dst}/certs`)).body.data.keys).toEqual([leaf.body.data.serial_number]);
  });

  it("refuses keys on cert-only paths, non-CA certificates, garbage and short input", async () => {
    const { path } = await pkiWithRoot();
    await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec", ttl: "1h" });
    const leaf = await write(`${path}/issue/r`, { common_name: "leaf.example" });
    const dst = await mount("pki");
    const cases: [string, Record<string, unknown>, string][] = [
      ["issuers/import/cert", { pem_bundle: leaf.body.data.private_key }, "private keys found in the PEM bundle but not allowed by the path"],
      ["issuers/import/bundle", { pem_bundle: leaf.body.data.certificate }, "Refusing to import non-CA certificate"],
      ["issuers/import/bundle", { pem_bundle: "short" }, "too short"],
      ["issuers/import/bundle", {}, "'pem_bundle' and 'certificate' parameters were empty"],
      ["issuers/import/bundle", { pem_bundle: `-----BEGIN CERTIFICATE-----\n${"!".repeat(80)}\n-----END CERTIFICATE-----` }, "error when parsing block 0: invalid PEM data"],
      ["issuers/import/bundle", { pem_bundle: `-----BEGIN CERTIFICATE-----\n${"QUFB".repeat(30)}\n-----END CERTIFICATE-----` }, "Error parsing issuer 0"],
      ["intermediate/set-signed", { certificate: "x".repeat(80) }, "invalid PEM data"],
    ];
    for (const [p, body, msg] of cases) expect((await write(`${dst}/${p}`, body, {}, 400)).body.errors[0], p).toContain(msg);
    await list(`${dst}/issuers`, { token: null }, 404);
  });
});

describe("DELETE root (sudo)", () => {
  it("needs sudo, removes every issuer and key, keeps issued certificates", async () => {
    const { path } = await pkiWithRoot();
    const noSudo = await tokenWithPolicy(`path "${path}/*" { capabilities = ["create", "read", "update", "delete", "list"] }`);
    expect((await api("DELETE", `${path}/root`, { token: noSudo })).status).toBe(403);
    const r = await api("DELETE", `${path}/root`);
    expect(r.status).toBe(200);
    expect(r.body.warnings[0]).toContain("DELETE /root deletes all keys and issuers");
    await list(`${path}/issuers`, { token: null }, 404);
    await list(`${path}/keys`, {}, 404);
    expect((await list(`${path}/certs`)).body.data.keys).toHaveLength(1);
  });
});

describe("certificate reads", () => {
  it("serves cert/:serial in JSON and raw forms, without a token", async () => {
    const { path, root } = await pkiWithRoot();
    const serial = (await list(`${path}/certs`)).body.data.keys[0] as string;
    const j = await read(`${path}/cert/${serial}`, { token: null });
    expect(j.body.data).toEqual({ certificate: root, revocation_time: 0, revocation_time_rfc3339: "" });
    const hyphen = await read(`${path}/cert/${serial.replace(/:/g, "-").toUpperCase()}`, { token: null });
    expect(hyphen.body.data.certificate).toBe(root);
    const rawPem = await api("GET", `${path}/cert/${serial}/raw/pem`, { token: null });
    expect(rawPem.text).toBe(root);
    expect((await api("GET", `${path}/cert/${serial}/raw`, { token: null })).headers.get("content-type")).toBe("application/pkix-cert");
    await read(`${path}/cert/00:11:22`, { token: null }, 404);
    expect((await api("GET", `${path}/cert/00:11:22/raw`, { token: null })).status).toBe(204);
    expect((await api("GET", `${path}/certs?list=true`, { token: null })).status).toBe(403);
  });

  it("serves the default CA and chain (ca, ca/pem, ca_chain, cert/ca, cert/ca_chain)", async () => {
    const { path, root } = await pkiWithRoot();
    const pem = await api("GET", `${path}/ca/pem`, { token: null });
    expect(pem.text).toBe(root);
    expect(pem.headers.get("content-type")).toBe("application/pem-certificate-chain");
    const der = await api("GET", `${path}/ca`, { token: null });
    expect(der.headers.get("content-type")).toBe("application/pkix-cert");
    expect((await api("GET", `${path}/ca_chain`, { token: null })).text).toBe(root);
    expect((await read(`${path}/cert/ca`, { token: null })).body.data.certificate).toBe(root);
    expect((await read(`${path}/cert/ca_chain`, { token: null })).body.data.ca_chain).toBe(root);
    expect((await api("GET", `${path}/cert/ca/raw/pem`, { token: null })).text).toBe(root);
  });
});

describe("config/urls and config/cluster", () => {
  it("reads defaults, writes partially, validates URLs", async () => {
    const path = await mount("pki");
    expect((await read(`${path}/config/urls`)).body.data).toEqual({
      issuing_certificates: [],
      crl_distribution_points: [],
      delta_crl_distribution_points: [],
      ocsp_servers: [],
      enable_templating: false,
    });
    await write(`${path}/config/urls`, { ocsp_servers: "http://ocsp.example" });
    const w = await write(`${path}/config/urls`, { issuing_certificates: ["http://ca.example/ca"] });
    expect(w.body.data).toMatchObject({ ocsp_servers: ["http://ocsp.example"], issuing_certificates: ["http://ca.example/ca"] });
    expect((await write(`${path}/config/urls`, { crl_distribution_points: "http://x/{{issuer_id}}/crl" }, {}, 400)).body.errors[0]).toContain(
      "invalid URL found in Authority Information Access (AIA) parameter crl_distribution_points",
    );
    await write(`${path}/config/urls`, { crl_distribution_points: "http://x/{{issuer_id}}/crl", enable_templating: true });
    expect((await write(`${path}/config/cluster`, { path: "nope" }, {}, 400)).body.errors[0]).toContain("path");
    expect((await write(`${path}/config/cluster`, { path: "https://pki.example/v1/pki" })).body.data).toEqual({ path: "https://pki.example/v1/pki", aia_path: "" });
  });
});
