/**
 * Runs the README's PKI walk-through (the bash block between the pki-walkthrough markers)
 * against the e2e Worker, so the documented commands stay true.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect, inject, it } from "vitest";
import { E2E_ROOT_TOKEN } from "./env";

const run = promisify(execFile);

it("the README's PKI walk-through runs and ends with certificates openssl verifies", async () => {
  const readme = await readFile(path.resolve(import.meta.dirname, "../../README.md"), "utf8");
  const block = /<!-- pki-walkthrough:start -->\s*```bash\n([\s\S]*?)```\s*<!-- pki-walkthrough:end -->/.exec(readme)?.[1];
  expect(block, "README has the PKI walk-through block").toBeTruthy();
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-readme-"));
  try {
    const { stdout } = await run("bash", ["-euo", "pipefail", "-c", block ?? ""], {
      cwd: dir,
      env: { ...process.env, LANYARD: inject("baseUrl"), ROOT: E2E_ROOT_TOKEN },
      timeout: 60_000,
    });
    expect(stdout).toContain("www.pem: OK");
    expect(stdout).toContain("app.pem: OK");
    expect(stdout).toContain('{"errors":["common name evil.org not allowed by this role"]}');
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
