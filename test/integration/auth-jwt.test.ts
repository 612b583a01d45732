/**
 * The JWT auth method through the Worker (Vault API: /auth/jwt), against fake issuers
 * (test/helpers/fake-jwks.ts) reached through the stubbed fetch: config (fetched and checked at
 * write time, the client secret never read back), roles and Vault's write rules, and logins with
 * RS256, ES256 and EdDSA keys whose tokens work; failures with Vault's messages (expired, wrong
 * audience or issuer, bad signature, alg none, HMAC, unknown kid, JWKS down, CIDR binding); a
 * rotated-in key works at once. Both recipes of docs/auth-jwt.md run here as written: GitHub
 * Actions OIDC and Kubernetes service-account tokens. No JWT ever appears in an answer.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, del, list, read, write, type ApiResult } from "../helpers/api";
import { FakeJwks } from "../helpers/fake-jwks";
import { installFakes } from "../helpers/fake-router";
import {
  freshClaims,
  generateKey,
  githubActionsClaims,
  hmacJwt,
  kubernetesClaims,
  nowSeconds,
  signJwt,
  unsecuredJwt,
  type TestKey,
} from "../helpers/jwt-issuer";

const ISSUER = "https://idp.jwks.test";
const JWKS_URL = `${ISSUER}/keys`;
const GITHUB = "https://token.actions.githubusercontent.com";
const K8S_ISSUER = "https://kubernetes.default.svc.cluster.local";
const K8S_JWKS = "https://k8s-api.jwks.test/openid/v1/jwks";

let rs: TestKey;
let es: TestKey;
let ed: TestKey;
let rotated: TestKey;
let ghKey: TestKey;
let k8sKey: TestKey;
const idp = new FakeJwks();
const github = new FakeJwks([], { issuer: GITHUB, jwksPath: "/.well-known/jwks" });
const k8s = new FakeJwks([], { jwksPath: "/openid/v1/jwks" });
const spare = new FakeJwks();
let uninstall: () => void = () => {};

/** Every JWT a test minted: none may appear in any answer. */
const minted: string[] = [];
async function mint(key: TestKey, claims: Record<string, unknown>, header?: Record<string, unknown>): Promise<string> {
  const t = await signJwt(key, claims, { header });
  minted.push(t);
  return t;
}

function expectNoJwt(r: ApiResult): void {
  for (const t of minted) {
    expect(r.text).not.toContain(t);
    expect(r.text).not.toContain(t.split(".")[1]);
  }
}

const login = (mount: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  api("POST", `auth/${mount}/login`, { token: null, body, headers });

function expectError(r: ApiResult, status: number, message: string): void {
  expect(r.status, r.text).toBe(status);
  expect(r.body.errors).toEqual([message]);
  expectNoJwt(r);
}

/** The base claims of the generic issuer's tokens. */
const claims = (over: Record<string, unknown> = {}) => freshClaims({ iss: ISSUER, aud: "lanyard", sub: "svc-1", email: "svc@example.com", team: "payments", ...over });

beforeAll(async () => {
  [rs, es, ed, rotated, ghKey, k8sKey] = await Promise.all([
    generateKey("RS256"),
    generateKey("ES256"),
    generateKey("EdDSA"),
    generateKey("ES256"),
    generateKey("RS256"),
    generateKey("ES256"),
  ]);
  idp.keys = [rs, es, ed];
  github.keys = [ghKey];
  k8s.keys = [k8sKey];
  spare.keys = [rs];
  uninstall = installFakes([
    { hosts: ["idp.jwks.test"], fake: idp },
    { hosts: ["token.actions.githubusercontent.com"], fake: github },
    { hosts: ["k8s-api.jwks.test"], fake: k8s },
    { hosts: [".spare.jwks.test"], fake: spare },
  ]);
  await write("sys/auth/jwt", { type: "jwt" }, {}, 204);
  await write("auth/jwt/config", { jwks_url: JWKS_URL, bound_issuer: ISSUER }, {}, 204);
  await write("auth/jwt/role/svc", {
    role_type: "jwt",
    user_claim: "email",
    bound_audiences: "lanyard",
    claim_mappings: { team: "team", sub: "subject" },
    token_policies: "app-read",
    token_ttl: "20m",
  }, {}, 204);
});
afterAll(() => uninstall());

describe("config", () => {
  it("is fetched at write time and read back whole, without the client secret", async () => {
    const before = idp.jwksFetches;
    await write("sys/auth/jwt-cfg", { type: "jwt" }, {}, 204);
    await read("auth/jwt-cfg/config", {}, 404);
    await write("auth/jwt-cfg/config", { jwks_url: JWKS_URL, bound_issuer: ISSUER, jwt_supported_algs: "RS256,ES256", default_role: "Deploy" }, {}, 204);
    expect(idp.jwksFetches).toBe(before + 1);
    const r = await read("auth/jwt-cfg/config");
    expect(r.body.data).toMatchObject({
      jwks_url: JWKS_URL,
      jwks_ca_pem: "",
      bound_issuer: ISSUER,
      jwt_supported_algs: ["RS256", "ES256"],
      jwt_validation_pubkeys: [],
      oidc_discovery_url: "",
      default_role: "deploy",
      namespace_in_state: true,
    });
    expect(r.body.data).not.toHaveProperty("oidc_client_secret");
    // A write replaces the whole config.
    await write("auth/jwt-cfg/config", { jwt_validation_pubkeys: [rs.pem] }, {}, 204);
    expect((await read("auth/jwt-cfg/config")).body.data).toMatchObject({ jwks_url: "", bound_issuer: "", default_role: "", jwt_validation_pubkeys: [rs.pem] });
  });

  it("discovery with an OIDC client: the secret is stored sealed and never read back", async () => {
    await write("sys/auth/jwt-oidc", { type: "oidc" }, {}, 204);
    const secret = "client-secret-value-9f8e7d";
    // 200: warnings name the browser flow's fields (stored, not served).
    const w = await write("auth/jwt-oidc/config", { oidc_discovery_url: GITHUB, oidc_client_id: "lanyard", oidc_client_secret: secret }, {}, 200);
    expect(w.text).not.toContain(secret);
    const r = await read("auth/jwt-oidc/config");
    expect(r.body.data).toMatchObject({ oidc_discovery_url: GITHUB, oidc_client_id: "lanyard" });
    expect(r.text).not.toContain(secret);
  });

  it("refuses bad configs with Vault's messages", async () => {
    await write("sys/auth/jwt-bad", { type: "jwt" }, {}, 204);
    const cfg = (body: Record<string, unknown>) => api("POST", "auth/jwt-bad/config", { body });
    const one = "exactly one of 'jwt_validation_pubkeys', 'jwks_url' or 'oidc_discovery_url' must be set";
    expectError(await cfg({}), 400, one);
    expectError(await cfg({ jwks_url: JWKS_URL, jwt_validation_pubkeys: rs.pem }), 400, one);
    expectError(await cfg({ jwks_url: JWKS_URL, oidc_client_id: "x" }), 400, "both 'oidc_client_id' and 'oidc_client_secret' must be set for OIDC");
    expectError(await cfg({ jwks_url: JWKS_URL, oidc_client_id: "x", oidc_client_secret: "y" }), 400, "'oidc_discovery_url' must be set for OIDC");
    expectError(await cfg({ jwt_validation_pubkeys: "garbage" }), 400, "error parsing public key: data does not contain any valid public keys");
    expectError(await cfg({ jwks_url: JWKS_URL, jwt_supported_algs: "RS256,HS256" }), 400, 'invalid jwt_supported_algs: unsupported signing algorithm "HS256"');
    expectError(await cfg({ jwks_url: JWKS_URL, jwt_supported_algs: "none" }), 400, 'invalid jwt_supported_algs: unsupported signing algorithm "none"');
    expectError(await cfg({ jwks_url: JWKS_URL, jwks_ca_pem: "not a pem" }), 400, "error checking jwks_ca_pem: could not parse any certificates from the PEM data");
    idp.faults.push({ kind: "status", status: 503 });
    expectError(await cfg({ jwks_url: JWKS_URL }), 400, `error checking jwks URL ${JWKS_URL}: jwks_url: idp.jwks.test answered HTTP 503`);
    idp.faults.push({ kind: "timeout" });
    expectError(await cfg({ jwks_url: JWKS_URL }), 400, `error checking jwks URL ${JWKS_URL}: jwks_url: idp.jwks.test could not be reached`);
    const plain = await cfg({ jwks_url: "http://idp.jwks.test/keys" });
    expect(plain.status).toBe(400);
    expect(plain.body.errors[0]).toContain("jwks_url: must be an https:// URL");
    // The discovery document must name the configured issuer exactly.
    const wrongIssuer = await cfg({ oidc_discovery_url: `${GITHUB}/` });
    expect(wrongIssuer.status).toBe(400);
    expect(wrongIssuer.body.errors[0]).toMatch(/^error checking oidc discovery URL: oidc_discovery_url: issuer did not match/);
    await read("auth/jwt-bad/config", {}, 404);
  });
});

describe("roles", () => {
  const role = (name: string, body: Record<string, unknown>) => api("POST", `auth/jwt/role/${name}`, { body });

  it("reads back Vault's fields with their defaults, and LIST names the roles", async () => {
    const r = await read("auth/jwt/role/svc");
    expect(r.body.data).toMatchObject({
      role_type: "jwt",
      user_claim: "email",
      user_claim_json_pointer: false,
      bound_audiences: ["lanyard"],
      bound_subject: "",
      bound_claims_type: "string",
      bound_claims: null,
      claim_mappings: { team: "team", sub: "subject" },
      groups_claim: "",
      clock_skew_leeway: 0,
      expiration_leeway: 0,
      not_before_leeway: 0,
      allowed_redirect_uris: [],
      token_policies: ["app-read"],
      policies: ["app-read"],
      token_ttl: 1200,
      token_bound_cidrs: [],
    });
    expect((await list("auth/jwt/role")).body.data.keys).toContain("svc");
  });

  it("keeps Vault's write rules: role_type oidc by default, a user claim, a bound constraint", async () => {
    expectError(await role("r1", { user_claim: "sub", bound_audiences: "x" }), 400, "'allowed_redirect_uris' must be set if 'role_type' is 'oidc' or unspecified.");
    expectError(await role("r1", { role_type: "jwt", bound_audiences: "x" }), 400, "a user claim must be defined on the role");
    expectError(await role("r1", { role_type: "jwt", user_claim: "sub" }), 400, "must have at least one bound constraint when creating/updating a role");
    expectError(await role("r1", { role_type: "saml", user_claim: "sub" }), 400, "invalid 'role_type': saml");
    expectError(await role("r1", { role_type: "jwt", user_claim: "sub", bound_subject: "x", bound_claims_type: "regex" }), 400, "invalid 'bound_claims_type': regex");
    expectError(await role("r1", { role_type: "jwt", user_claim: "sub", bound_claims_type: "glob", bound_claims: { n: 5 } }), 400, "claim is not a string: 5");
    expectError(await role("r1", { role_type: "jwt", user_claim: "sub", bound_subject: "x", claim_mappings: { a: "role" } }), 400, 'metadata key "role" is reserved and may not be a mapping destination');
    expectError(await role("r1", { role_type: "jwt", user_claim: "sub", bound_subject: "x", claim_mappings: { a: "k", b: "k" } }), 400, 'multiple keys are mapped to metadata key "k"');
    expect((await role("r1", { role_type: "jwt", user_claim: "sub", bound_subject: "x", clock_skew_leeway: "x" })).body.errors[0]).toContain('field "clock_skew_leeway"');
    await read("auth/jwt/role/r1", {}, 404);
  });

  it("an update that omits role_type turns a jwt role into oidc, as Vault does (and fails without redirect URIs)", async () => {
    await write("auth/jwt/role/flip", { role_type: "jwt", user_claim: "sub", bound_subject: "svc-1", expiration_leeway: -1 }, {}, 204);
    expectError(await role("flip", { bound_subject: "svc-2" }), 400, "'allowed_redirect_uris' must be set if 'role_type' is 'oidc' or unspecified.");
    expect((await read("auth/jwt/role/flip")).body.data).toMatchObject({ role_type: "jwt", bound_subject: "svc-1", expiration_leeway: -1 });
    // 200: the answer warns that an oidc role cannot log in here.
    await write("auth/jwt/role/flip", { allowed_redirect_uris: "https://app.example/cb" }, {}, 200);
    expect((await read("auth/jwt/role/flip")).body.data.role_type).toBe("oidc");
    expectError(await login("jwt", { role: "flip", jwt: await mint(rs, claims()) }), 400, "role with oidc role_type is not allowed");
    await del("auth/jwt/role/flip");
    await read("auth/jwt/role/flip", {}, 404);
  });
});

describe("login", () => {
  it.each([
    ["RS256", () => rs],
    ["ES256", () => es],
    ["EdDSA", () => ed],
  ])("a %s token logs in; the token works and carries the role and mapped claims", async (_alg, key) => {
    const jwt = await mint(key(), claims());
    const r = await login("jwt", { role: "svc", jwt });
    expect(r.status, r.text).toBe(200);
    expectNoJwt(r);
    const auth = r.body.auth;
    expect(auth).toMatchObject({ policies: ["app-read", "default"], token_policies: ["app-read", "default"], lease_duration: 1200, renewable: true });
    expect(auth.metadata).toEqual({ role: "svc", team: "payments", subject: "svc-1" });
    const self = await read("auth/token/lookup-self", { token: auth.client_token });
    expect(self.body.data).toMatchObject({ path: "auth/jwt/login", display_name: "jwt-svc@example.com", meta: auth.metadata });
  });

  it("answers Vault's errors before the token is checked", async () => {
    const jwt = await mint(rs, claims());
    expectError(await login("jwt", { jwt }), 400, "missing role");
    expectError(await login("jwt", { role: "nope", jwt }), 400, 'role "nope" could not be found');
    expectError(await login("jwt", { role: "svc" }), 400, "missing token");
    await write("sys/auth/jwt-empty", { type: "jwt" }, {}, 204);
    expectError(await login("jwt-empty", { role: "svc", jwt }), 400, "could not load configuration");
  });

  it("uses the config's default_role when the login names none", async () => {
    await write("sys/auth/jwt-default", { type: "jwt" }, {}, 204);
    await write("auth/jwt-default/config", { jwt_validation_pubkeys: [es.pem], default_role: "svc" }, {}, 204);
    await write("auth/jwt-default/role/svc", { role_type: "jwt", user_claim: "sub", bound_subject: "svc-1", bound_audiences: "lanyard" }, {}, 204);
    const r = await login("jwt-default", { jwt: await mint(es, claims()) });
    expect(r.status, r.text).toBe(200);
    expect(r.body.auth.metadata).toEqual({ role: "svc" });
    // PEM keys: another key's signature fails with cap's message.
    expectError(
      await login("jwt-default", { jwt: await mint(rs, claims()) }),
      400,
      "error validating token: error verifying token signature: no known key successfully validated the token signature",
    );
  });

  it("refuses expired, not-yet-valid, wrong-audience, wrong-issuer and unbound-audience tokens", async () => {
    const now = nowSeconds();
    const cases: [Record<string, unknown>, string][] = [
      [{ exp: now - 120, iat: now - 3600, nbf: now - 3600 }, "error validating token: invalid expiration time (exp) claim: token is expired"],
      [{ nbf: now + 600 }, "error validating token: invalid not before (nbf) claim: token not yet valid"],
      [{ iat: now + 600, nbf: now }, "error validating token: invalid issued at (iat) claim: token issued in the future"],
      [{ aud: "someone-else" }, "error validating token: invalid audience (aud) claim: audience claim does not match any expected audience"],
      [{ iss: "https://evil.example" }, "error validating token: invalid issuer (iss) claim"],
      [{ email: 42 }, 'claim "email" could not be converted to string'],
    ];
    for (const [over, message] of cases) expectError(await login("jwt", { role: "svc", jwt: await mint(rs, claims(over)) }), 400, message);
    const noTimes = { iss: ISSUER, aud: "lanyard", email: "a@b" };
    expectError(
      await login("jwt", { role: "svc", jwt: await mint(rs, noTimes) }),
      400,
      "error validating token: no issued at (iat), not before (nbf), or expiration time (exp) claims in token",
    );
    await write("auth/jwt/role/noaud", { role_type: "jwt", user_claim: "email", bound_subject: "svc-1" }, {}, 204);
    expectError(await login("jwt", { role: "noaud", jwt: await mint(rs, claims()) }), 400, "audience claim found in JWT but no audiences bound to the role");
    expect((await login("jwt", { role: "noaud", jwt: await mint(rs, claims({ aud: undefined })) })).status).toBe(200);
  });

  it("never accepts alg none, HMAC with the public key, or a forged signature", async () => {
    const algMsg = "error validating token: invalid algorithm (alg) header parameter: token signed with unexpected algorithm";
    const none = unsecuredJwt(claims(), { kid: rs.kid });
    const hmac = await hmacJwt(rs.pem, claims(), { kid: rs.kid });
    minted.push(none, hmac);
    expectError(await login("jwt", { role: "svc", jwt: none }), 400, algMsg);
    expectError(await login("jwt", { role: "svc", jwt: hmac }), 400, algMsg);
    const rogue = await generateKey("RS256");
    expectError(
      await login("jwt", { role: "svc", jwt: await mint(rogue, claims(), { kid: rs.kid }) }),
      400,
      "error validating token: error verifying token signature: failed to verify id token signature",
    );
    expectError(await login("jwt", { role: "svc", jwt: "not.a.jwt" }), 400, "error validating token: error verifying token signature: malformed jwt: the header is not a JSON object");
    // jwt_supported_algs narrows the accepted algorithms.
    await write("sys/auth/jwt-es", { type: "jwt" }, {}, 204);
    await write("auth/jwt-es/config", { jwks_url: JWKS_URL, jwt_supported_algs: ["ES256"] }, {}, 204);
    await write("auth/jwt-es/role/svc", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
    expectError(await login("jwt-es", { role: "svc", jwt: await mint(rs, claims()) }), 400, algMsg);
    expect((await login("jwt-es", { role: "svc", jwt: await mint(es, claims()) })).status).toBe(200);
  });

  it("a rotated-in key works at once; unknown kids refetch once a minute, and a JWKS that is down is a 400", async () => {
    await login("jwt", { role: "svc", jwt: await mint(rs, claims()) });
    const before = idp.jwksFetches;
    idp.keys = [rs, es, ed, rotated];
    const r = await login("jwt", { role: "svc", jwt: await mint(rotated, claims()) });
    expect(r.status, r.text).toBe(200);
    expect(idp.jwksFetches).toBe(before + 1);
    // A kid nobody published, within the minute: no further refetch, whatever the kid.
    const stranger = await generateKey("ES256");
    const sigFail = "error validating token: error verifying token signature: failed to verify id token signature";
    expectError(await login("jwt", { role: "svc", jwt: await mint(stranger, claims()) }), 400, sigFail);
    expectError(await login("jwt", { role: "svc", jwt: await mint(await generateKey("ES256"), claims()) }), 400, sigFail);
    expect(idp.jwksFetches).toBe(before + 1);
    // An endpoint that goes down: a new kid's refetch fails with a 400, never a 500 or a token.
    // (Mounts on their own key-set URLs, each with its refetch left.)
    for (const [i, fault, message] of [
      [1, { kind: "status", status: 502 }, "down1.spare.jwks.test answered HTTP 502"],
      [2, { kind: "timeout" }, "down2.spare.jwks.test could not be reached"],
    ] as const) {
      await write(`sys/auth/jwt-flaky${i}`, { type: "jwt" }, {}, 204);
      await write(`auth/jwt-flaky${i}/config`, { jwks_url: `https://down${i}.spare.jwks.test/keys`, bound_issuer: ISSUER }, {}, 204);
      await write(`auth/jwt-flaky${i}/role/svc`, { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
      spare.faults.push(fault);
      expectError(
        await login(`jwt-flaky${i}`, { role: "svc", jwt: await mint(await generateKey("ES256"), claims()) }),
        400,
        `error validating token: error verifying token signature: fetching keys: jwks_url: ${message}`,
      );
      // Cached keys keep working meanwhile.
      expect((await login(`jwt-flaky${i}`, { role: "svc", jwt: await mint(rs, claims()) })).status).toBe(200);
    }
    expect((await login("jwt", { role: "svc", jwt: await mint(es, claims()) })).status).toBe(200);
  });

  it("a JWKS that is down when first needed is a 400", async () => {
    await write("sys/auth/jwt-down", { type: "jwt" }, {}, 204);
    await write("auth/jwt-down/config", { jwks_url: "https://down.spare.jwks.test/keys" }, {}, 204);
    await write("auth/jwt-down/role/svc", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
    // The write primed this isolate's cache; a new kid needs the endpoint.
    spare.faults.push({ kind: "status", status: 500 });
    expectError(
      await login("jwt-down", { role: "svc", jwt: await mint(es, claims()) }),
      400,
      "error validating token: error verifying token signature: fetching keys: jwks_url: down.spare.jwks.test answered HTTP 500",
    );
  });

  it("token_bound_cidrs: only logins from inside them (CF-Connecting-IP), never X-Forwarded-For", async () => {
    await write("auth/jwt/role/cidr", { role_type: "jwt", user_claim: "sub", token_bound_cidrs: "10.0.0.0/8", bound_audiences: "lanyard" }, {}, 204);
    const jwt = await mint(rs, claims());
    expectError(await login("jwt", { role: "cidr", jwt }), 403, "permission denied");
    expectError(await login("jwt", { role: "cidr", jwt }, { "x-forwarded-for": "10.1.2.3", "x-real-ip": "10.1.2.3" }), 403, "permission denied");
    expectError(await login("jwt", { role: "cidr", jwt }, { "cf-connecting-ip": "192.0.2.1" }), 403, "permission denied");
    expect((await login("jwt", { role: "cidr", jwt }, { "cf-connecting-ip": "10.1.2.3" })).status).toBe(200);
  });

  it("deleting the role revokes the tokens it issued", async () => {
    await write("auth/jwt/role/short", { role_type: "jwt", user_claim: "sub", bound_audiences: "lanyard" }, {}, 204);
    const r = await login("jwt", { role: "short", jwt: await mint(ed, claims()) });
    const token = r.body.auth.client_token as string;
    await read("auth/token/lookup-self", { token });
    await del("auth/jwt/role/short");
    expect((await api("GET", "auth/token/lookup-self", { token })).status).toBe(403);
  });
});

describe("recipe: GitHub Actions OIDC (docs/auth-jwt.md)", () => {
  beforeAll(async () => {
    await write("sys/auth/github-actions", { type: "jwt", description: "GitHub Actions OIDC" }, {}, 204);
    await write("auth/github-actions/config", { oidc_discovery_url: GITHUB, bound_issuer: GITHUB }, {}, 204);
    await write("auth/github-actions/role/deploy", {
      role_type: "jwt",
      user_claim: "actor",
      bound_audiences: "https://github.com/acme",
      bound_claims_type: "glob",
      bound_claims: { repository: "acme/app", ref: ["refs/heads/main", "refs/tags/v*"] },
      claim_mappings: { repository: "repository", ref: "ref", sha: "sha" },
      token_policies: "deploy",
      token_ttl: "10m",
      token_max_ttl: "15m",
    }, {}, 204);
  });

  const gh = (over: { repo?: string; ref?: string; audience?: string } = {}) =>
    mint(ghKey, githubActionsClaims({ org: "acme", repo: over.repo ?? "app", ref: over.ref ?? "refs/heads/main", actor: "octocat", audience: over.audience }));

  it("a workflow on main (or a v* tag) of acme/app logs in", async () => {
    const r = await login("github-actions", { role: "deploy", jwt: await gh() });
    expect(r.status, r.text).toBe(200);
    expect(r.body.auth).toMatchObject({ policies: ["default", "deploy"], lease_duration: 600 });
    expect(r.body.auth.metadata).toMatchObject({ role: "deploy", repository: "acme/app", ref: "refs/heads/main" });
    expect((await read("auth/token/lookup-self", { token: r.body.auth.client_token })).body.data.display_name).toBe("github-actions-octocat");
    expect((await login("github-actions", { role: "deploy", jwt: await gh({ ref: "refs/tags/v1.2.0" }) })).status).toBe(200);
  });

  it("another branch, repository or audience does not", async () => {
    expectError(
      await login("github-actions", { role: "deploy", jwt: await gh({ ref: "refs/heads/feature" }) }),
      400,
      'error validating claims: claim "ref" does not match any associated bound claim values',
    );
    expectError(
      await login("github-actions", { role: "deploy", jwt: await gh({ repo: "app-evil" }) }),
      400,
      'error validating claims: claim "repository" does not match any associated bound claim values',
    );
    expectError(
      await login("github-actions", { role: "deploy", jwt: await gh({ audience: "https://github.com/other" }) }),
      400,
      "error validating token: invalid audience (aud) claim: audience claim does not match any expected audience",
    );
    // Same claims signed by a key GitHub never published.
    const forger = await generateKey("RS256", ghKey.kid);
    const forged = await mint(forger, githubActionsClaims({ org: "acme", repo: "app", ref: "refs/heads/main", actor: "octocat" }));
    expectError(await login("github-actions", { role: "deploy", jwt: forged }), 400, "error validating token: error verifying token signature: failed to verify id token signature");
  });
});

describe("recipe: Kubernetes service-account tokens (docs/auth-jwt.md)", () => {
  beforeAll(async () => {
    await write("sys/auth/k8s-jwt", { type: "jwt", description: "Kubernetes service accounts (JWKS)" }, {}, 204);
    await write("auth/k8s-jwt/config", { jwks_url: K8S_JWKS, bound_issuer: K8S_ISSUER }, {}, 204);
    await write("auth/k8s-jwt/role/cert-manager", {
      role_type: "jwt",
      user_claim: "sub",
      bound_audiences: "lanyard",
      bound_claims: { "/kubernetes.io/namespace": "cert-manager", "/kubernetes.io/serviceaccount/name": "cert-manager" },
      claim_mappings: { "/kubernetes.io/namespace": "service_account_namespace", "/kubernetes.io/serviceaccount/name": "service_account_name" },
      token_policies: "pki-issuer",
      token_ttl: "20m",
    }, {}, 204);
    await write("auth/k8s-jwt/role/by-subject", {
      role_type: "jwt",
      user_claim: "sub",
      bound_audiences: "lanyard",
      bound_subject: "system:serviceaccount:cert-manager:cert-manager",
    }, {}, 204);
  });

  const sa = (namespace: string, serviceAccount: string, over: { issuer?: string; audience?: string } = {}) =>
    mint(k8sKey, kubernetesClaims({ namespace, serviceAccount, ...over }));

  it("the cert-manager service account logs in, bound by JSON pointer or by subject", async () => {
    const r = await login("k8s-jwt", { role: "cert-manager", jwt: await sa("cert-manager", "cert-manager") });
    expect(r.status, r.text).toBe(200);
    expect(r.body.auth.policies).toEqual(["default", "pki-issuer"]);
    expect(r.body.auth.metadata).toEqual({ role: "cert-manager", service_account_namespace: "cert-manager", service_account_name: "cert-manager" });
    const self = await read("auth/token/lookup-self", { token: r.body.auth.client_token });
    expect(self.body.data.display_name).toBe("k8s-jwt-system:serviceaccount:cert-manager:cert-manager");
    expect((await login("k8s-jwt", { role: "by-subject", jwt: await sa("cert-manager", "cert-manager") })).status).toBe(200);
  });

  it("another namespace, service account, issuer or audience is refused", async () => {
    expectError(
      await login("k8s-jwt", { role: "cert-manager", jwt: await sa("default", "cert-manager") }),
      400,
      'error validating claims: claim "/kubernetes.io/namespace" does not match any associated bound claim values',
    );
    expectError(await login("k8s-jwt", { role: "by-subject", jwt: await sa("cert-manager", "webhook") }), 400, "error validating token: invalid subject (sub) claim");
    expectError(
      await login("k8s-jwt", { role: "cert-manager", jwt: await sa("cert-manager", "cert-manager", { issuer: "https://other-cluster.example" }) }),
      400,
      "error validating token: invalid issuer (iss) claim",
    );
    expectError(
      await login("k8s-jwt", { role: "cert-manager", jwt: await sa("cert-manager", "cert-manager", { audience: "https://kubernetes.default.svc" }) }),
      400,
      "error validating token: invalid audience (aud) claim: audience claim does not match any expected audience",
    );
  });
});
