/**
 * The JWT auth method's pure parts (src/auth/methods/jwt/): cap's time rules and leeways,
 * iss/sub/aud, bound claims (string and whole-value glob, lists, JSON pointers), claim mappings,
 * the user and groups claims; the algorithm rules and signature check; the JWKS cache and its
 * refetch rules, with an injected fetch and clock. Plain Node (WebCrypto + jose).
 */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/core/errors";
import {
  checkBoundClaimsForWrite,
  checkClaimMappings,
  checkUnboundAudience,
  claimMetadata,
  getClaim,
  groupNames,
  userClaimValue,
  validateBoundClaims,
  validateRegistered,
  type Claims,
  type Expected,
} from "../../src/auth/methods/jwt/claims";
import { checkPemKey, RemoteKeyCache, type KeyCacheOptions, type RemoteSource } from "../../src/auth/methods/jwt/keys";
import { verifyJwt, type KeySet } from "../../src/auth/methods/jwt/verify";
import { signedDuration } from "../../src/auth/methods/jwt/role";
import { generateKey, hmacJwt, jwksOf, signJwt, unsecuredJwt, type TestAlg, type TestKey } from "../helpers/jwt-issuer";

const NOW = 1_700_000_000; // seconds
const NOW_MS = NOW * 1000;

/** The message of the ApiError `fn` throws (fails the test when it throws nothing or something else). */
function errorOf(fn: () => unknown): string {
  try {
    fn();
  } catch (e) {
    if (e instanceof ApiError) return `${e.status} ${e.messages.join("; ")}`;
    throw e;
  }
  throw new Error("expected an ApiError");
}

async function asyncErrorOf(p: Promise<unknown>): Promise<string> {
  try {
    await p;
  } catch (e) {
    if (e instanceof ApiError) return `${e.status} ${e.messages.join("; ")}`;
    throw e;
  }
  throw new Error("expected an ApiError");
}

const expected = (over: Partial<Expected> = {}): Expected => ({
  issuer: "",
  subject: "",
  audiences: [],
  leeways: { clockSkew: 0, expiration: 0, notBefore: 0 },
  ...over,
});
const leeways = (clockSkew: number, expiration = 0, notBefore = 0) => expected({ leeways: { clockSkew, expiration, notBefore } });
const check = (claims: Claims, exp: Expected = expected()) => () => validateRegistered(claims, exp, NOW_MS);

describe("time claims and leeways (cap Validate)", () => {
  it("accepts a current token and needs at least one of iat, nbf, exp", () => {
    expect(check({ iat: NOW, nbf: NOW, exp: NOW + 60 })).not.toThrow();
    expect(errorOf(check({ sub: "x" }))).toBe(
      "400 error validating token: no issued at (iat), not before (nbf), or expiration time (exp) claims in token",
    );
  });

  it("applies only clock_skew_leeway to exp: 60 s by default, -1 for none, a value as given", () => {
    expect(check({ exp: NOW - 59 })).not.toThrow();
    expect(errorOf(check({ exp: NOW - 61 }))).toBe("400 error validating token: invalid expiration time (exp) claim: token is expired");
    expect(errorOf(check({ exp: NOW - 1 }, leeways(-1)))).toContain("token is expired");
    expect(check({ exp: NOW - 200 }, leeways(300))).not.toThrow();
    // expiration_leeway does not stretch an exp the token has.
    expect(errorOf(check({ exp: NOW - 61 }, leeways(0, 1000)))).toContain("token is expired");
  });

  it("checks nbf and iat against now plus the skew", () => {
    expect(check({ nbf: NOW + 59, exp: NOW + 600 })).not.toThrow();
    expect(errorOf(check({ nbf: NOW + 61, exp: NOW + 600 }))).toBe("400 error validating token: invalid not before (nbf) claim: token not yet valid");
    expect(errorOf(check({ iat: NOW + 61, nbf: NOW, exp: NOW + 600 }))).toBe(
      "400 error validating token: invalid issued at (iat) claim: token issued in the future",
    );
    expect(errorOf(check({ iat: NOW + 5, exp: NOW + 600 }, leeways(-1)))).toContain("token not yet valid");
  });

  it("invents a missing exp as max(iat, nbf) + expiration_leeway (0 = 150 s, -1 = 0)", () => {
    // exp = iat + 150; expired once now - 60 > exp.
    expect(check({ iat: NOW - 200 })).not.toThrow();
    expect(errorOf(check({ iat: NOW - 211 }))).toContain("token is expired");
    expect(check({ iat: NOW - 1000 }, leeways(0, 2000))).not.toThrow();
    expect(errorOf(check({ iat: NOW - 61 }, leeways(0, -1)))).toContain("token is expired");
    // The later of iat and nbf counts.
    expect(check({ iat: NOW - 1000, nbf: NOW - 100 })).not.toThrow();
  });

  it("invents a missing nbf as iat, else exp - not_before_leeway (0 = 150 s, -1 = 0)", () => {
    expect(check({ exp: NOW + 200 })).not.toThrow(); // nbf = now + 50, inside the skew
    expect(errorOf(check({ exp: NOW + 300 }))).toContain("token not yet valid"); // nbf = now + 150
    expect(check({ exp: NOW + 300 }, leeways(0, 0, 1000))).not.toThrow();
    expect(check({ exp: NOW + 3000 }, leeways(0, 0, -1))).toThrow(/token not yet valid/);
  });

  it("refuses time claims that are not numbers", () => {
    expect(errorOf(check({ exp: "tomorrow" }))).toBe("400 error validating token: invalid exp claim: expected a number of seconds");
  });

  it("signed durations parse for the leeway fields", () => {
    expect(signedDuration("clock_skew_leeway", -1)).toBe(-1);
    expect(signedDuration("clock_skew_leeway", "-1")).toBe(-1);
    expect(signedDuration("clock_skew_leeway", "2m")).toBe(120);
    expect(errorOf(() => signedDuration("clock_skew_leeway", "soon"))).toContain('field "clock_skew_leeway"');
  });
});

describe("iss, sub and aud", () => {
  const base = { iat: NOW, exp: NOW + 60 };
  it("checks bound_issuer and bound_subject only when set", () => {
    expect(check({ ...base, iss: "https://a" }, expected({ issuer: "https://a", subject: "" }))).not.toThrow();
    expect(errorOf(check({ ...base, iss: "https://b" }, expected({ issuer: "https://a" })))).toBe("400 error validating token: invalid issuer (iss) claim");
    expect(errorOf(check(base, expected({ issuer: "https://a" })))).toContain("invalid issuer");
    expect(errorOf(check({ ...base, sub: "u2" }, expected({ subject: "u1" })))).toBe("400 error validating token: invalid subject (sub) claim");
    expect(check({ ...base, iss: "anything", sub: "anyone" })).not.toThrow();
  });

  it("needs one bound audience in aud, a string or a list", () => {
    const e = expected({ audiences: ["api", "other"] });
    expect(check({ ...base, aud: "api" }, e)).not.toThrow();
    expect(check({ ...base, aud: ["x", "other"] }, e)).not.toThrow();
    expect(errorOf(check({ ...base, aud: ["x"] }, e))).toBe(
      "400 error validating token: invalid audience (aud) claim: audience claim does not match any expected audience",
    );
    expect(errorOf(check(base, e))).toContain("audience claim does not match");
  });

  it("a role without bound audiences refuses a token that has one", () => {
    expect(errorOf(() => checkUnboundAudience({ aud: ["x"] }, []))).toBe("400 audience claim found in JWT but no audiences bound to the role");
    expect(errorOf(() => checkUnboundAudience({ aud: "x" }, []))).toContain("no audiences bound");
    expect(() => checkUnboundAudience({}, [])).not.toThrow();
    expect(() => checkUnboundAudience({ aud: [] }, [])).not.toThrow();
    expect(() => checkUnboundAudience({ aud: "x" }, ["x"])).not.toThrow();
  });
});

describe("claims: pointers, bound claims, mappings, user and groups", () => {
  const k8s: Claims = {
    sub: "system:serviceaccount:prod:deployer",
    "kubernetes.io": { namespace: "prod", serviceaccount: { name: "deployer" }, "a/b": "slash", "t~": "tilde" },
    groups: ["ops", "", "dev"],
    repository: "org/app",
    run: 42,
    admin: true,
  };

  it("reads JSON pointers into nested claims (RFC 6901)", () => {
    expect(getClaim(k8s, "/kubernetes.io/namespace")).toBe("prod");
    expect(getClaim(k8s, "/kubernetes.io/serviceaccount/name")).toBe("deployer");
    expect(getClaim(k8s, "/kubernetes.io/a~1b")).toBe("slash");
    expect(getClaim(k8s, "/kubernetes.io/t~0")).toBe("tilde");
    expect(getClaim(k8s, "/groups/2")).toBe("dev");
    expect(getClaim(k8s, "/groups/9")).toBeUndefined();
    expect(getClaim(k8s, "/kubernetes.io/missing/deeper")).toBeUndefined();
    expect(getClaim(k8s, "kubernetes.io")).toEqual(k8s["kubernetes.io"]);
    expect(getClaim(k8s, "toString")).toBeUndefined();
  });

  it("string bound claims match on value and type", () => {
    expect(() => validateBoundClaims("string", { "/kubernetes.io/namespace": "prod", repository: ["x", "org/app"] }, k8s)).not.toThrow();
    expect(() => validateBoundClaims("string", { groups: "dev" }, k8s)).not.toThrow(); // a list claim holds the value
    expect(() => validateBoundClaims("string", { run: 42, admin: true }, k8s)).not.toThrow();
    expect(errorOf(() => validateBoundClaims("string", { run: "42" }, k8s))).toBe(
      '400 error validating claims: claim "run" does not match any associated bound claim values',
    );
    expect(errorOf(() => validateBoundClaims("string", { "/kubernetes.io/namespace": "dev" }, k8s))).toContain("does not match");
    expect(errorOf(() => validateBoundClaims("string", { environment: "prod" }, k8s))).toBe('400 error validating claims: claim "environment" is missing');
    expect(errorOf(() => validateBoundClaims("string", { "kubernetes.io": "prod" }, k8s))).toBe(
      "400 error validating claims: received claim is not a string or list",
    );
    // Exact means exact: no prefix, no glob.
    expect(() => validateBoundClaims("string", { repository: "org/*" }, k8s)).toThrow(/does not match/);
  });

  it("glob bound claims match the whole value", () => {
    const gh: Claims = { sub: "repo:org/app:ref:refs/heads/main", ref: "refs/heads/main", repository: "org/app-evil", n: 5 };
    expect(() => validateBoundClaims("glob", { sub: "repo:org/app:*" }, gh)).not.toThrow();
    expect(() => validateBoundClaims("glob", { ref: ["refs/tags/*", "refs/heads/main"] }, gh)).not.toThrow();
    expect(() => validateBoundClaims("glob", { sub: "*:ref:refs/heads/*" }, gh)).not.toThrow();
    // No implicit prefix or substring match.
    expect(() => validateBoundClaims("glob", { repository: "org/app" }, gh)).toThrow(/does not match/);
    expect(() => validateBoundClaims("glob", { sub: "org/app" }, gh)).toThrow(/does not match/);
    expect(() => validateBoundClaims("glob", { ref: "refs/heads" }, gh)).toThrow(/does not match/);
    // A non-string claim value never matches a glob.
    expect(() => validateBoundClaims("glob", { n: "*" }, gh)).toThrow(/does not match/);
    expect(errorOf(() => validateBoundClaims("glob", { n: 5 }, gh))).toBe("400 error validating claims: received claim is not a glob string");
  });

  it("role writes: glob values must be strings, mappings may not target role or repeat", () => {
    expect(() => checkBoundClaimsForWrite("glob", { a: ["x*", "y"] })).not.toThrow();
    expect(errorOf(() => checkBoundClaimsForWrite("glob", { a: 5 }))).toBe("400 claim is not a string: 5");
    expect(errorOf(() => checkBoundClaimsForWrite("glob", { a: { b: 1 } }))).toContain("claim is not a string or list");
    expect(() => checkBoundClaimsForWrite("string", { a: 5, b: [true, "x"] })).not.toThrow();
    expect(errorOf(() => checkClaimMappings({ a: "role" }))).toBe('400 metadata key "role" is reserved and may not be a mapping destination');
    expect(errorOf(() => checkClaimMappings({ a: "x", b: "x" }))).toBe('400 multiple keys are mapped to metadata key "x"');
  });

  it("claim_mappings copy scalar claims into metadata and skip missing ones", () => {
    expect(claimMetadata(k8s, { "/kubernetes.io/namespace": "namespace", run: "run", admin: "admin", nope: "nope" })).toEqual({
      namespace: "prod",
      run: "42",
      admin: "true",
    });
    expect(errorOf(() => claimMetadata(k8s, { groups: "g" }))).toBe("400 error converting claim 'groups' to string");
  });

  it("the user claim must be a string; a pointer only when user_claim_json_pointer", () => {
    expect(userClaimValue(k8s, "sub", false)).toBe("system:serviceaccount:prod:deployer");
    expect(userClaimValue(k8s, "/kubernetes.io/serviceaccount/name", true)).toBe("deployer");
    expect(errorOf(() => userClaimValue(k8s, "/kubernetes.io/serviceaccount/name", false))).toBe(
      '400 claim "/kubernetes.io/serviceaccount/name" not found in token',
    );
    expect(errorOf(() => userClaimValue(k8s, "email", false))).toBe('400 claim "email" not found in token');
    expect(errorOf(() => userClaimValue(k8s, "run", false))).toBe('400 claim "run" could not be converted to string');
  });

  it("the groups claim must exist and hold strings", () => {
    expect(groupNames(k8s, "groups")).toEqual(["ops", "dev"]);
    expect(groupNames(k8s, "")).toEqual([]);
    expect(errorOf(() => groupNames(k8s, "teams"))).toBe('400 failed to fetch groups: "teams" claim not found in token');
    expect(errorOf(() => groupNames(k8s, "kubernetes.io"))).toContain("could not be converted to string list");
  });
});

const devEnv = { ENVIRONMENT: "development" } as unknown as Env;
const prodEnv = { ENVIRONMENT: "production" } as unknown as Env;

/** A fake JWKS endpoint: serves the current keys, counts fetches, can fail or hang. */
function jwksEndpoint(initial: TestKey[]) {
  const state = { keys: initial, fetches: 0, fail: 0 as number, hang: false, body: null as string | null, redirectTo: null as string | null };
  const fetchImpl = async (url: string, init: RequestInit): Promise<Response> => {
    state.fetches++;
    if (state.hang) {
      return new Promise<Response>((_, reject) => init.signal?.addEventListener("abort", () => reject(new Error("aborted"))));
    }
    if (state.fail) return new Response("down", { status: state.fail });
    if (state.redirectTo) return new Response(null, { status: 302, headers: { location: state.redirectTo } });
    if (url.endsWith("/.well-known/openid-configuration")) {
      return Response.json({ issuer: url.replace("/.well-known/openid-configuration", ""), jwks_uri: "https://idp.example/jwks" });
    }
    return new Response(state.body ?? JSON.stringify(jwksOf(...state.keys)), { headers: { "content-type": "application/json" } });
  };
  return { state, fetchImpl };
}

function setup(keys: TestKey[], opts: KeyCacheOptions = {}, source: RemoteSource = { kind: "jwks", url: "https://idp.example/jwks" }) {
  const ep = jwksEndpoint(keys);
  const clock = { now: NOW_MS };
  const cache = new RemoteKeyCache({ fetch: ep.fetchImpl, now: () => clock.now, ...opts });
  const keySet: KeySet = { kind: "remote", source, cache };
  const verify = (token: string, algs: string[] = [], env: Env = prodEnv) => verifyJwt(env, token, keySet, algs);
  return { ...ep, clock, cache, verify };
}

const claims = { sub: "svc", iat: NOW };

describe("signature and algorithm rules", () => {
  const algs: TestAlg[] = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "ES512", "EdDSA"];
  it.each(algs)("verifies %s with a JWKS key and with a PEM key", async (alg) => {
    const key = await generateKey(alg);
    const { verify } = setup([key]);
    const token = await signJwt(key, claims);
    expect(await verify(token)).toMatchObject(claims);
    expect(await verifyJwt(prodEnv, token, { kind: "pem", pems: [key.pem] }, [])).toMatchObject(claims);
  });

  it("never accepts alg none, HS256 keyed with the public key, or an algorithm outside jwt_supported_algs", async () => {
    const rsa = await generateKey("RS256");
    const { verify, state } = setup([rsa]);
    const none = unsecuredJwt(claims, { kid: rsa.kid });
    const msg = "400 error validating token: invalid algorithm (alg) header parameter: token signed with unexpected algorithm";
    expect(await asyncErrorOf(verify(none))).toBe(msg);
    expect(await asyncErrorOf(verify(none, ["RS256"]))).toBe(msg);
    expect(await asyncErrorOf(verifyJwt(prodEnv, none, { kind: "pem", pems: [rsa.pem] }, []))).toBe(msg);
    const confused = await hmacJwt(rsa.pem, claims, { kid: rsa.kid });
    expect(await asyncErrorOf(verify(confused))).toBe(msg);
    expect(await asyncErrorOf(verify(confused, ["HS256"]))).toBe(msg);
    expect(await asyncErrorOf(verifyJwt(prodEnv, confused, { kind: "pem", pems: [rsa.pem] }, []))).toBe(msg);
    // A valid RS256 token when only ES256 is allowed.
    expect(await asyncErrorOf(verify(await signJwt(rsa, claims), ["ES256"]))).toBe(msg);
    // None of these ever reached the key set.
    expect(state.fetches).toBe(0);
  });

  it("refuses a bad signature, a key of the wrong family and keys not meant for signing", async () => {
    const rsa = await generateKey("RS256");
    const ec = await generateKey("ES256");
    const rogue = await generateKey("RS256");
    const { verify, state } = setup([rsa, ec]);
    const sigFail = "400 error validating token: error verifying token signature: failed to verify id token signature";
    // Signed by a key the issuer never published, claiming a published kid: no refetch, it is not a rotation.
    expect(await asyncErrorOf(verify(await signJwt(rogue, claims, { header: { kid: rsa.kid } })))).toBe(sigFail);
    expect(state.fetches).toBe(1);
    // Tampered payload.
    const [h, , s] = (await signJwt(rsa, claims)).split(".");
    const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: "admin" })).toString("base64url")}.${s}`;
    expect(await asyncErrorOf(verify(forged))).toBe(sigFail);
    // ES256 header pointing at the RSA key.
    expect(await asyncErrorOf(verify(await signJwt(ec, claims, { header: { kid: rsa.kid } })))).toBe(sigFail);
    // use: enc and a mismatching JWK alg disqualify a key.
    const encOnly = setup([rsa]);
    encOnly.state.body = JSON.stringify({ keys: [{ ...rsa.jwk, use: "enc" }] });
    expect(await asyncErrorOf(encOnly.verify(await signJwt(rsa, claims)))).toBe(sigFail);
    const wrongAlg = setup([rsa]);
    wrongAlg.state.body = JSON.stringify({ keys: [{ ...rsa.jwk, alg: "PS256" }] });
    expect(await asyncErrorOf(wrongAlg.verify(await signJwt(rsa, claims)))).toBe(sigFail);
    // PEM keys: cap's message.
    expect(await asyncErrorOf(verifyJwt(prodEnv, await signJwt(rogue, claims), { kind: "pem", pems: [rsa.pem, ec.pem] }, []))).toBe(
      "400 error validating token: error verifying token signature: no known key successfully validated the token signature",
    );
  });

  it("refuses tokens that are not compact JWS with a JSON object payload", async () => {
    const rsa = await generateKey("RS256");
    const { verify } = setup([rsa]);
    expect(await asyncErrorOf(verify("a.b"))).toContain("malformed jwt: expected 3 parts, got 2");
    expect(await asyncErrorOf(verify("a.b.c.d.e"))).toContain("malformed jwt: expected 3 parts, got 5");
    expect(await asyncErrorOf(verify("!!.b.c"))).toContain("malformed jwt: the header is not a JSON object");
    expect(await asyncErrorOf(verify(`${"x".repeat(70_000)}.a.b`))).toContain("token too large");
    const arrayPayload = await (async () => {
      const { CompactSign } = await import("jose");
      return new CompactSign(new TextEncoder().encode("[1]")).setProtectedHeader({ alg: "RS256", kid: rsa.kid }).sign(rsa.privateKey);
    })();
    expect(await asyncErrorOf(verify(arrayPayload))).toBe("400 error validating token: failed to unmarshal claims");
  });

  it("jwt_validation_pubkeys must hold public keys or certificates", async () => {
    const ec = await generateKey("ES384");
    await expect(checkPemKey(ec.pem)).resolves.toBeUndefined();
    await expect(checkPemKey("not a key")).rejects.toThrow("data does not contain any valid public keys");
    await expect(checkPemKey(`${ec.pem}\n${ec.pem}`)).rejects.toThrow("unexpected trailing data after parsed PEM block");
    await expect(checkPemKey("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----")).rejects.toThrow("data does not contain any valid public keys");
  });
});

describe("JWKS cache and refetch rules", () => {
  it("fetches once, then serves logins from the isolate cache until it is an hour old", async () => {
    const key = await generateKey("ES256");
    const { verify, state, clock } = setup([key]);
    const token = await signJwt(key, claims);
    await verify(token);
    await verify(token);
    expect(state.fetches).toBe(1);
    clock.now += 59 * 60 * 1000;
    await verify(token);
    expect(state.fetches).toBe(1);
    clock.now += 2 * 60 * 1000;
    await verify(token);
    expect(state.fetches).toBe(2);
  });

  it("refetches at once for an unknown kid, so a rotated-in key works immediately", async () => {
    const old = await generateKey("RS256");
    const rotated = await generateKey("RS256");
    const { verify, state } = setup([old]);
    await verify(await signJwt(old, claims));
    state.keys = [old, rotated];
    expect(await verify(await signJwt(rotated, claims))).toMatchObject(claims);
    expect(state.fetches).toBe(2);
    // Now cached: no further fetch.
    await verify(await signJwt(rotated, claims));
    expect(state.fetches).toBe(2);
  });

  it("refetches a key-set URL for unknown kids at most once a minute, whatever the kid", async () => {
    const key = await generateKey("RS256");
    const rogue = await generateKey("RS256", "unknown-kid");
    const other = await generateKey("RS256", "other-unknown");
    const { verify, state, clock } = setup([key]);
    const sigFail = "400 error validating token: error verifying token signature: failed to verify id token signature";
    const forged = await signJwt(rogue, claims);
    expect(await asyncErrorOf(verify(forged))).toBe(sigFail);
    expect(state.fetches).toBe(2); // the first load, then one refetch for the unknown kid
    for (let i = 0; i < 5; i++) expect(await asyncErrorOf(verify(forged))).toBe(sigFail);
    // Another unknown kid does not get a refetch of its own: the kid is the caller's to choose.
    expect(await asyncErrorOf(verify(await signJwt(other, claims)))).toBe(sigFail);
    for (let i = 0; i < 5; i++) {
      const fresh = await generateKey("RS256", `forged-${i}`);
      expect(await asyncErrorOf(verify(await signJwt(fresh, claims)))).toBe(sigFail);
    }
    expect(state.fetches).toBe(2);
    // A minute later the set may be refetched again; had the key appeared, it works.
    clock.now += 61 * 1000;
    state.keys = [key, rogue];
    expect(await verify(forged)).toMatchObject(claims);
    expect(state.fetches).toBe(3);
  });

  it("a token without kid that no cached key verifies refetches once a minute too", async () => {
    const key = await generateKey("EdDSA");
    const next = await generateKey("EdDSA");
    const { verify, state } = setup([key]);
    await verify(await signJwt(key, claims, { header: { kid: undefined } }));
    state.keys = [next];
    expect(await verify(await signJwt(next, claims, { header: { kid: undefined } }))).toMatchObject(claims);
    expect(state.fetches).toBe(2);
  });

  it("concurrent logins share one fetch", async () => {
    const key = await generateKey("ES256");
    const { verify, state } = setup([key]);
    const token = await signJwt(key, claims);
    await Promise.all(Array.from({ length: 10 }, () => verify(token)));
    expect(state.fetches).toBe(1);
  });

  it("an endpoint that is down, slow or answers garbage is a 400 error validating token", async () => {
    const key = await generateKey("RS256");
    const token = await signJwt(key, claims);
    const down = setup([key]);
    down.state.fail = 503;
    expect(await asyncErrorOf(down.verify(token))).toBe(
      "400 error validating token: error verifying token signature: fetching keys: jwks_url: idp.example answered HTTP 503",
    );
    const slow = setup([key], { timeoutMs: 50 });
    slow.state.hang = true;
    const started = Date.now();
    expect(await asyncErrorOf(slow.verify(token))).toBe(
      "400 error validating token: error verifying token signature: fetching keys: jwks_url: no answer within 0.05s",
    );
    expect(Date.now() - started).toBeLessThan(5000);
    const garbage = setup([key]);
    garbage.state.body = "<html>";
    expect(await asyncErrorOf(garbage.verify(token))).toContain("fetching keys: jwks_url: the answer is not a JSON document");
    const noKeys = setup([key]);
    noKeys.state.body = JSON.stringify({ keys: "nope" });
    expect(await asyncErrorOf(noKeys.verify(token))).toContain('not a JSON Web Key Set (no "keys" list)');
    const huge = setup([key]);
    huge.state.body = JSON.stringify({ keys: [], pad: "x".repeat(600 * 1024) });
    expect(await asyncErrorOf(huge.verify(token))).toContain("document larger than");
    // The timeout is ten seconds at most by default.
    const { FETCH_TIMEOUT_MS } = await import("../../src/auth/methods/jwt/keys");
    expect(FETCH_TIMEOUT_MS).toBeLessThanOrEqual(10_000);
  });

  it("a refetch that fails after a rotation is a 400, and the cached keys keep working", async () => {
    const key = await generateKey("RS256");
    const rotated = await generateKey("RS256");
    const { verify, state } = setup([key]);
    await verify(await signJwt(key, claims));
    state.fail = 500;
    expect(await asyncErrorOf(verify(await signJwt(rotated, claims)))).toContain("fetching keys: jwks_url: idp.example answered HTTP 500");
    expect(await verify(await signJwt(key, claims))).toMatchObject(claims);
  });

  it("follows the outbound-URL rule: https, loopback http in development only, redirects checked too", async () => {
    const key = await generateKey("RS256");
    const token = await signJwt(key, claims);
    const plain = setup([key], {}, { kind: "jwks", url: "http://127.0.0.1:9999/jwks" });
    expect(await asyncErrorOf(plain.verify(token, [], prodEnv))).toContain("jwks_url: must be an https:// URL");
    expect(plain.state.fetches).toBe(0);
    expect(await plain.verify(token, [], devEnv)).toMatchObject(claims);
    const remoteHttp = setup([key], {}, { kind: "jwks", url: "http://idp.example/jwks" });
    expect(await asyncErrorOf(remoteHttp.verify(token, [], devEnv))).toContain("must be an https:// URL");
    const redirected = setup([key]);
    redirected.state.redirectTo = "http://idp.example/elsewhere";
    expect(await asyncErrorOf(redirected.verify(token))).toContain("jwks_url: must be an https:// URL");
    expect(redirected.state.fetches).toBe(1);
    redirected.state.redirectTo = "https://[bad";
    expect(await asyncErrorOf(redirected.verify(token))).toContain("jwks_url: the redirect target is not a valid URL");
    redirected.state.redirectTo = "https://idp.example/loop";
    expect(await asyncErrorOf(redirected.verify(token))).toContain("jwks_url: too many redirects");
  });

  it("resolves jwks_uri through OIDC discovery, checks the issuer, and caches the result", async () => {
    const key = await generateKey("ES256");
    const token = await signJwt(key, claims);
    const ok = setup([key], {}, { kind: "discovery", url: "https://idp.example" });
    expect(await ok.verify(token)).toMatchObject(claims);
    await ok.verify(token);
    expect(ok.state.fetches).toBe(2); // discovery + JWKS, once each
    const wrong = setup([key], {}, { kind: "discovery", url: "https://idp.example/" });
    expect(await asyncErrorOf(wrong.verify(token))).toContain(
      'oidc_discovery_url: issuer did not match the issuer returned by provider, expected "https://idp.example/" got "https://idp.example"',
    );
    const loaded = await ok.cache.load(prodEnv, { kind: "discovery", url: "https://idp.example" });
    expect(loaded.jwksUrl).toBe("https://idp.example/jwks");
    expect(loaded.keys.map((k) => k.kid)).toEqual([key.kid]);
  });
});
