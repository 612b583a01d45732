/**
 * The README, pasted as written: every shell block of README.md, in order, in one bash session,
 * against a fresh Worker of its own (a new user's empty database, `dev-root-token`, the fake
 * providers' endpoints as the README's `npm run dev -- --var …` line gives them, and
 * ACME_HTTP01_TARGET at the clients' port as the README's ACME section says). The Python (hvac)
 * and JavaScript (node-vault) snippets run too, as files, at their place in the order.
 *
 * A block preceded by `<!-- readme-e2e: skip: <why> -->` is not run (the few that start the dev
 * server or need a Cloudflare account); `<!-- readme-e2e: needs vault: … -->` runs when the
 * `vault` binary is on PATH. This file plays GitHub and the cluster for the identity
 * walk-throughs: it serves an OIDC discovery document and JWKS on loopback, mints the job's JWT,
 * and serves the fake TokenReview API (test/helpers/fake-tokenreview.ts).
 */
import { execFile } from "node:child_process";
import { access, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { afterAll, beforeAll, expect, it } from "vitest";
import { FakeTokenReview, projectedJwt } from "../helpers/fake-tokenreview";
import { serveTokenReview, type ServedTokenReview } from "../helpers/fake-tokenreview-serve";
import { freePort } from "./acme-clients";
import { fencedBlocks, type Block } from "./doc-blocks";
import { startLanyardWorker, type StartedWorker } from "./worker";

const run = promisify(execFile);
const REPO = path.resolve(import.meta.dirname, "../..");

/** Every fenced block of the README, with the readme-e2e marker in the text just above it. */
const blocks = (readme: string): Block[] => fencedBlocks(readme, "readme-e2e");

const onPath = async (cmd: string) => run("bash", ["-c", `command -v ${cmd}`]).then(() => true, () => false);

/** A python3 that can import hvac (Debian's python3-hvac lives in /usr/bin/python3's dist-packages), or null. */
async function hvacPython(): Promise<string | null> {
  for (const py of [process.env.HVAC_PYTHON, "/usr/bin/python3", "python3"]) {
    if (py && (await run(py, ["-c", "import hvac"]).then(() => true, () => false))) return py;
  }
  return null;
}

/** Stand-ins for skipped blocks whose effect the next block relies on. */
const STAND_INS: [RegExp, string][] = [
  // The dev server restarted against the fakes: here the Worker already points at them; wait for the fakes themselves.
  [/npm run dev -- --var/, 'for i in $(seq 1 150); do [ -f /tmp/lanyard-fakes/gh.json ] && curl -sf http://127.0.0.1:9104/__fake/state > /dev/null && break; sleep 0.2; done'],
];

const FIXED_PORTS = [9101, 9102, 9103, 9104, 9105, 9200];

let oidc: Server;
let oidcUrl = "";
let tokenReview: ServedTokenReview;
let worker: StartedWorker | undefined;
let identityEnv: Record<string, string> = {};
let http01Port = 0;
let readme = "";

async function identityFakes(): Promise<void> {
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
    .setExpirationTime("10m")
    .sign(privateKey);
  // The reviewer is itself a service account token (Vault checks that token_reviewer_jwt is a JWT).
  const vaultAuth = { namespace: "kube-system", name: "vault-auth", uid: crypto.randomUUID() };
  const reviewer = projectedJwt(vaultAuth);
  const fake = new FakeTokenReview({ reviewers: [reviewer] });
  fake.addToken(reviewer, vaultAuth);
  const sa = { namespace: "cert-manager", name: "cert-manager", uid: crypto.randomUUID(), audiences: ["vault://lanyard"] };
  const saJwt = fake.addToken(projectedJwt(sa), sa);
  tokenReview = await serveTokenReview(fake);
  identityEnv = { OIDC: oidcUrl, GITHUB_OIDC_JWT: githubJwt, K8S_HOST: tokenReview.url, REVIEWER_JWT: reviewer, SA_JWT: saJwt };
}

async function portFree(port: number): Promise<boolean> {
  const s = createServer();
  return new Promise((resolve) => {
    s.once("error", () => resolve(false));
    s.listen(port, "127.0.0.1", () => s.close(() => resolve(true)));
  });
}

beforeAll(async () => {
  readme = await readFile(path.join(REPO, "README.md"), "utf8");
  const busy = [];
  for (const p of FIXED_PORTS) if (!(await portFree(p))) busy.push(p);
  if (busy.length > 0) throw new Error(`the README's fixed ports are in use: ${busy.join(", ")} (fake providers 9101-9105, audit collector 9200)`);
  await rm("/tmp/lanyard-fakes", { recursive: true, force: true });
  await rm("/tmp/audit.ndjson", { force: true });
  await identityFakes();
  // The variables of the README's `npm run dev -- --var NAME:value …` line, as written.
  const devLine = blocks(readme).find((b) => /npm run dev -- --var/.test(b.body))?.body ?? "";
  const vars = Object.fromEntries([...devLine.matchAll(/--var (\w+):(\S+)/g)].map((m) => [m[1] ?? "", m[2] ?? ""]));
  expect(Object.keys(vars)).toEqual(["CLOUDONE_ENDPOINT", "CLOUDTWO_ENDPOINT", "CLOUDTHREE_ENDPOINT", "REPOHOST_ENDPOINT", "WEBHOST_ENDPOINT"]);
  http01Port = await freePort();
  const seal = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))));
  // .dev.vars as `npm run dev` writes it, plus the ACME section's ACME_HTTP01_TARGET.
  worker = await startLanyardWorker({ ENVIRONMENT: "development", ROOT_TOKEN: "dev-root-token", SEAL_KEY: seal, ...vars, ACME_HTTP01_TARGET: `127.0.0.1:${http01Port}` });
}, 240_000);

afterAll(async () => {
  await worker?.dispose();
  await new Promise<void>((resolve) => (oidc ? oidc.close(() => resolve()) : resolve()));
  await tokenReview?.close();
  await rm("/tmp/lanyard-fakes", { recursive: true, force: true });
  await rm("/tmp/lanyard-fakes.cjs", { force: true });
  await rm("/tmp/audit.ndjson", { force: true });
});

it("every shell block of the README runs as written, in order, on a fresh instance (output kept in the scratch directory on failure)", async () => {
  const all = blocks(readme);
  // The README is run from a clone (`npx esbuild test/helpers/…`): a scratch directory that looks
  // like one, so the files the walk-throughs write (PEM files, certbot/, lego/) land there.
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-readme-"));
  for (const entry of ["node_modules", "package.json", "src", "test", "tsconfig.json"]) await symlink(path.join(REPO, entry), path.join(dir, entry));
  const hasVault = await onPath("vault");
  const py = await hvacPython();
  const ran: string[] = [];
  const notRun: string[] = [];
  // Background jobs the README starts (the fakes, the audit collector) end with the session.
  const script = ["trap 'kill $(jobs -p) 2> /dev/null || true' EXIT"];
  for (const b of all) {
    const where = `README.md:${b.line} (${b.lang || "text"})`;
    if (b.marker?.kind === "skip") {
      expect(b.marker.why, `${where}: a skipped block says why`).not.toBe("");
      notRun.push(`${where}: ${b.marker.why}`);
      for (const [re, standIn] of STAND_INS) if (re.test(b.body)) script.push(standIn);
      continue;
    }
    if (b.marker?.kind === "needs vault" && !hasVault) {
      notRun.push(`${where}: no vault binary on PATH`);
      continue;
    }
    script.push(`echo "::readme ${b.line}"`);
    if (b.lang === "bash" || b.lang === "sh") {
      script.push(b.body);
    } else if (b.lang === "python") {
      if (!py) throw new Error(`${where}: hvac is not installed (apt-get install -y python3-hvac)`);
      await writeFile(path.join(dir, `readme-${b.line}.py`), b.body);
      script.push(`${py} readme-${b.line}.py`);
    } else if (b.lang === "js") {
      await writeFile(path.join(dir, "vault-demo.cjs"), b.body);
      script.push(`NODE_PATH=${path.join(REPO, "node_modules")} node vault-demo.cjs`);
    } else {
      notRun.push(`${where}: not a shell block`);
      continue;
    }
    ran.push(where);
  }
  const env: Record<string, string> = Object.fromEntries(Object.entries(process.env).filter((e): e is [string, string] => e[1] !== undefined && !/^(ROOT|LANYARD|VAULT_\w+)$/.test(e[0])));
  const { stdout, stderr } = await run("bash", ["-xeuo", "pipefail", "-c", script.join("\n")], {
    cwd: dir,
    env: { ...env, LANYARD: worker?.url ?? "", HTTP01_PORT: String(http01Port), ...identityEnv },
    timeout: 240_000,
    maxBuffer: 32 * 1024 * 1024,
  }).catch(async (e: { stdout?: string; stderr?: string }) => {
    await writeFile(path.join(dir, "readme.stdout"), e.stdout ?? "");
    await writeFile(path.join(dir, "readme.stderr"), e.stderr ?? "");
    throw new Error(`the README failed (whole output in ${dir}/readme.std{out,err}).\nstdout (last lines):\n${(e.stdout ?? "").split("\n").slice(-30).join("\n")}\nstderr (last lines):\n${(e.stderr ?? "").split("\n").slice(-60).join("\n")}`);
  });
  console.info(`README blocks run: ${ran.length}\nnot run:\n${notRun.join("\n")}`);
  // Kept when an expectation below fails (the directory is removed only at the end).
  await writeFile(path.join(dir, "readme.stdout"), stdout);
  await writeFile(path.join(dir, "readme.stderr"), stderr);

  // Nothing refused but what the README shows refused (a block that collides with an earlier one
  // answers {"errors":[…]} even where curl -s exits 0).
  const errors = stdout.match(/\{"errors":\[[^\]]*\]\}/g) ?? [];
  expect(errors).toEqual(['{"errors":["common name evil.org not allowed by this role"]}']);
  const lines = stdout.split("\n");
  // A walk-through with curl: the token may read, not write.
  expect(stdout).toContain('"password":"s3cret"');
  // curl -w prints the code right after the previous answer, which has no trailing newline.
  expect(stdout).toMatch(/(^|\})403$/m);
  // The CA.
  expect(stdout).toContain("www.pem: OK");
  expect(stdout).toContain("app.pem: OK");
  // Secrets sync against the fakes: the second value reached the repository host.
  expect(stdout).toMatch(/"VAULT_KV_\w+_APP_API_KEY": ?"k2"/);
  expect(stdout).toContain('"sync_status":"UNSYNCED"');
  // Keyless: the AWS-like fake holds the secret, written with temporary credentials of a role that trusts Lanyard's issuer.
  expect(stdout).toMatch(/"vault\/kv_\w+\/app": \{/);
  // hvac and node-vault list the secrets they wrote.
  expect(stdout).toContain("['app', 'app/']");
  expect(stdout).toContain("[ 'app', 'app/' ]");
  // Identity.
  expect(lines).toContain("auth/approle/login");
  expect(lines).toContain("web-1");
  expect(lines).toContain("acme/web");
  expect(lines).toContain("subject=CN = web.default.svc.cluster.local");
  // ACME: certbot's certificate is there (kept after its revoke), lego's archived by its revoke.
  await access(path.join(dir, "certbot/config/live/www.example.com/cert.pem"));
  expect((await readdir(path.join(dir, "lego/archives"))).some((f) => f.endsWith(".www.example.com.crt"))).toBe(true);
  // Audit: neither the token nor the password in the log; the token's requests found by its HMAC.
  expect(stdout).toMatch(/(^|\})0$/m);
  expect(stdout).toMatch(/request create audited\/data\/db/);
  expect(stdout).toMatch(/response read audited\/data\/db/);
  await rm(dir, { recursive: true, force: true });
}, 300_000);
