/**
 * A fake of the cloudthree-sm provider (OAuth JWT-bearer token exchange and Secret Manager REST,
 * Google Secret Manager API) at the HTTP boundary: it verifies the assertion's RS256 signature against the
 * service account's public key, its iss, aud, scope and lifetime; accepts only tokens it issued;
 * enforces secret-id and label rules and non-empty payloads; answers Google's
 * `{error:{code,message,status}}`. Workload identity federation as Google STS does it: a token
 * exchange (RFC 8693) for a registered pool provider verifies the subject token against the
 * provider's issuer (./fake-oidc-trust.ts: discovery and key set fetched over HTTP) and allowed
 * audiences and hands out a federated token for `principal://…/subject/<sub>`; IAM Credentials
 * generateAccessToken lets a principal granted workloadIdentityUser impersonate a service account.
 * Every token issued expires after `tokenSeconds`.
 */
import { base64UrlToBytes, bytesToBase64 } from "../../src/core/encoding";
import { FakeThrottle } from "./fake-limits";
import { applyFault, json, type Fault } from "./fake-router";
import { isRefusal, OidcTrust } from "./fake-oidc-trust";

/** A workload identity pool provider: the issuer it trusts and the audiences it allows. */
export interface PoolProvider {
  issuer: string;
  allowedAudiences: string[];
}

interface Issued {
  expiresAt: number;
  /** `serviceAccount:<email>` or a federated `principal://…`. */
  principal: string;
}

const RSA = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as const;

interface Secret {
  labels: Record<string, string>;
  versions: string[];
}

const gError = (code: number, status: string, message: string) => json({ error: { code, message, status } }, code);

export class FakeCloudthree {
  private readonly accounts = new Map<string, CryptoKey>();
  private readonly issued = new Map<string, Issued>();
  /** Pool provider resource name (//iam.googleapis.com/projects/…/providers/…) → its trust. */
  readonly providers = new Map<string, PoolProvider>();
  /** Service account e-mail → principals granted roles/iam.workloadIdentityUser on it. */
  readonly impersonators = new Map<string, string[]>();
  /** Federated principals granted access to Secret Manager directly (without impersonation). */
  readonly directPrincipals = new Set<string>();
  readonly oidc = new OidcTrust();
  tokenSeconds = 3599;
  stsRequests = 0;
  impersonations = 0;
  /** Every access token handed out: tests grep for them. */
  readonly handedOut: string[] = [];

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
    return json({ access_token: this.issue(`serviceAccount:${String(claims.iss)}`), expires_in: this.tokenSeconds, token_type: "Bearer" });
  }

  private issue(principal: string): string {
    const token = `ya29.${crypto.randomUUID()}`;
    this.issued.set(token, { expiresAt: Date.now() + this.tokenSeconds * 1000, principal });
    this.handedOut.push(token);
    return token;
  }

  /** Google STS v1/token: token exchange of an OIDC token for a federated access token. */
  private async stsExchange(req: Request): Promise<Response> {
    this.stsRequests++;
    const form = new URLSearchParams(new TextDecoder().decode(await req.arrayBuffer()));
    if (form.get("grant_type") !== "urn:ietf:params:oauth:grant-type:token-exchange") return json({ error: "invalid_request", error_description: "Invalid grant_type" }, 400);
    if (form.get("subject_token_type") !== "urn:ietf:params:oauth:token-type:jwt") return json({ error: "invalid_request", error_description: "Invalid subject_token_type" }, 400);
    const audience = form.get("audience") ?? "";
    const provider = this.providers.get(audience);
    if (!provider) return json({ error: "invalid_target", error_description: "The target service indicated by the \"audience\" parameters is invalid." }, 400);
    const v = await this.oidc.verify(form.get("subject_token") ?? "", provider.issuer, provider.allowedAudiences);
    if (isRefusal(v)) {
      const why = v.kind === "audience" ? "The audience in ID Token does not match the expected audience." : v.kind === "expired" ? "ID Token has expired." : `Invalid ID Token: ${v.message}`;
      return json({ error: "invalid_grant", error_description: why }, 400);
    }
    const pool = audience.replace(/^\/\//, "").replace(/\/providers\/[^/]+$/, "");
    return json({ access_token: this.issue(`principal://${pool}/subject/${v.sub}`), issued_token_type: "urn:ietf:params:oauth:token-type:access_token", token_type: "Bearer", expires_in: this.tokenSeconds });
  }

  /** IAM Credentials generateAccessToken: a federated principal impersonates a service account. */
  private async generateAccessToken(req: Request, email: string): Promise<Response> {
    this.impersonations++;
    const caller = this.caller(req);
    if (caller instanceof Response) return caller;
    if (!(this.impersonators.get(email) ?? []).includes(caller.principal)) return gError(403, "PERMISSION_DENIED", "Permission 'iam.serviceAccounts.getAccessToken' denied on resource (or it may not exist).");
    const b = (await req.json()) as { scope?: unknown };
    if (!Array.isArray(b.scope) || !b.scope.includes("https://www.googleapis.com/auth/cloud-platform")) return gError(400, "INVALID_ARGUMENT", "scope is required");
    const token = this.issue(`serviceAccount:${email}`);
    return json({ accessToken: token, expireTime: new Date(this.issued.get(token)?.expiresAt ?? 0).toISOString() });
  }

  /** The bearer token's grant, or the 401 answer. */
  private caller(req: Request): Issued | Response {
    const bearer = /^Bearer (.+)$/.exec(req.headers.get("authorization") ?? "")?.[1];
    const grant = bearer ? this.issued.get(bearer) : undefined;
    if (!grant || grant.expiresAt <= Date.now()) return gError(401, "UNAUTHENTICATED", "Request had invalid authentication credentials.");
    return grant;
  }

  async handle(req: Request): Promise<Response> {
    const faulted = applyFault(this.faults);
    if (faulted) return faulted;
    const url = new URL(req.url);
    if (url.pathname === "/token" && req.method === "POST") return this.exchange(req);
    if (url.pathname === "/v1/token" && req.method === "POST") return this.stsExchange(req);
    const impersonate = /^\/v1\/projects\/-\/serviceAccounts\/([^/:]+):generateAccessToken$/.exec(url.pathname);
    if (impersonate && req.method === "POST") return this.generateAccessToken(req, decodeURIComponent(impersonate[1] ?? ""));
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
    const caller = this.caller(req);
    if (caller instanceof Response) return caller;
    if (caller.principal.startsWith("principal://") && !this.directPrincipals.has(caller.principal)) return gError(403, "PERMISSION_DENIED", "Permission 'secretmanager.secrets.create' denied.");
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

export const CLOUDTHREE_HOSTS = ["oauth2.googleapis.com", "secretmanager.googleapis.com", "sts.googleapis.com", "iamcredentials.googleapis.com"];
