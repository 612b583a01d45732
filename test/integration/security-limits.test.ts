/**
 * Limits that turn attacker-sized input into a clear 4xx
 * instead of a 500 (D1's 100 bound parameters, stack overflows on deep JSON), JSON parse errors
 * that never echo the body, and no namespace-existence oracle. The limits are listed in
 * docs/security.md.
 */
import { SELF, env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { loadConfig } from "../../src/core/config";
import { openDb } from "../../src/core/db/client";
import { writeVersion } from "../../src/engines/kv/store";
import { api, mount, read, tokenWithPolicy, write } from "../helpers/api";
import { buildRequest, certId, Extension, OctetString, parseResponse, serialOf, toBase64 } from "../helpers/ocsp";
import { pkiWithRoot, x509 } from "../helpers/pki";

const deepObject = (levels: number): string => `${'{"a":'.repeat(levels - 1)}{}${"}".repeat(levels - 1)}`;

describe("D1 bound parameters: path depth and list sizes", () => {
  it("a 150-segment path answers 403 without a token and 404 with one, never 500", async () => {
    const deep = Array.from({ length: 150 }, () => "a").join("/");
    expect((await api("GET", deep, { token: null })).status).toBe(403);
    const r = await api("GET", deep);
    expect(r.status).toBe(404);
    // Also under a namespace header, whose candidates add to the path's.
    expect((await api("GET", deep, { namespace: "a/b" })).status).toBe(404);
  });

  it("an OCSP GET whose base64 has hundreds of '/' is answered", async () => {
    const { path, root } = await pkiWithRoot();
    await write(`${path}/roles/r`, { allow_any_name: true, key_type: "ec", max_ttl: "24h" });
    const leaf = (await write(`${path}/issue/r`, { common_name: "leaf.example", ttl: "1h" })).body.data.certificate as string;
    // A non-critical request extension the responder ignores, full of 0xFF: base64 "////…".
    const filler = new Extension({ extnID: "1.3.6.1.4.1.99999.1", critical: false, extnValue: new OctetString(new Uint8Array(600).fill(0xff)) });
    const der = buildRequest([await certId(root, serialOf(leaf))], { extensions: [filler] });
    const b64 = toBase64(der);
    expect(b64.split("/").length).toBeGreaterThan(300);
    for (const escape of [true, false]) {
      const res = await SELF.fetch(`http://lanyard.test/v1/${path}/ocsp/${escape ? encodeURIComponent(b64) : b64}`);
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toBe("application/ocsp-response");
      expect(parseResponse(new Uint8Array(await res.arrayBuffer())).status).toBe(0);
    }
    // Garbage of the same shape is a malformedRequest, still not a 500.
    const res = await SELF.fetch(`http://lanyard.test/v1/${path}/ocsp/${"/".repeat(400)}AAAA`);
    expect(res.status).toBe(400);
    expect(res.headers.get("content-type")).toBe("application/ocsp-response");
  });

  it("a KV key of 200 segments is written and read back", async () => {
    const kv = await mount("kv");
    const key = Array.from({ length: 200 }, (_, i) => `s${i}`).join("/");
    await write(`${kv}/data/${key}`, { data: { v: "deep" } });
    expect((await read(`${kv}/data/${key}`)).body.data.data).toEqual({ v: "deep" });
  });

  it("delete/undelete/destroy take 200 versions; more than 1000 is a 400 naming the field", async () => {
    const kv = await mount("kv");
    await write(`${kv}/data/k`, { data: { v: 1 } });
    await write(`${kv}/data/k`, { data: { v: 2 } });
    const versions = Array.from({ length: 200 }, (_, i) => i + 1);
    for (const verb of ["delete", "undelete", "destroy"]) {
      const r = await api("POST", `${kv}/${verb}/k`, { body: { versions } });
      expect(r.status, `${verb}: ${r.text}`).toBe(204);
    }
    const meta = await read(`${kv}/metadata/k`);
    expect(meta.body.data.versions["1"].destroyed).toBe(true);
    expect(meta.body.data.versions["2"].destroyed).toBe(true);
    const tooMany = await api("POST", `${kv}/destroy/k`, { body: { versions: Array.from({ length: 1001 }, (_, i) => i + 1) } });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.errors[0]).toMatch(/^versions: at most 1000/);
  });

  it("a 500-segment mount path is a 400 naming the limit", async () => {
    const deep = Array.from({ length: 500 }, () => "m").join("/");
    for (const [method, path] of [
      ["POST", `sys/mounts/${deep}`],
      ["GET", `sys/mounts/${deep}`],
      ["POST", `sys/mounts/${deep}/tune`],
      ["DELETE", `sys/mounts/${deep}`],
    ] as const) {
      const r = await api(method, path, { body: method === "POST" ? { type: "kv" } : undefined });
      expect(r.status, `${method} ${r.text}`).toBe(400);
      expect(r.body.errors[0]).toMatch(/at most 32 segments/);
    }
    // 32 segments is still a mount.
    const ok = Array.from({ length: 32 }, (_, i) => `m${i}`).join("/");
    await write(`sys/mounts/${ok}`, { type: "kv" }, {}, 204);
    await write(`${ok}/data/x`, { data: { a: "b" } });
  });

  it("a PKI mount with 110 issuers still rotates its CRL", async () => {
    const path = await mount("pki");
    await write(`${path}/root/generate/internal`, { common_name: "Signer", key_type: "ec", issuer_name: "signer" });
    const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" } as const;
    const pems: string[] = [];
    for (let i = 0; i < 110; i++) {
      const keys = (await crypto.subtle.generateKey(alg, true, ["sign", "verify"])) as CryptoKeyPair;
      const cert = await x509.X509CertificateGenerator.createSelfSigned({
        serialNumber: (i + 1).toString(16).padStart(2, "0"),
        name: `CN=ca${i}`,
        notBefore: new Date(),
        notAfter: new Date(Date.now() + 86_400_000),
        keys,
        signingAlgorithm: alg,
        extensions: [new x509.BasicConstraintsExtension(true, undefined, true)],
      });
      pems.push(cert.toString("pem"));
    }
    await write(`${path}/issuers/import/cert`, { pem_bundle: pems.join("\n") });
    const r = await api("GET", `${path}/crl/rotate`);
    expect(r.status, r.text).toBe(200);
  });

  it("namespaces nest at most 32 deep; deeper is a 400", async () => {
    let parent = "";
    for (let i = 0; i < 32; i++) {
      await write(`sys/namespaces/n${i}`, {}, { namespace: parent });
      parent = `${parent}n${i}/`;
    }
    const r = await api("POST", "sys/namespaces/toodeep", { namespace: parent });
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toMatch(/at most 32 levels/);
    // The deepest namespace is still reachable by its path prefix.
    await write(`${parent}sys/mounts/kv`, { type: "kv" }, {}, 204);
    await write(`${parent}kv/data/x`, { data: { a: "b" } });
  });
});

describe("JSON nesting", () => {
  it("a body nested deeper than 100 levels is a 400; 100 levels is accepted", async () => {
    const kv = await mount("kv");
    const deep = await api("POST", `${kv}/data/deep`, { body: `{"data":${deepObject(50_000)}}` });
    expect(deep.status).toBe(400);
    expect(deep.body.errors).toEqual(["JSON body nested deeper than 100 levels"]);
    // 99 levels under "data", 100 with the body itself.
    await write(`${kv}/data/ok`, { data: JSON.parse(deepObject(99)) });
    const sub = await read(`${kv}/subkeys/ok`);
    expect(sub.body.data.subkeys.a.a).toBeDefined();
    await api("PATCH", `${kv}/data/ok`, { body: { data: JSON.parse(deepObject(99)) } });
  });

  it("a version stored before the limit existed is refused by subkeys and patch, not a 500", async () => {
    const kv = await mount("kv");
    const mountId = (await read("sys/mounts")).body.data[`${kv}/`].uuid as string;
    const stored = await writeVersion(openDb(env.DB), loadConfig(env).seal, {
      mountId,
      path: "legacy",
      expectedCurrent: 0,
      data: JSON.parse(deepObject(5000)) as Record<string, unknown>,
      createdTime: Date.now(),
      deletionTime: null,
      oldestVersion: 0,
    });
    expect(stored.ok).toBe(true);
    const sub = await api("GET", `${kv}/subkeys/legacy`);
    expect(sub.status).toBe(400);
    expect(sub.body.errors[0]).toMatch(/nests deeper than 100 levels/);
    const merged = await api("PATCH", `${kv}/data/legacy`, { body: { data: { b: "1" } } });
    expect(merged.status).toBe(400);
    // A plain write replaces it, and everything works again.
    await write(`${kv}/data/legacy`, { data: { b: "1" } });
    expect((await read(`${kv}/subkeys/legacy`)).body.data.subkeys).toEqual({ b: null });
  });

  it("deep arrays count as levels too", async () => {
    const r = await api("POST", "sys/policies/acl/arr", { body: `{"policy":"x","x":${"[".repeat(5000)}${"]".repeat(5000)}}` });
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toMatch(/deeper than 100/);
  });

  it("a 20,000-deep JSON policy is a 400, not a 500", async () => {
    const inner = `${"[".repeat(20_000)}${"]".repeat(20_000)}`;
    const policy = `{"path":{"secret/*":{"capabilities":${inner}}}}`;
    const r = await api("POST", "sys/policies/acl/deep", { body: { policy } });
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toMatch(/deeper than 100 levels/);
  });

  it("a 20,000-deep HCL policy is a 400, not a 500", async () => {
    const policy = `path "a" { ${"x { ".repeat(20_000)}${"} ".repeat(20_000)} }`;
    const r = await api("POST", "sys/policies/acl/deephcl", { body: { policy } });
    expect(r.status).toBe(400);
    expect(r.body.errors[0]).toMatch(/deeper than 100 levels/);
  });
});

describe("JSON parse errors never echo the body", () => {
  it("a malformed body is 'malformed JSON body'", async () => {
    const r = await api("POST", "sys/policies/acl/x", { body: "SECRETMARKER9" });
    expect(r.status).toBe(400);
    expect(r.body.errors).toEqual(["malformed JSON body"]);
    expect(r.text).not.toContain("SECRETMARKER");
  });

  it("a malformed JSON policy does not echo the policy", async () => {
    const r = await api("POST", "sys/policies/acl/x", { body: { policy: '{"path": SECRETMARKER9}' } });
    expect(r.status).toBe(400);
    expect(r.text).not.toContain("SECRETMARKER");
    expect(r.body.errors[0]).toContain("malformed JSON");
  });
});

describe("namespace existence", () => {
  it("a token that cannot see a namespace gets 403 whether it exists or not", async () => {
    await write("sys/namespaces/hidden18");
    const token = await tokenWithPolicy('path "secret/*" { capabilities = ["read"] }');
    const existing = await api("GET", "sys/mounts", { token, namespace: "hidden18" });
    const missing = await api("GET", "sys/mounts", { token, namespace: "ghost18" });
    expect(existing.status).toBe(403);
    expect(missing.status).toBe(403);
    expect(missing.body).toEqual(existing.body);
    // Deeper paths and other verbs too.
    expect((await api("POST", "kv/data/x", { token, namespace: "ghost18/inner", body: { data: {} } })).status).toBe(403);
    // Checks made before the ACL's (here a malformed body) answer alike for both as well.
    const bad = { token, body: "{oops" };
    const [a, b] = [await api("POST", "kv/data/x", { ...bad, namespace: "hidden18" }), await api("POST", "kv/data/x", { ...bad, namespace: "ghost18" })];
    expect([a.status, a.body]).toEqual([b.status, b.body]);
  });

  it("a caller entitled to the namespace path still learns that it is missing", async () => {
    expect((await api("GET", "sys/mounts", { namespace: "ghost18" })).status).toBe(404);
    const token = await tokenWithPolicy('path "ghost18b/*" { capabilities = ["read"] }');
    const r = await api("GET", "sys/mounts", { token, namespace: "ghost18b" });
    expect(r.status).toBe(404);
    expect(r.body.errors).toEqual(["no namespace at this path"]);
  });

  it("public reads (sys/internal/ui/mounts, sys/activation-flags) answer alike for a hidden and a missing namespace", async () => {
    // Before: without a token, GET <ns>/sys/internal/ui/mounts was 200 for any existing namespace
    // and 403 for a missing one, so anyone could enumerate namespaces.
    await write("sys/namespaces/hidden18p");
    await write("sys/mounts/secret", { type: "kv" }, { namespace: "hidden18p" }, 204);
    const token = await tokenWithPolicy('path "secret/*" { capabilities = ["read"] }');
    for (const path of ["sys/internal/ui/mounts", "sys/internal/ui/mounts/secret/x", "sys/activation-flags"]) {
      for (const t of [null, token]) {
        const existing = await api("GET", path, { token: t, namespace: "hidden18p" });
        const missing = await api("GET", path, { token: t, namespace: "ghost18p" });
        expect([path, existing.status, existing.body]).toEqual([path, missing.status, missing.body]);
        const byPrefix = await api("GET", `hidden18p/${path}`, { token: t });
        expect([path, byPrefix.status]).toEqual([path, 403]);
      }
    }
    // The namespace's own tokens, and the root namespace, keep Vault's answers.
    const own = await tokenWithPolicy('path "secret/data/*" { capabilities = ["read"] }', { namespace: "hidden18p" });
    expect((await api("GET", "sys/internal/ui/mounts", { token: own, namespace: "hidden18p" })).body.data.secret["secret/"]).toMatchObject({ type: "kv" });
    expect((await api("GET", "sys/internal/ui/mounts/secret/x", { token: own, namespace: "hidden18p" })).status).toBe(200);
    expect((await api("GET", "sys/activation-flags", { token: own, namespace: "hidden18p" })).status).toBe(200);
    expect((await api("GET", "sys/internal/ui/mounts", { token: null })).status).toBe(200);
    expect((await api("GET", "sys/activation-flags", { token: null })).status).toBe(200);
    // A root-namespace token granted the namespace's KV tree still detects it (vault kv -namespace).
    const cross = await tokenWithPolicy('path "hidden18p/secret/data/*" { capabilities = ["read"] }');
    expect((await api("GET", "sys/internal/ui/mounts/secret/x", { token: cross, namespace: "hidden18p" })).body.data.path).toBe("secret/");
  });

  it("a token of a child namespace gets 403 for a missing sibling", async () => {
    await write("sys/namespaces/kid18");
    const token = await tokenWithPolicy('path "*" { capabilities = ["read", "list"] }', { namespace: "kid18" });
    expect((await api("GET", "sys/mounts", { token, namespace: "kid18" })).status).toBe(200);
    expect((await api("GET", "sys/mounts", { token, namespace: "sibling18" })).status).toBe(403);
  });
});
