/**
 * A fake of the cloudthree-sm provider (OAuth JWT-bearer token exchange and Secret Manager REST,
 * Google Secret Manager API) at the HTTP boundary: it verifies the assertion's RS256 signature against the
 * service account's public key, its iss, aud, scope and lifetime; accepts only tokens it issued;
 * enforces secret-id and label rules and non-empty payloads; answers Google's
 * `{error:{code,message,status}}`.
 */
import { base64UrlToBytes, bytesToBase64 } from "../../src/core/encoding";
import { FakeThrottle } from "./fake-limits";
import { applyFault, json, type Fault } from "./fake-router";

const RSA = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as const;

interface Secret {
  labels: Record<string, string>;
  versions: string[];
}

const gError = (code: number, status: string, message: string) => json({ error: { code, message, status } }, code);

export class FakeCloudthree {
  private readonly accounts = new Map<string, CryptoKey>();
  private readonly issued = new Set<string>();

  /** Forgets every access token issued so far (as a provider does on revocation): they now get 401. */
  revokeIssuedTokens(): void {
    this.issued.clear();
  }
  /** "<project>/<id>" → secret; values are the decoded payloads. */
  readonly secrets = new Map<string, Secret>();
  readonly faults: Fault[] = [];
  tokenRequests = 0;
  /**
   * Request limits (docs/secrets-sync.md "4. Provider limits are respected"): over them 429 RESOURCE_EXHAUSTED, with the wait in a
   * google.rpc.RetryInfo detail (no Retry-After header, as Google's APIs answer).
   */
  readonly throttle = new FakeThrottle();

  constructor(readonly tokenUri = "https://oauth2.googleapis.com/token") {}

  async addAccount(email: string, pkcs8: Uint8Array<ArrayBuffer>): Promise<void> {
    const priv = await crypto.subtle.importKey("pkcs8", pkcs8, RSA, true, ["sign"]);
    const jwk = (await crypto.subtle.exportKey("jwk", priv)) as JsonWebKey;
    this.accounts.set(email, await crypto.subtle.importKey("jwk", { kty: "RSA", n: jwk.n, e: jwk.e }, RSA, false, ["verify"]));
  }

  value(project: string, id: string): string | undefined {
    const v = this.secrets.get(`${project}/${id}`)?.versions;
    return v?.[v.length - 1];
  }

  /** Someone creates the secret (with one version) before Lanyard writes it (docs/secrets-sync.md "2. Never delete what Lanyard did not create"). */
  createOutOfBand(project: string, id: string, value: string, labels: Record<string, string> = {}): void {
    if (this.secrets.has(`${project}/${id}`)) throw new Error(`fake-cloudthree: secret ${project}/${id} exists`);
    this.secrets.set(`${project}/${id}`, { labels: { ...labels }, versions: [value] });
  }

  /** Someone adds a version at the provider, not through Lanyard. */
  editOutOfBand(project: string, id: string, value: string): void {
    const s = this.secrets.get(`${project}/${id}`);
    if (!s) throw new Error(`fake-cloudthree: no secret ${project}/${id}`);
    s.versions.push(value);
  }

  /** Someone deletes the secret (with all its versions) at the provider. */
  deleteOutOfBand(project: string, id: string): void {
    if (!this.secrets.delete(`${project}/${id}`)) throw new Error(`fake-cloudthree: no secret ${project}/${id}`);
  }

  private async exchange(req: Request): Promise<Response> {
    this.tokenRequests++;
    const form = new URLSearchParams(new TextDecoder().decode(await req.arrayBuffer()));
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:jwt-bearer") return json({ error: "unsupported_grant_type", error_description: "Invalid grant_type" }, 400);
    const [h, p, sig] = (form.get("assertion") ?? "").split(".");
    if (!h || !p || !sig) return json({ error: "invalid_grant", error_description: "Invalid JWT" }, 400);
    const claims = JSON.parse(new TextDecoder().decode(base64UrlToBytes(p))) as Record<string, unknown>;
    const key = this.accounts.get(String(claims.iss));
    if (!key || !(await crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, base64UrlToBytes(sig), new TextEncoder().encode(`${h}.${p}`)))) {
      return json({ error: "invalid_grant", error_description: "Invalid JWT Signature." }, 400);
    }
    const now = Date.now() / 1000;
    if (claims.aud !== this.tokenUri || typeof claims.exp !== "number" || typeof claims.iat !== "number" || claims.exp - claims.iat > 3600 || claims.exp < now) {
      return json({ error: "invalid_grant", error_description: "Invalid JWT: Token must be a short-lived token and in a reasonable timeframe." }, 400);
    }
    if (claims.scope !== "https://www.googleapis.com/auth/cloud-platform") return json({ error: "invalid_scope", error_description: "Invalid OAuth scope" }, 400);
    const token = `ya29.${crypto.randomUUID()}`;
    this.issued.add(token);
    return json({ access_token: token, expires_in: 3599, token_type: "Bearer" });
  }

  async handle(req: Request): Promise<Response> {
    const faulted = applyFault(this.faults);
    if (faulted) return faulted;
    const url = new URL(req.url);
    if (url.pathname === "/token" && req.method === "POST") return this.exchange(req);
    const admission = this.throttle.enter(req, `${req.method} ${url.pathname}`);
    try {
      if (admission.throttled) {
        return json(
          {
            error: {
              code: 429,
              message: "Quota exceeded for quota metric 'Write requests' and limit 'Write requests per minute' of service 'secretmanager.googleapis.com'.",
              status: "RESOURCE_EXHAUSTED",
              details: [{ "@type": "type.googleapis.com/google.rpc.RetryInfo", retryDelay: `${admission.retryAfter}s` }],
            },
          },
          429,
        );
      }
      return await this.api(req, url);
    } finally {
      admission.leave();
    }
  }

  private async api(req: Request, url: URL): Promise<Response> {
    const bearer = /^Bearer (.+)$/.exec(req.headers.get("authorization") ?? "")?.[1];
    if (!bearer || !this.issued.has(bearer)) return gError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.");
    const access = /^\/v1\/projects\/([^/]+)\/secrets\/([^/:]+)\/versions\/latest:access$/.exec(url.pathname);
    if (access && req.method === "GET") {
      const [, project = "", rawId = ""] = access;
      const id = decodeURIComponent(rawId);
      const latest = this.secrets.get(`${project}/${id}`)?.versions;
      const n = latest?.length ?? 0;
      const data = latest?.[n - 1];
      if (data === undefined) return gError(404, "NOT_FOUND", `Secret [projects/${project}/secrets/${id}] not found or has no versions.`);
      return json({ name: `projects/${project}/secrets/${id}/versions/${n}`, payload: { data: bytesToBase64(new TextEncoder().encode(data)) } });
    }
    const m = /^\/v1\/projects\/([^/]+)\/secrets(?:\/([^/:]+)(:addVersion)?)?$/.exec(url.pathname);
    if (!m) return gError(404, "NOT_FOUND", "Not found");
    const [, project = "", rawId, addVersion] = m;
    if (req.method === "POST" && !rawId) {
      const id = url.searchParams.get("secretId") ?? "";
      if (!/^[A-Za-z0-9_-]{1,255}$/.test(id)) return gError(400, "INVALID_ARGUMENT", "Secret id contains invalid characters.");
      if (this.secrets.has(`${project}/${id}`)) return gError(409, "ALREADY_EXISTS", `Secret [projects/${project}/secrets/${id}] already exists.`);
      const b = (await req.json()) as { replication?: unknown; labels?: Record<string, string> };
      if (!b.replication) return gError(400, "INVALID_ARGUMENT", "Secret.replication is required.");
      for (const [k, v] of Object.entries(b.labels ?? {})) {
        if (!/^[a-z][a-z0-9_-]{0,62}$/.test(k) || !/^[a-z0-9_-]{0,63}$/.test(v)) return gError(400, "INVALID_ARGUMENT", `Invalid label ${k}`);
      }
      this.secrets.set(`${project}/${id}`, { labels: b.labels ?? {}, versions: [] });
      return json({ name: `projects/${project}/secrets/${id}`, replication: b.replication, labels: b.labels ?? {} });
    }
    const id = decodeURIComponent(rawId ?? "");
    const s = this.secrets.get(`${project}/${id}`);
    if (req.method === "POST" && addVersion) {
      if (!s) return gError(404, "NOT_FOUND", `Secret [projects/${project}/secrets/${id}] not found or has no versions.`);
      const b = (await req.json()) as { payload?: { data?: unknown } };
      const data = typeof b.payload?.data === "string" ? new TextDecoder().decode(Uint8Array.from(atob(b.payload.data), (c) => c.charCodeAt(0))) : "";
      if (data === "") return gError(400, "INVALID_ARGUMENT", "Secret Payload cannot be empty.");
      s.versions.push(data);
      return json({ name: `projects/${project}/secrets/${id}/versions/${s.versions.length}`, state: "ENABLED" });
    }
    if (req.method === "DELETE") {
      if (!s) return gError(404, "NOT_FOUND", `Secret [projects/${project}/secrets/${id}] not found.`);
      this.secrets.delete(`${project}/${id}`);
      return json({});
    }
    return gError(405, "METHOD_NOT_ALLOWED", "method not allowed");
  }
}

export const CLOUDTHREE_HOSTS = ["oauth2.googleapis.com", "secretmanager.googleapis.com"];
