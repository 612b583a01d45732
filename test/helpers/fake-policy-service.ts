/**
 * A fake external policy service (Vault's Certificate Issuance External Policy Service, CIEPS
 * v1: docs/pki-external-policy.md) at the HTTP boundary. It decodes
 * requests the way a real service built on upstream's SDK does (JSON content type, unknown
 * fields refused at every level, a parseable and correctly signed CSR in
 * user_request_key_values), records what it received, and answers with certificate templates
 * made here with @peculiar/x509 and signed by a throwaway key (whose signature the engine must
 * replace). Faults: refusal, hang until the caller aborts, non-200, non-JSON, wrong UUID,
 * unknown fields, unparseable templates, connection failure.
 */
import * as x509 from "@peculiar/x509";
import { vi } from "vitest";

x509.cryptoProvider.set(crypto);

export type Behaviour =
  | { kind: "template"; issuerRef?: string; store?: boolean; lease?: boolean; extraError?: string; ca?: boolean; notAfterDays?: number; omitIssuerRef?: boolean }
  | { kind: "refuse"; message: string }
  | { kind: "hang" }
  | { kind: "status"; status: number }
  | { kind: "raw"; body: string }
  | { kind: "wrong-uuid" }
  | { kind: "unknown-field" }
  | { kind: "bad-template" }
  | { kind: "empty" };

export interface Received {
  raw: string;
  body: Record<string, any>;
  csr: x509.Pkcs10CertificateRequest;
}

const TOP = ["request_version", "request_uuid", "synchronous", "user_request_key_values", "identity_request_key_values", "acme_request_key_values", "vault_request_values"];
const VAULT = [
  "policy_name",
  "mount",
  "ns",
  "vault_is_performance_standby",
  "vault_is_performance_secondary",
  "issuance_mode",
  "vault_generated_private_key",
  "requested_issuer_name",
  "requested_issuer_id",
  "requested_issuer_cert",
  "requested_issuance_config",
];
const CONFIG = ["aia_values", "leaf_not_after_behavior", "mount_default_ttl", "mount_max_ttl"];
const AIA = ["issuing_certificates", "crl_distribution_points", "ocsp_servers"];

const isObj = (v: unknown): v is Record<string, any> => typeof v === "object" && v !== null && !Array.isArray(v);

function unknownKeys(obj: Record<string, unknown>, allowed: string[], where: string): string[] {
  return Object.keys(obj)
    .filter((k) => !allowed.includes(k))
    .map((k) => `${where}: unknown field "${k}"`);
}

/** The problems a strict (Go, DisallowUnknownFields) decoder would have with a request. */
async function validate(req: Request, text: string): Promise<{ problems: string[]; body?: Record<string, any>; csr?: x509.Pkcs10CertificateRequest }> {
  const problems: string[] = [];
  if (req.method !== "POST") problems.push(`method ${req.method}`);
  if (req.headers.get("content-type") !== "application/json") problems.push(`content-type ${req.headers.get("content-type")}`);
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { problems: [...problems, "body is not JSON"] };
  }
  if (!isObj(body)) return { problems: [...problems, "body is not an object"] };
  problems.push(...unknownKeys(body, TOP, "request"));
  if (body.request_version !== 1) problems.push("request_version must be 1");
  if (typeof body.request_uuid !== "string" || !/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(body.request_uuid)) {
    problems.push("request_uuid must be a random UUID");
  }
  if (body.synchronous !== true) problems.push("synchronous must be true");
  const user = body.user_request_key_values;
  let csr: x509.Pkcs10CertificateRequest | undefined;
  if (!isObj(user)) problems.push("user_request_key_values must be an object");
  else if (typeof user.csr !== "string" || user.csr === "") problems.push("user_request_key_values.csr must be a non-empty PEM CSR");
  else {
    try {
      csr = new x509.Pkcs10CertificateRequest(user.csr);
      if (!(await csr.verify())) problems.push("csr signature does not verify");
    } catch (e) {
      problems.push(`csr does not parse: ${String(e)}`);
    }
  }
  const v = body.vault_request_values;
  if (!isObj(v)) problems.push("vault_request_values must be an object");
  else {
    problems.push(...unknownKeys(v, VAULT, "vault_request_values"));
    for (const k of ["mount", "ns", "issuance_mode", "requested_issuer_name", "requested_issuer_id", "requested_issuer_cert"]) {
      if (typeof v[k] !== "string") problems.push(`vault_request_values.${k} must be a string`);
    }
    if ("policy_name" in v && (typeof v.policy_name !== "string" || v.policy_name === "")) problems.push("policy_name is omitted when empty");
    for (const k of ["vault_is_performance_standby", "vault_is_performance_secondary", "vault_generated_private_key"]) {
      if (typeof v[k] !== "boolean") problems.push(`vault_request_values.${k} must be a boolean`);
    }
    if (!["issue", "sign", "ica", "acme"].includes(v.issuance_mode)) problems.push(`issuance_mode ${v.issuance_mode}`);
    const c = v.requested_issuance_config;
    if (!isObj(c)) problems.push("requested_issuance_config must be an object");
    else {
      problems.push(...unknownKeys(c, CONFIG, "requested_issuance_config"));
      if (!isObj(c.aia_values)) problems.push("aia_values must be an object");
      else {
        problems.push(...unknownKeys(c.aia_values, AIA, "aia_values"));
        for (const k of AIA) if (!Array.isArray(c.aia_values[k])) problems.push(`aia_values.${k} must be a list`);
      }
      for (const k of ["leaf_not_after_behavior", "mount_default_ttl", "mount_max_ttl"]) if (typeof c[k] !== "string") problems.push(`${k} must be a string`);
    }
  }
  return { problems, body, csr };
}

const json = (body: unknown, status = 200) => new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });

export class FakePolicyService {
  readonly received: Received[] = [];
  /** Requests a strict decoder would have refused (tests assert this stays empty). */
  readonly problems: string[] = [];
  /** Behaviours for the next requests, in order; then `fallback`. */
  readonly next: Behaviour[] = [];
  fallback: Behaviour = { kind: "template" };
  private caKeys: CryptoKeyPair | null = null;

  /** The throwaway key the service signs its templates with (the engine must replace it). */
  private async keys(): Promise<CryptoKeyPair> {
    if (!this.caKeys) {
      this.caKeys = (await crypto.subtle.generateKey({ name: "ECDSA", namedCurve: "P-384" }, true, ["sign", "verify"])) as CryptoKeyPair;
    }
    return this.caKeys;
  }

  async handle(req: Request, signal?: AbortSignal | null): Promise<Response> {
    const text = await req.text();
    const { problems, body, csr } = await validate(req, text);
    if (problems.length > 0 || !body || !csr) {
      this.problems.push(...problems);
      return new Response("invalid request from Vault", { status: 500 });
    }
    this.received.push({ raw: text, body, csr });
    const b = this.next.shift() ?? this.fallback;
    const uuid = body.request_uuid as string;
    switch (b.kind) {
      case "refuse":
        return json({ request_uuid: uuid, error: b.message });
      case "hang":
        return new Promise<Response>((_, reject) => {
          signal?.addEventListener("abort", () => reject(signal.reason));
        });
      case "status":
        return json({ request_uuid: uuid, error: "should be discarded" }, b.status);
      case "raw":
        return new Response(b.body, { status: 200, headers: { "content-type": "text/html" } });
      case "wrong-uuid":
        return json({ request_uuid: crypto.randomUUID(), certificate: await this.template(body, csr, {}) });
      case "unknown-field":
        return json({ request_uuid: uuid, certificate: await this.template(body, csr, {}), issuer_ref: body.vault_request_values.requested_issuer_id, surprise: true });
      case "bad-template":
        return json({ request_uuid: uuid, certificate: "-----BEGIN CERTIFICATE-----\nMIIBAAAA\n-----END CERTIFICATE-----", issuer_ref: "default" });
      case "empty":
        return json({ request_uuid: uuid });
      case "template": {
        const certificate = await this.template(body, csr, b);
        return json({
          request_uuid: uuid,
          warnings: ["evaluated by the fake policy service"],
          certificate,
          ...(b.omitIssuerRef ? {} : { issuer_ref: b.issuerRef ?? body.vault_request_values.requested_issuer_id }),
          store_certificate: b.store ?? true,
          generate_lease: b.lease ?? false,
          ...(b.extraError ? { error: b.extraError } : {}),
        });
      }
    }
  }

  /**
   * A template as a policy service would make it: the subject and SANs it decides (from the
   * caller's common_name / alt_names plus its own O), its own key usages, a custom extension,
   * and values the engine must replace (AKI, CRL distribution point, serial, issuer, signature).
   */
  async template(body: Record<string, any>, csr: x509.Pkcs10CertificateRequest, o: { ca?: boolean; notAfterDays?: number }): Promise<string> {
    const user = body.user_request_key_values as Record<string, unknown>;
    const cn = typeof user.common_name === "string" ? user.common_name : "policy-default.example.com";
    const alt = typeof user.alt_names === "string" ? user.alt_names.split(",").map((s) => s.trim()).filter(Boolean) : [];
    const keys = await this.keys();
    const now = Date.now();
    const exts: x509.Extension[] = [
      new x509.KeyUsagesExtension(o.ca ? x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign : x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment, true),
      await x509.AuthorityKeyIdentifierExtension.create(keys.publicKey),
      new x509.CRLDistributionPointsExtension(["http://policy.invalid/crl"]),
      // Netscape comment (2.16.840.1.113730.1.13): IA5String, a custom extension to pass through.
      new x509.Extension("2.16.840.1.113730.1.13", false, Uint8Array.from([0x16, 0x0b, ...new TextEncoder().encode("fake-policy")])),
    ];
    if (o.ca) exts.push(new x509.BasicConstraintsExtension(true, 0, true));
    else {
      exts.push(new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth, x509.ExtendedKeyUsage.clientAuth]));
      exts.push(new x509.SubjectAlternativeNameExtension([cn, ...alt].map((d) => ({ type: "dns" as const, value: d }))));
    }
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: "02",
      subject: `CN=${cn}, O=Policy Org`,
      issuer: "CN=Fake Policy Service",
      notBefore: new Date(now - 30_000),
      notAfter: new Date(now + (o.notAfterDays ?? 10) * 86_400_000),
      publicKey: csr.publicKey,
      signingKey: keys.privateKey,
      signingAlgorithm: { name: "ECDSA", hash: "SHA-384" },
      extensions: exts,
    });
    return cert.toString("pem");
  }
}

/**
 * Routes the Worker's outbound fetches: `host` to the fake, `unreachableHost` fails like a
 * connection error, anything else fails loudly. The abort signal reaches the fake so a hanging
 * answer ends when the engine's timeout fires. Returns the uninstall function.
 */
export function installPolicyService(fake: FakePolicyService, host: string, unreachableHost: string): () => void {
  const stub = async (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = new Request(input, init);
    const h = new URL(req.url).hostname;
    if (h === unreachableHost) throw new TypeError("Network connection lost.");
    if (h !== host) throw new TypeError(`fake-policy-service: no fake for ${new URL(req.url).origin}`);
    if (init?.redirect !== "manual") fake.problems.push("redirects must not be followed");
    return fake.handle(req, init?.signal);
  };
  vi.stubGlobal("fetch", stub);
  return () => vi.unstubAllGlobals();
}
