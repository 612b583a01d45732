/**
 * A fake of the repository host's Actions-secrets API (GitHub REST API, Actions secrets) at the HTTP boundary. It
 * holds an X25519 key pair per scope and opens every sealed box with the private key, checks
 * bearer tokens (personal tokens it knows, installation tokens it issued), verifies app JWTs
 * (RS256 against the app's public key, iss, lifetime ≤ 10 min), requires a User-Agent, enforces
 * the secret-name rules, and answers with the host's error shape `{message, documentation_url}`.
 */
import * as nacl from "tweetnacl";
import { base64ToBytes, base64UrlToBytes, bytesToBase64 } from "../../src/core/encoding";
import { openSealed } from "../../src/engines/sync/providers/repohost/sealed-box";
import { FakeThrottle } from "./fake-limits";
import { applyFault, json, type Fault } from "./fake-router";

const RSA = { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" } as const;

function err(status: number, message: string, headers: Record<string, string> = {}): Response {
  return json({ message, documentation_url: "https://docs.github.com/rest" }, status, headers);
}

interface Scope {
  keyId: string;
  keyPair: nacl.BoxKeyPair;
  /** Plaintext values, as opened from the sealed boxes. */
  secrets: Map<string, string>;
  /** created_at / updated_at per name, ISO 8601 to the second as the host shows them. */
  times: Map<string, { created_at: string; updated_at: string }>;
}

/** The host's timestamps: ISO 8601 without fractional seconds. */
const stamp = (ms = Date.now()) => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

export class FakeRepohost {
  readonly tokens = new Set<string>();
  private readonly apps = new Map<string, CryptoKey>();
  private readonly installationTokens = new Map<string, number>();

  /** Forgets every access token issued so far (as a provider does on revocation): they now get 401. */
  revokeIssuedTokens(): void {
    this.installationTokens.clear();
  }
  private readonly scopes = new Map<string, Scope>();
  readonly faults: Fault[] = [];
  tokenRequests = 0;
  readonly calls: string[] = [];
  /**
   * Request limits (docs/secrets-sync.md "4. Provider limits are respected"). Over them the host answers as its secondary rate limit
   * does: 403 (or 429 with `rateLimitStatus`) with `retry-after`; with `rateLimitStyle`
   * "primary" it answers 403 with `x-ratelimit-remaining: 0` and `x-ratelimit-reset` instead.
   */
  readonly throttle = new FakeThrottle();
  rateLimitStatus: 403 | 429 = 403;
  rateLimitStyle: "secondary" | "primary" = "secondary";

  constructor(tokens: string[] = []) {
    for (const t of tokens) this.tokens.add(t);
  }

  /** Registers an app by id with the public half of its PKCS#8 private key. */
  async addApp(appId: number, pkcs8: Uint8Array<ArrayBuffer>): Promise<void> {
    const priv = await crypto.subtle.importKey("pkcs8", pkcs8, RSA, true, ["sign"]);
    const jwk = (await crypto.subtle.exportKey("jwk", priv)) as JsonWebKey;
    this.apps.set(String(appId), await crypto.subtle.importKey("jwk", { kty: "RSA", n: jwk.n, e: jwk.e }, RSA, false, ["verify"]));
  }

  private scope(path: string): Scope {
    let s = this.scopes.get(path);
    if (!s) {
      s = { keyId: String(Math.floor(Math.random() * 1e18)), keyPair: nacl.box.keyPair(), secrets: new Map(), times: new Map() };
      this.scopes.set(path, s);
    }
    return s;
  }

  private static scopePath(where: string): string {
    const [owner, repo, env] = where.split("/");
    return env ? `/repos/${owner}/${repo}/environments/${env}/secrets` : `/repos/${owner}/${repo}/actions/secrets`;
  }

  /** The plaintext of a secret: "<owner>/<repo>" or "<owner>/<repo>/<environment>". */
  value(where: string, name: string): string | undefined {
    return this.scopes.get(FakeRepohost.scopePath(where))?.secrets.get(name.toUpperCase());
  }

  /** The host's updated_at of a secret (what its metadata read shows). */
  updatedAt(where: string, name: string): string | undefined {
    return this.scopes.get(FakeRepohost.scopePath(where))?.times.get(name.toUpperCase())?.updated_at;
  }

  /**
   * Someone sets the secret in the host's UI, not through Lanyard. `at` sets updated_at (the
   * host keeps seconds only: an edit within the second of Lanyard's write shows the same time).
   */
  editOutOfBand(where: string, name: string, value: string, at = Date.now()): void {
    const scope = this.scope(FakeRepohost.scopePath(where));
    const upper = name.toUpperCase();
    scope.secrets.set(upper, value);
    scope.times.set(upper, { created_at: scope.times.get(upper)?.created_at ?? stamp(at), updated_at: stamp(at) });
  }

  /** Someone deletes the secret at the host. */
  deleteOutOfBand(where: string, name: string): void {
    const scope = this.scope(FakeRepohost.scopePath(where));
    if (!scope.secrets.delete(name.toUpperCase())) throw new Error(`fake-repohost: no secret ${name} in ${where}`);
    scope.times.delete(name.toUpperCase());
  }

  /** Every scope's opened values (for inspection in manual runs). */
  state(): Record<string, Record<string, string>> {
    return Object.fromEntries([...this.scopes].map(([path, s]) => [path, Object.fromEntries(s.secrets)]));
  }

  private async verifyAppJwt(jwt: string): Promise<boolean> {
    const [h, p, sig] = jwt.split(".");
    if (!h || !p || !sig) return false;
    const claims = JSON.parse(new TextDecoder().decode(base64UrlToBytes(p))) as { iss?: unknown; iat?: number; exp?: number };
    const key = this.apps.get(String(claims.iss));
    if (!key || typeof claims.iat !== "number" || typeof claims.exp !== "number") return false;
    const now = Date.now() / 1000;
    if (claims.exp - claims.iat > 600 || claims.exp < now || claims.iat > now + 60) return false;
    return crypto.subtle.verify("RSASSA-PKCS1-v1_5", key, base64UrlToBytes(sig), new TextEncoder().encode(`${h}.${p}`));
  }

  async handle(req: Request): Promise<Response> {
    const faulted = applyFault(this.faults);
    if (faulted) return faulted;
    if (!req.headers.get("user-agent")) return err(403, "Request forbidden by administrative rules. Please make sure your request has a User-Agent header");
    const url = new URL(req.url);
    const bearer = /^Bearer (.+)$/.exec(req.headers.get("authorization") ?? "")?.[1] ?? "";
    this.calls.push(`${req.method} ${url.pathname}`);
    const inst = /^\/app\/installations\/(\d+)\/access_tokens$/.exec(url.pathname);
    if (inst && req.method === "POST") {
      if (!(await this.verifyAppJwt(bearer))) return err(401, "A JSON web token could not be decoded");
      this.tokenRequests++;
      const token = `ghs_${crypto.randomUUID().replace(/-/g, "")}`;
      const expires = Date.now() + 3_600_000;
      this.installationTokens.set(token, expires);
      return json({ token, expires_at: new Date(expires).toISOString(), permissions: { secrets: "write" }, repository_selection: "all" }, 201);
    }
    const exp = this.installationTokens.get(bearer);
    if (!this.tokens.has(bearer) && !(exp !== undefined && exp > Date.now())) return err(401, "Bad credentials");
    const admission = this.throttle.enter(req, `${req.method} ${url.pathname}`);
    try {
      if (admission.throttled) {
        if (this.rateLimitStyle === "primary") {
          const reset = String(Math.ceil(Date.now() / 1000) + admission.retryAfter);
          return err(403, "API rate limit exceeded for installation.", { "x-ratelimit-limit": "5000", "x-ratelimit-remaining": "0", "x-ratelimit-used": "5000", "x-ratelimit-reset": reset, "x-ratelimit-resource": "core" });
        }
        return err(this.rateLimitStatus, "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.", { "retry-after": String(admission.retryAfter) });
      }
      return await this.secretsApi(req, url);
    } finally {
      admission.leave();
    }
  }

  private async secretsApi(req: Request, url: URL): Promise<Response> {
    const m = /^(\/repos\/[^/]+\/[^/]+\/(?:actions|environments\/[^/]+)\/secrets)(?:\/([^/]+))?$/.exec(url.pathname);
    if (!m) return err(404, "Not Found");
    const [, base = "", name] = m;
    const scope = this.scope(base);
    if (name === "public-key" && req.method === "GET") return json({ key_id: scope.keyId, key: bytesToBase64(scope.keyPair.publicKey) });
    if (!name) return req.method === "GET" ? json({ total_count: scope.secrets.size, secrets: [...scope.secrets.keys()].map((n) => ({ name: n, ...scope.times.get(n) })) }) : err(404, "Not Found");
    const upper = decodeURIComponent(name).toUpperCase();
    if (req.method === "GET") {
      const times = scope.times.get(upper);
      return times && scope.secrets.has(upper) ? json({ name: upper, ...times }) : err(404, "Not Found");
    }
    if (req.method === "PUT") {
      if (!/^[A-Z_][A-Z0-9_]*$/.test(upper) || upper.startsWith("GITHUB_")) return err(422, "Secret names can only contain alphanumeric characters ([a-z], [A-Z], [0-9]) or underscores (_).");
      const b = (await req.json()) as { encrypted_value?: unknown; key_id?: unknown };
      if (b.key_id !== scope.keyId) return err(422, "Bad key_id");
      if (typeof b.encrypted_value !== "string") return err(422, "encrypted_value is required");
      const opened = openSealed(base64ToBytes(b.encrypted_value), scope.keyPair.publicKey, scope.keyPair.secretKey);
      if (!opened) return err(422, "Bad encrypted_value: could not decrypt");
      const existed = scope.secrets.has(upper);
      scope.secrets.set(upper, new TextDecoder().decode(opened));
      scope.times.set(upper, { created_at: scope.times.get(upper)?.created_at ?? stamp(), updated_at: stamp() });
      return new Response(existed ? null : "{}", { status: existed ? 204 : 201 });
    }
    if (req.method === "DELETE") {
      if (!scope.secrets.delete(upper)) return err(404, "Not Found");
      scope.times.delete(upper);
      return new Response(null, { status: 204 });
    }
    return err(404, "Not Found");
  }
}

export const REPOHOST_HOSTS = ["api.github.com"];
