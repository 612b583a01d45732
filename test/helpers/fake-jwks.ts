/**
 * A fake token issuer's web side for the JWT auth method's tests: it serves a JWKS document and
 * an OpenID Connect discovery document (`<issuer path>/.well-known/openid-configuration` naming
 * the JWKS as `jwks_uri`), counts the fetches, and can fail on demand (an HTTP status, a timeout,
 * or hanging until the caller gives up). A FakeProvider: the Workers-pool tests route to it with
 * installFakes (./fake-router.ts); e2e and manual runs serve it over HTTP with
 * ./fake-jwks-http.ts. Runs in Node and workerd.
 */
import { applyFault, json, type FakeProvider, type Fault } from "./fake-router";
import { jwksOf, type TestKey } from "./jwt-issuer";

export interface FakeJwksOptions {
  /** The issuer URL the discovery document announces; default: the origin the request came to. */
  issuer?: string;
  /** Path of the JWKS document (default "/keys"). */
  jwksPath?: string;
}

export class FakeJwks implements FakeProvider {
  keys: TestKey[] = [];
  /** Faults applied to the next requests, in order (any path). */
  faults: (Fault | { kind: "hang" })[] = [];
  /** Paths requested, in order. */
  readonly hits: string[] = [];
  private readonly issuer?: string;
  readonly jwksPath: string;

  constructor(keys: TestKey[] = [], opts: FakeJwksOptions = {}) {
    this.keys = keys;
    this.issuer = opts.issuer;
    this.jwksPath = opts.jwksPath ?? "/keys";
  }

  /** How many times the JWKS document was fetched. */
  get jwksFetches(): number {
    return this.hits.filter((p) => p === this.jwksPath).length;
  }

  async handle(req: Request): Promise<Response> {
    const url = new URL(req.url);
    this.hits.push(url.pathname);
    const next = this.faults[0];
    if (next?.kind === "hang") {
      this.faults.shift();
      // Answers only when the caller aborts: a JWKS endpoint that never responds.
      return new Promise<Response>((_, reject) => {
        const fail = () => reject(new DOMException("The operation was aborted", "AbortError"));
        if (req.signal.aborted) fail();
        req.signal.addEventListener("abort", fail, { once: true });
      });
    }
    const fault = applyFault(this.faults as Fault[]);
    if (fault) return fault;
    const issuer = this.issuer ?? url.origin;
    // A loop, not /\/+$/: tests store issuer URLs with long runs of "/" (quadratic for the regex).
    let issuerPath = new URL(issuer).pathname;
    while (issuerPath.endsWith("/")) issuerPath = issuerPath.slice(0, -1);
    if (url.pathname === `${issuerPath}/.well-known/openid-configuration`) {
      return json({
        issuer,
        jwks_uri: `${url.origin}${this.jwksPath}`,
        response_types_supported: ["id_token"],
        subject_types_supported: ["public"],
        id_token_signing_alg_values_supported: [...new Set(this.keys.map((k) => k.alg))],
      });
    }
    if (url.pathname === this.jwksPath) return json(jwksOf(...this.keys));
    return json({ error: "not found" }, 404);
  }

  /** What the fake holds (for /__fake/state over HTTP). */
  state(): unknown {
    return { issuer: this.issuer ?? null, jwksPath: this.jwksPath, kids: this.keys.map((k) => k.kid), hits: this.hits.length };
  }
}
