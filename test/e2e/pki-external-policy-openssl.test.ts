/**
 * External policy end to end: the Worker (wrangler, development mode) calls a policy service
 * running in this Node process on 127.0.0.1 (plain http:// to a loopback host is allowed in
 * development, docs/pki-external-policy.md), and openssl judges what comes back.
 */
import "reflect-metadata";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { FakePolicyService } from "../helpers/fake-policy-service";
import { keyMatchesCert, opensslCsr, verify, x509Text } from "../helpers/openssl";
import { CA_NOT_AFTER, ok, pkiMount } from "./client";

const fake = new FakePolicyService();
let server: Server;
let path = "";
let root = "";

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const headers = new Headers();
      for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
      const request = new Request(`http://127.0.0.1${req.url ?? "/"}`, { method: req.method, headers, body: Buffer.concat(chunks) });
      fake
        .handle(request)
        .then(async (answer) => {
          res.writeHead(answer.status, { "content-type": answer.headers.get("content-type") ?? "application/json" });
          res.end(Buffer.from(await answer.arrayBuffer()));
        })
        .catch(() => {
          res.writeHead(500);
          res.end();
        });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  path = await pkiMount("pki-ep");
  const r = await ok("POST", `${path}/root/generate/internal`, { common_name: "Policy Root", key_type: "ec", not_after: CA_NOT_AFTER, issuer_name: "root" });
  root = r.body.data.certificate;
  await ok("POST", `${path}/config/urls`, { crl_distribution_points: "http://crl.example.com/root.crl" });
  await ok("POST", `${path}/config/external-policy`, { enabled: true, external_service_url: `http://127.0.0.1:${port}/evaluate`, timeout: "10s" });
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

describe("external policy, judged by openssl", () => {
  it("issue: the template's subject, SANs and custom extension, signed by the root, with the key kept local", async () => {
    const r = await ok("POST", `${path}/external-policy/issue/web`, { common_name: "app.example.com", alt_names: "www.example.com", key_type: "rsa" });
    expect(fake.problems).toEqual([]);
    const d = r.body.data;
    const v = await verify(d.certificate, root);
    expect(v.ok, v.output).toBe(true);
    const text = await x509Text(d.certificate);
    expect(text).toContain("Subject: CN = app.example.com, O = Policy Org");
    expect(text).toContain("DNS:app.example.com, DNS:www.example.com");
    expect(text).toContain("Netscape Comment");
    expect(text).toContain("URI:http://crl.example.com/root.crl");
    expect(text).not.toContain("policy.invalid");
    expect(text).toContain("Signature Algorithm: ecdsa-with-SHA384");
    expect(d.private_key).toContain("-----BEGIN RSA PRIVATE KEY-----");
    expect(await keyMatchesCert(d.private_key, d.certificate)).toBe(true);
    expect(fake.received.at(-1)?.raw).not.toContain("PRIVATE KEY");
  });

  it("sign: an openssl CSR; the certificate holds that key", async () => {
    const { key, csr } = await opensslCsr("/CN=ignored", "ec");
    const r = await ok("POST", `${path}/external-policy/sign`, { csr, common_name: "signed.example.com" });
    expect((await verify(r.body.data.certificate, root)).ok).toBe(true);
    expect(await keyMatchesCert(key, r.body.data.certificate)).toBe(true);
    expect(r.body.data.private_key).toBeUndefined();
  });

  it("sign-intermediate: a CA certificate that openssl verifies against the root", async () => {
    fake.next.push({ kind: "template", ca: true });
    const { csr } = await opensslCsr("/CN=Policy ICA", "ec");
    const r = await ok("POST", `${path}/issuer/root/external-policy/sign-intermediate`, { csr, common_name: "Policy ICA" });
    const ica = r.body.data.certificate as string;
    expect((await verify(ica, root)).ok).toBe(true);
    expect(await x509Text(ica)).toMatch(/X509v3 Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
  });
});
