/**
 * A fake of the cloudtwo-kv provider (Azure AD client-credentials token endpoint and Key Vault
 * secrets REST, Azure Key Vault REST API) at the HTTP boundary: it checks client id/secret per tenant and
 * the requested scope, accepts only bearer tokens it issued, enforces the name rules (case-
 * insensitive), soft-deletes (409 ObjectIsDeletedButRecoverable on PUT), recovers and purges,
 * and answers `{error:{code,message,innererror}}`. A client may instead authenticate with a
 * client assertion (jwt-bearer) matching one of its federated identity credentials (issuer,
 * subject, audience), checked as the identity platform does (./fake-oidc-trust.ts: discovery and
 * key set fetched over HTTP); the tokens it then issues expire after `tokenSeconds`.
 */
import { FakeThrottle } from "./fake-limits";
import { applyFault, json, type Fault } from "./fake-router";
import { isRefusal, OidcTrust } from "./fake-oidc-trust";

/** A federated identity credential on an app registration (Microsoft Graph federatedIdentityCredential). */
export interface FederatedCredential {
  issuer: string;
  subject: string;
  audience: string;
}

const JWT_BEARER = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";

interface Secret {
  name: string;
  value: string;
  version: number;
  tags: Record<string, string>;
  deleted: boolean;
  /** Seconds since the epoch of the current version's creation (attributes.created/updated). */
  updated?: number;
}

const kvError = (status: number, code: string, message: string, inner?: string) => json({ error: { code, message, ...(inner ? { innererror: { code: inner } } : {}) } }, status);

export class FakeCloudtwo {
  /** tenant/client_id → client secret. */
  readonly clients = new Map<string, string>();
  /** Issued access token → expiry (ms). */
  private readonly issued = new Map<string, number>();
  /** tenant/client_id → its federated identity credentials. */
  readonly federated = new Map<string, FederatedCredential[]>();
  readonly oidc = new OidcTrust();
  /** Lifetime of the access tokens issued (expires_in). */
  tokenSeconds = 3599;
  assertionRequests = 0;
  /** Every access token handed out: tests grep for them. */
  readonly handedOut: string[] = [];

  /** Forgets every access token issued so far (as a provider does on revocation): they now get 401. */
  revokeIssuedTokens(): void {
    this.issued.clear();
  }
  /** Lower-cased name → secret (names are case-insensitive). */
  readonly secrets = new Map<string, Secret>();
  readonly faults: Fault[] = [];
  tokenRequests = 0;
  purgeAllowed = true;
  /** Per-vault request limits (docs/secrets-sync.md "4. Provider limits are respected"): over them 429 Throttled with Retry-After. */
  readonly throttle = new FakeThrottle();

  addClient(tenant: string, clientId: string, secret: string): void {
    this.clients.set(`${tenant}/${clientId}`, secret);
  }

  addFederatedCredential(tenant: string, clientId: string, fic: FederatedCredential): void {
    const key = `${tenant}/${clientId}`;
    this.federated.set(key, [...(this.federated.get(key) ?? []), fic]);
  }

  /** The client's authentication: its secret, or a client assertion matching a federated credential. An error answer, or null. */
  private async authenticate(tenant: string, form: URLSearchParams): Promise<Response | null> {
    const key = `${tenant}/${form.get("client_id")}`;
    if (form.get("client_assertion_type") !== JWT_BEARER) {
      const expected = this.clients.get(key);
      if (expected === undefined || expected !== form.get("client_secret")) return json({ error: "invalid_client", error_description: "AADSTS7000215: Invalid client secret provided." }, 401);
      return null;
    }
    this.assertionRequests++;
    const assertion = form.get("client_assertion") ?? "";
    const claims = JSON.parse(new TextDecoder().decode(Uint8Array.from(atob((assertion.split(".")[1] ?? "").replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0))) || "{}") as { iss?: string; sub?: string };
    const fics = (this.federated.get(key) ?? []).filter((f) => f.issuer === claims.iss);
    if (fics.length === 0) return json({ error: "invalid_client", error_description: `AADSTS700211: No matching federated identity record found for presented assertion issuer '${claims.iss}'.` }, 400);
    const fic = fics.find((f) => f.subject === claims.sub);
    if (!fic) return json({ error: "invalid_client", error_description: `AADSTS700213: No matching federated identity record found for presented assertion subject '${claims.sub}'.` }, 400);
    const v = await this.oidc.verify(assertion, fic.issuer, [fic.audience]);
    if (!isRefusal(v)) return null;
    if (v.kind === "audience") return json({ error: "invalid_client", error_description: "AADSTS700212: No matching federated identity record found for presented assertion audience." }, 400);
    if (v.kind === "expired") return json({ error: "invalid_client", error_description: "AADSTS700024: Client assertion is not within its valid time range." }, 400);
    return json({ error: "invalid_client", error_description: `AADSTS50013: Assertion failed signature validation. (${v.message})` }, 400);
  }

  value(name: string): string | undefined {
    const s = this.secrets.get(name.toLowerCase());
    return s && !s.deleted ? s.value : undefined;
  }

  /** Someone creates the secret in the vault before Lanyard writes it (docs/secrets-sync.md "2. Never delete what Lanyard did not create"). */
  createOutOfBand(name: string, value: string, tags: Record<string, string> = {}): void {
    if (this.secrets.has(name.toLowerCase())) throw new Error(`fake-cloudtwo: secret ${name} exists`);
    this.secrets.set(name.toLowerCase(), { name, value, version: 1, tags: { ...tags }, deleted: false, updated: Math.floor(Date.now() / 1000) });
  }

  /** Someone sets a new version at the provider, not through Lanyard. */
  editOutOfBand(name: string, value: string): void {
    const s = this.secrets.get(name.toLowerCase());
    if (!s || s.deleted) throw new Error(`fake-cloudtwo: no secret ${name}`);
    Object.assign(s, { value, version: s.version + 1, updated: Math.floor(Date.now() / 1000) });
  }

  /** Someone deletes the secret at the provider: it sits soft-deleted (recoverable), or is gone with `purge`. */
  deleteOutOfBand(name: string, opts: { purge?: boolean } = {}): void {
    const s = this.secrets.get(name.toLowerCase());
    if (!s || s.deleted) throw new Error(`fake-cloudtwo: no secret ${name}`);
    if (opts.purge) this.secrets.delete(name.toLowerCase());
    else s.deleted = true;
  }

  async handle(req: Request): Promise<Response> {
    const faulted = applyFault(this.faults);
    if (faulted) return faulted;
    const url = new URL(req.url);
    const tok = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(url.pathname);
    if (tok && req.method === "POST") {
      const form = new URLSearchParams(new TextDecoder().decode(await req.arrayBuffer()));
      this.tokenRequests++;
      if (form.get("grant_type") !== "client_credentials") return json({ error: "unsupported_grant_type", error_description: "AADSTS70003" }, 400);
      const refused = await this.authenticate(tok[1] ?? "", form);
      if (refused) return refused;
      if (form.get("scope") !== "https://vault.azure.net/.default") return json({ error: "invalid_scope", error_description: "AADSTS70011: The provided value for scope is not valid." }, 400);
      const token = `eyJ0eXAi.${crypto.randomUUID()}`;
      this.issued.set(token, Date.now() + this.tokenSeconds * 1000);
      this.handedOut.push(token);
      return json({ token_type: "Bearer", expires_in: this.tokenSeconds, ext_expires_in: this.tokenSeconds, access_token: token });
    }
    const admission = this.throttle.enter(req, `${req.method} ${url.pathname}`);
    try {
      if (admission.throttled) {
        return json(
          { error: { code: "Throttled", message: "Request was not processed because too many requests were received. Reason: VaultRequestTypeLimitReached" } },
          429,
          { "retry-after": String(admission.retryAfter) },
        );
      }
      return await this.vault(req, url);
    } finally {
      admission.leave();
    }
  }

  private async vault(req: Request, url: URL): Promise<Response> {
    const bearer = /^Bearer (.+)$/.exec(req.headers.get("authorization") ?? "")?.[1];
    if (!bearer || !this.issued.has(bearer)) return kvError(401, "Unauthorized", "AKV10000: Request is missing a Bearer or PoP token.");
    if ((this.issued.get(bearer) ?? 0) <= Date.now()) return kvError(401, "Unauthorized", "AKV10022: Invalid audience or the token is expired.");
    if (!url.searchParams.get("api-version")) return kvError(400, "BadParameter", "The api-version query parameter is required.");
    const m = /^\/(secrets|deletedsecrets)\/([^/]+)(\/recover)?$/.exec(url.pathname);
    if (!m) return kvError(404, "NotFound", "Not found");
    const [, kind, rawName = "", recover] = m;
    const name = decodeURIComponent(rawName);
    if (!/^[0-9A-Za-z-]{1,127}$/.test(name)) return kvError(400, "BadParameter", "The request URI contains an invalid name");
    const key = name.toLowerCase();
    const s = this.secrets.get(key);
    const bundle = (x: Secret) => ({
      value: x.value,
      id: `${url.origin}/secrets/${x.name}/${x.version}`,
      contentType: "text/plain",
      attributes: { enabled: true, created: x.updated ?? 0, updated: x.updated ?? 0, recoveryLevel: "Recoverable+Purgeable", recoverableDays: 90 },
      tags: x.tags,
    });
    if (kind === "secrets" && req.method === "GET" && !recover) {
      if (!s || s.deleted) return kvError(404, "SecretNotFound", `A secret with (name/id) ${name} was not found in this key vault. If you recently deleted this secret you may be able to recover it using the correct recovery command.`);
      return json(bundle(s));
    }
    if (kind === "secrets" && req.method === "PUT") {
      if (s?.deleted) return kvError(409, "Conflict", `Secret ${name} is currently in a deleted but recoverable state.`, "ObjectIsDeletedButRecoverable");
      const b = (await req.json()) as { value?: unknown; tags?: Record<string, string> };
      if (typeof b.value !== "string") return kvError(400, "BadParameter", "value is required");
      const next = { name, value: b.value, version: (s?.version ?? 0) + 1, tags: b.tags ?? {}, deleted: false, updated: Math.floor(Date.now() / 1000) };
      this.secrets.set(key, next);
      return json(bundle(next));
    }
    if (kind === "secrets" && req.method === "DELETE") {
      if (!s || s.deleted) return kvError(404, "SecretNotFound", `A secret with (name/id) ${name} was not found in this key vault.`);
      s.deleted = true;
      return json({ recoveryId: `${url.origin}/deletedsecrets/${name}`, id: `${url.origin}/secrets/${name}/${s.version}` });
    }
    if (kind === "deletedsecrets" && req.method === "DELETE") {
      if (!s?.deleted) return kvError(404, "SecretNotFound", `Deleted Secret not found: ${name}`);
      if (!this.purgeAllowed) return kvError(403, "Forbidden", "Operation \"purge\" is not allowed");
      this.secrets.delete(key);
      return new Response(null, { status: 204 });
    }
    if (kind === "deletedsecrets" && recover && req.method === "POST") {
      if (!s?.deleted) return kvError(404, "SecretNotFound", `Deleted Secret not found: ${name}`);
      s.deleted = false;
      return json({ id: `${url.origin}/secrets/${name}/${s.version}` });
    }
    return kvError(405, "MethodNotAllowed", "method not allowed");
  }
}

export const CLOUDTWO_HOSTS = ["login.microsoftonline.com", ".vault.azure.net"];
