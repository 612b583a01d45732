/**
 * Runs docs/secrets-sync.md's walk-through of its guarantees 3 and 4, drift repair and provider
 * limits (the bash block between the
 * sync-safety-walkthrough markers) against the e2e Worker and the fake providers it syncs to
 * (./global-setup.ts), so the documented drift repair and throttling stay true. The block uses
 * the request bodies the manual fakes write (test/helpers/fake-serve.ts); this test writes the
 * two it needs.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { expect, inject, it } from "vitest";
import { BODIES } from "../helpers/sync-bodies";
import { E2E_ROOT_TOKEN } from "./env";

const run = promisify(execFile);

it("the secrets-sync doc's drift and limits walk-through runs and prints what the doc says", async () => {
  const doc = await readFile(path.resolve(import.meta.dirname, "../../docs/secrets-sync.md"), "utf8");
  const block = /<!-- sync-safety-walkthrough:start -->\s*```bash\n([\s\S]*?)```\s*<!-- sync-safety-walkthrough:end -->/.exec(doc)?.[1];
  expect(block, "docs/secrets-sync.md has the sync-safety walk-through block").toBeTruthy();
  const printed = /<!-- sync-safety-walkthrough:end -->[\s\S]*?```text\n([\s\S]*?)```/.exec(doc)?.[1];
  expect(printed, "the doc shows what the block prints").toBeTruthy();
  const dir = await mkdtemp(path.join(tmpdir(), "lanyard-sync-safety-"));
  try {
    await writeFile(path.join(dir, "az.json"), JSON.stringify(BODIES["cloudtwo-kv"]));
    await writeFile(path.join(dir, "gh.json"), JSON.stringify(BODIES.repohost));
    const fakes = inject("fakeEndpoints");
    const { stdout } = await run("bash", ["-euo", "pipefail", "-c", block ?? ""], {
      cwd: dir,
      env: {
        ...process.env,
        ADDR: inject("baseUrl"),
        TOKEN: E2E_ROOT_TOKEN,
        FAKES: dir,
        AZ: fakes.CLOUDTWO_ENDPOINT,
        GH: fakes.REPOHOST_ENDPOINT,
      },
      timeout: 120_000,
    });
    // Every line the doc shows, in that order, after the setup's lines.
    const lines = stdout.trim().split("\n");
    const expected = (printed ?? "").trim().split("\n");
    const tail = lines.slice(lines.length - expected.length);
    expect(tail).toEqual(expected);
    expect(lines.slice(0, 2)).toEqual([
      'cloudtwo-kv/vault: [{"sync_status":"SYNCED","drift_count":0,"last_error":""}]',
      'repohost/repo: [{"sync_status":"SYNCED","drift_count":0,"last_error":""}]',
    ]);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
});
