/**
 * Machine identities through hvac's helpers, unmodified (docs/auth-methods.md): AppRole end to end,
 * JWT with a key pair generated here and served as a JWKS over loopback HTTP, Kubernetes against
 * the fake TokenReview API (test/helpers/fake-tokenreview.ts) over HTTP. The flow is
 * ./hvac_auth_flow.py; each of its steps is one test here. The e2e Worker runs with
 * ENVIRONMENT=development, so plain http:// to loopback is allowed for JWKS and TokenReview.
 */
import { execFile } from "node:child_process";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { FakeTokenReview, projectedJwt } from "../helpers/fake-tokenreview";
import { serveTokenReview, type ServedTokenReview } from "../helpers/fake-tokenreview-serve";
import { E2E_ROOT_TOKEN } from "./env";

const run = promisify(execFile);

const STEPS = [
  "approle.enable",
  "approle.role",
  "approle.role_id",
  "approle.secret_id",
  "approle.login",
  "approle.wrong_secret",
  "approle.destroy_secret_id",
  "approle.disable_revokes",
  "jwt.configure",
  "jwt.role",
  "jwt.login",
  "jwt.wrong_audience",
  "kubernetes.configure",
  "kubernetes.role",
  "kubernetes.login",
  "kubernetes.wrong_namespace",
] as const;

interface Step {
  name: string;
  ok: boolean;
  error?: string;
}

/** A JWKS server on loopback serving one public key; returns its URL. */
async function serveJwks(jwks: unknown): Promise<{ server: Server; url: string }> {
  const server = createServer((req, res) => {
    if (req.url === "/jwks") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(jwks));
      return;
    }
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/jwks` };
}

describe("hvac auth helpers (python3-hvac, unmodified): approle, jwt, kubernetes", () => {
  let results = new Map<string, Step>();
  let jwks: { server: Server; url: string } | undefined;
  let tokenReview: ServedTokenReview | undefined;

  beforeAll(async () => {
    const issuer = "https://token.actions.githubusercontent.com";
    const { publicKey, privateKey } = await generateKeyPair("RS256");
    jwks = await serveJwks({ keys: [{ ...(await exportJWK(publicKey)), kid: "k1", alg: "RS256", use: "sig" }] });
    const mint = (aud: string) =>
      new SignJWT({ repository: "acme/web", ref: "refs/heads/main", actor: "octocat" })
        .setProtectedHeader({ alg: "RS256", kid: "k1" })
        .setIssuer(issuer)
        .setSubject("repo:acme/web:ref:refs/heads/main")
        .setAudience(aud)
        .setIssuedAt()
        .setExpirationTime("5m")
        .sign(privateKey);

    // The reviewer is itself a service account token (Vault checks that token_reviewer_jwt is a JWT).
    const vaultAuth = { namespace: "kube-system", name: "vault-auth", uid: crypto.randomUUID() };
    const reviewer = projectedJwt(vaultAuth);
    const fake = new FakeTokenReview({ reviewers: [reviewer] });
    fake.addToken(reviewer, vaultAuth);
    const sa = { namespace: "cert-manager", name: "cert-manager", uid: crypto.randomUUID() };
    const other = { namespace: "default", name: "cert-manager", uid: crypto.randomUUID() };
    const k8sJwt = fake.addToken(projectedJwt(sa), sa);
    const otherJwt = fake.addToken(projectedJwt(other), other);
    tokenReview = await serveTokenReview(fake);

    const { stdout, stderr } = await run("/usr/bin/python3", [path.join(import.meta.dirname, "hvac_auth_flow.py")], {
      timeout: 90_000,
      maxBuffer: 16 * 1024 * 1024,
      env: {
        ...process.env,
        LANYARD_ADDR: inject("baseUrl"),
        LANYARD_TOKEN: E2E_ROOT_TOKEN,
        JWKS_URL: jwks.url,
        JWT_ISSUER: issuer,
        JWT_OK: await mint("https://github.com/acme"),
        JWT_WRONG_AUD: await mint("https://github.com/someone-else"),
        K8S_HOST: tokenReview.url,
        K8S_REVIEWER: reviewer,
        K8S_JWT: k8sJwt,
        K8S_JWT_OTHER_NS: otherJwt,
        VAULT_ADDR: "",
        VAULT_TOKEN: "",
        VAULT_NAMESPACE: "",
        NO_PROXY: "127.0.0.1,localhost",
      },
    });
    let out: { steps: Step[] };
    try {
      out = JSON.parse(stdout.trim().split("\n").pop() ?? "");
    } catch {
      throw new Error(`hvac_auth_flow.py printed no JSON result. stdout: ${stdout.slice(0, 2000)} stderr: ${stderr.slice(0, 2000)}`);
    }
    results = new Map(out.steps.map((s) => [s.name, s]));
  }, 120_000);

  afterAll(async () => {
    await new Promise<void>((resolve) => (jwks ? jwks.server.close(() => resolve()) : resolve()));
    await tokenReview?.close();
  });

  it("reports exactly the expected steps", () => {
    expect([...results.keys()]).toEqual([...STEPS]);
  });

  it.each(STEPS)("%s", (name) => {
    const s = results.get(name);
    expect(s, `step ${name} was not reported`).toBeDefined();
    expect(s?.ok, `${name}: ${s?.error ?? ""}`).toBe(true);
  });
});
