/**
 * Runs the README's "Give your machines an identity" walk-throughs (the bash blocks between the
 * identity-* markers, after the section's shared helpers) against the e2e Worker, so the documented
 * commands stay true. This file plays GitHub and the cluster: it serves an
 * OIDC discovery document and JWKS on loopback and mints the job's JWT, and serves the fake
 * TokenReview API (test/helpers/fake-tokenreview.ts) that knows cert-manager's service account token.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { FakeTokenReview, projectedJwt } from "../helpers/fake-tokenreview";
import { serveTokenReview, type ServedTokenReview } from "../helpers/fake-tokenreview-serve";
import { E2E_ROOT_TOKEN } from "./env";

const run = promisify(execFile);

function block(readme: string, name: string): string {
  const re = new RegExp(`<!-- ${name}:start -->\\s*\`\`\`bash\\n([\\s\\S]*?)\`\`\`\\s*<!-- ${name}:end -->`);
  const body = re.exec(readme)?.[1];
  if (!body) throw new Error(`README has no ${name} block`);
  return body;
}

/** The section's shared helpers: the first bash block after its heading. */
function helpers(readme: string): string {
  const section = readme.slice(readme.indexOf("## Give your machines an identity"));
  const body = /```bash\n([\s\S]*?)```/.exec(section)?.[1];
  if (!body) throw new Error("README's identity section has no helpers block");
  return body;
}

let oidc: Server;
let oidcUrl = "";
let tokenReview: ServedTokenReview;
let env: Record<string, string> = {};

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair("ES256");
  const jwk = { ...(await exportJWK(publicKey)), kid: "gh-1", alg: "ES256", use: "sig" };
  oidc = createServer((req, res) => {
    const body = req.url === "/.well-known/openid-configuration" ? { issuer: oidcUrl, jwks_uri: `${oidcUrl}/.well-known/jwks` } : req.url === "/.well-known/jwks" ? { keys: [jwk] } : null;
    if (!body) return void res.writeHead(404).end();
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => oidc.listen(0, "127.0.0.1", resolve));
  oidcUrl = `http://127.0.0.1:${(oidc.address() as AddressInfo).port}`;
  // The claims GitHub puts in an Actions OIDC token (docs.github.com "About security hardening with OpenID Connect").
  const githubJwt = await new SignJWT({ repository: "acme/web", repository_owner: "acme", ref: "refs/heads/main", workflow: "deploy", actor: "octocat", event_name: "push" })
    .setProtectedHeader({ alg: "ES256", kid: "gh-1", typ: "JWT" })
    .setIssuer(oidcUrl)
    .setSubject("repo:acme/web:ref:refs/heads/main")
    .setAudience("https://github.com/acme")
    .setIssuedAt()
    .setNotBefore("0s")
    .setExpirationTime("5m")
    .sign(privateKey);

  // The reviewer is itself a service account token (Vault checks that token_reviewer_jwt is a JWT).
  const vaultAuth = { namespace: "kube-system", name: "vault-auth", uid: crypto.randomUUID() };
  const reviewer = projectedJwt(vaultAuth);
  const fake = new FakeTokenReview({ reviewers: [reviewer] });
  fake.addToken(reviewer, vaultAuth);
  const sa = { namespace: "cert-manager", name: "cert-manager", uid: crypto.randomUUID(), audiences: ["vault://lanyard"] };
  const saJwt = fake.addToken(projectedJwt(sa), sa);
  tokenReview = await serveTokenReview(fake);
  env = { OIDC: oidcUrl, GITHUB_OIDC_JWT: githubJwt, K8S_HOST: tokenReview.url, REVIEWER_JWT: reviewer, SA_JWT: saJwt };
});

afterAll(async () => {
  await new Promise<void>((resolve) => oidc.close(() => resolve()));
  await tokenReview.close();
});

it("the README's AppRole, GitHub Actions OIDC and cert-manager walk-throughs run as written", async () => {
  const readme = await readFile(path.resolve(import.meta.dirname, "../../README.md"), "utf8");
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-identity-"));
  try {
    const script = [helpers(readme), block(readme, "identity-approle"), block(readme, "identity-github"), block(readme, "identity-k8s")].join("\n");
    // -x traces each command to stderr, so a failure names the step that failed.
    const { stdout } = await run("bash", ["-xeuo", "pipefail", "-c", script], {
      cwd: dir,
      env: { ...process.env, LANYARD: inject("baseUrl"), ROOT: E2E_ROOT_TOKEN, ...env },
      timeout: 60_000,
    }).catch((e: { stdout?: string; stderr?: string }) => {
      throw new Error(`the walk-through failed.\nstdout:\n${e.stdout ?? ""}\nstderr (last lines):\n${(e.stderr ?? "").split("\n").slice(-40).join("\n")}`);
    });
    const lines = stdout.trim().split("\n");
    expect(lines).toContain("auth/approle/login");
    expect(lines).toContain("web-1");
    expect(lines).toContain("acme/web");
    expect(lines).toContain("subject=CN = web.default.svc.cluster.local");
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
