/**
 * openssl as the independent judge of what the service issues (Node side only: the e2e
 * project). Every call writes its inputs to a temporary directory and runs the system openssl.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";

const run = promisify(execFile);

/** Runs `fn` with `files` written to a fresh temporary directory, removed afterwards. */
export async function withFiles<T>(files: Record<string, string>, fn: (p: (name: string) => string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-openssl-"));
  try {
    for (const [name, body] of Object.entries(files)) await writeFile(path.join(dir, name), body.endsWith("\n") ? body : `${body}\n`);
    return await fn((name) => path.join(dir, name));
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Runs openssl with stdin closed (so a missing -in never waits for input). */
export async function openssl(args: string[]): Promise<{ stdout: string; stderr: string; code: number }> {
  try {
    const child = run("openssl", args, { maxBuffer: 16 * 1024 * 1024, timeout: 30_000 });
    child.child.stdin?.end();
    const r = await child;
    return { stdout: r.stdout, stderr: r.stderr, code: 0 };
  } catch (e) {
    const err = e as { stdout?: string; stderr?: string; code?: number };
    return { stdout: err.stdout ?? "", stderr: err.stderr ?? "", code: typeof err.code === "number" ? err.code : 1 };
  }
}

/**
 * `openssl verify` of `leaf` against the trust anchor `root` and untrusted intermediates.
 * Returns openssl's output; "OK" in it means the chain verified.
 */
export async function verify(leaf: string, root: string, intermediates: string[] = []): Promise<{ ok: boolean; output: string }> {
  return withFiles({ "leaf.pem": leaf, "root.pem": root, "chain.pem": intermediates.join("\n") || "" }, async (p) => {
    const args = ["verify", "-CAfile", p("root.pem")];
    if (intermediates.length > 0) args.push("-untrusted", p("chain.pem"));
    args.push(p("leaf.pem"));
    const r = await openssl(args);
    const output = `${r.stdout}${r.stderr}`;
    return { ok: r.code === 0 && /: OK\s*$/.test(r.stdout.trim()), output };
  });
}

/** `openssl x509 -text -noout` of a PEM certificate. */
export async function x509Text(pem: string): Promise<string> {
  return withFiles({ "c.pem": pem }, async (p) => {
    const r = await openssl(["x509", "-in", p("c.pem"), "-text", "-noout"]);
    if (r.code !== 0) throw new Error(`openssl x509 failed: ${r.stderr}`);
    return r.stdout;
  });
}

/** One field of `openssl x509 -noout -<field>` (serial, subject, enddate, startdate, ext …). */
export async function x509Field(pem: string, ...args: string[]): Promise<string> {
  return withFiles({ "c.pem": pem }, async (p) => {
    const r = await openssl(["x509", "-in", p("c.pem"), "-noout", ...args]);
    if (r.code !== 0) throw new Error(`openssl x509 ${args.join(" ")} failed: ${r.stderr}`);
    return r.stdout.trim();
  });
}

/** Whether a private key PEM and a certificate hold the same public key. */
export async function keyMatchesCert(keyPem: string, certPem: string): Promise<boolean> {
  return withFiles({ "k.pem": keyPem, "c.pem": certPem }, async (p) => {
    const a = await openssl(["pkey", "-in", p("k.pem"), "-pubout"]);
    const b = await openssl(["x509", "-in", p("c.pem"), "-noout", "-pubkey"]);
    return a.code === 0 && b.code === 0 && a.stdout.trim() === b.stdout.trim();
  });
}

/** A key and CSR made by openssl itself (independent of the service's encoder). */
export async function opensslCsr(subject: string, keyAlg: "ec" | "rsa" | "ed25519", sans: string[] = []): Promise<{ key: string; csr: string }> {
  return withFiles({}, async (p) => {
    const keyArgs =
      keyAlg === "ec"
        ? ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", p("k.pem")]
        : keyAlg === "rsa"
          ? ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", p("k.pem")]
          : ["genpkey", "-algorithm", "ED25519", "-out", p("k.pem")];
    let r = await openssl(keyArgs);
    if (r.code !== 0) throw new Error(`openssl genpkey failed: ${r.stderr}`);
    const req = ["req", "-new", "-key", p("k.pem"), "-subj", subject, "-out", p("r.pem")];
    if (sans.length > 0) req.push("-addext", `subjectAltName=${sans.join(",")}`);
    r = await openssl(req);
    if (r.code !== 0) throw new Error(`openssl req failed: ${r.stderr}`);
    const fs = await import("node:fs/promises");
    return { key: await fs.readFile(p("k.pem"), "utf8"), csr: await fs.readFile(p("r.pem"), "utf8") };
  });
}
