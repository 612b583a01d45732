/**
 * What a cloud's token service does with a web-identity token from an OIDC issuer it was told to
 * trust (AWS STS AssumeRoleWithWebIdentity, the Microsoft identity platform's federated
 * credentials, Google STS): fetch the issuer's discovery document over HTTP
 * (`<issuer>/.well-known/openid-configuration`, OpenID Connect Discovery 1.0 §4), check that it
 * names the same issuer, fetch its `jwks_uri`, find the token's `kid`, verify the ES256 signature
 * (RFC 7518 §3.4) with WebCrypto, then `iss`, `aud`, `exp` and `nbf` (RFC 7519 §4.1). Independent
 * of Lanyard's code: nothing under src/ is imported. The fakes call it on every exchange (no
 * key-set cache), so a withdrawn key is refused at once.
 */

export type Fetcher = (url: string) => Promise<Response>;

export interface VerifiedIdentity {
  iss: string;
  sub: string;
  aud: string[];
  exp: number;
  jti: string;
  kid: string;
}

/** Why a token was refused: `kind` is the class of refusal each fake maps to its own error. */
export interface Refusal {
  kind: "malformed" | "issuer" | "discovery" | "unknown-key" | "signature" | "audience" | "expired";
  message: string;
}

function b64url(s: string): Uint8Array<ArrayBuffer> {
  const b64 = s.replace(/-/g, "+").replace(/_/g, "/").padEnd(Math.ceil(s.length / 4) * 4, "=");
  return Uint8Array.from(atob(b64), (c) => c.charCodeAt(0));
}

function jsonPart(s: string): Record<string, unknown> | null {
  try {
    const v: unknown = JSON.parse(new TextDecoder().decode(b64url(s)));
    return typeof v === "object" && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}

export class OidcTrust {
  /** Discovery and key-set fetches made (each verification fetches both). */
  fetches = 0;
  /** Tokens seen, by jti: a replayed jti is still accepted (the clouds do not require uniqueness), but tests can look. */
  readonly seen: string[] = [];

  constructor(private readonly fetcher: Fetcher = (u) => fetch(u)) {}

  private async getJson(url: string): Promise<Record<string, unknown> | null> {
    this.fetches++;
    const res = await this.fetcher(url);
    if (!res.ok) return null;
    return ((await res.json()) as Record<string, unknown> | null) ?? null;
  }

  /** Verifies `jwt` as a token of `issuer` for one of `audiences`; the claims, or why not. */
  async verify(jwt: string, issuer: string, audiences: readonly string[], now = Date.now() / 1000): Promise<VerifiedIdentity | Refusal> {
    const [h, p, s, extra] = jwt.split(".");
    const header = h ? jsonPart(h) : null;
    const claims = p ? jsonPart(p) : null;
    if (!header || !claims || !s || extra !== undefined) return { kind: "malformed", message: "not a compact JWS" };
    if (claims.iss !== issuer) return { kind: "issuer", message: `issuer ${String(claims.iss)} is not trusted` };
    const doc = await this.getJson(`${issuer}/.well-known/openid-configuration`);
    if (!doc || doc.issuer !== issuer || typeof doc.jwks_uri !== "string") return { kind: "discovery", message: "the issuer's discovery document is missing or names another issuer" };
    const jwks = await this.getJson(doc.jwks_uri);
    const keys = Array.isArray(jwks?.keys) ? (jwks.keys as Record<string, unknown>[]) : [];
    const jwk = keys.find((k) => k.kid === header.kid);
    if (!jwk) return { kind: "unknown-key", message: `no key ${String(header.kid)} in the issuer's key set` };
    if (header.alg !== "ES256" || jwk.kty !== "EC" || jwk.crv !== "P-256") return { kind: "signature", message: "unsupported algorithm" };
    const key = await crypto.subtle.importKey("jwk", { kty: "EC", crv: "P-256", x: String(jwk.x), y: String(jwk.y) }, { name: "ECDSA", namedCurve: "P-256" }, false, ["verify"]);
    const ok = await crypto.subtle.verify({ name: "ECDSA", hash: "SHA-256" }, key, b64url(s), new TextEncoder().encode(`${h}.${p}`));
    if (!ok) return { kind: "signature", message: "signature verification failed" };
    const aud = typeof claims.aud === "string" ? [claims.aud] : Array.isArray(claims.aud) ? claims.aud.map(String) : [];
    if (!aud.some((a) => audiences.includes(a))) return { kind: "audience", message: `audience ${aud.join(",")} is not accepted` };
    const exp = typeof claims.exp === "number" ? claims.exp : 0;
    const nbf = typeof claims.nbf === "number" ? claims.nbf : 0;
    if (exp <= now) return { kind: "expired", message: "token is expired" };
    if (nbf > now + 60) return { kind: "expired", message: "token is not yet valid" };
    const jti = typeof claims.jti === "string" ? claims.jti : "";
    this.seen.push(jti);
    return { iss: issuer, sub: String(claims.sub), aud, exp, jti, kid: String(header.kid) };
  }
}

export const isRefusal = (v: VerifiedIdentity | Refusal): v is Refusal => "kind" in v;
