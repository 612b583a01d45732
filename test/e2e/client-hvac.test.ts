/**
 * hvac, unmodified (Debian's python3-hvac), through the first day of Vault's tutorials against the
 * e2e Worker. The flow is ./hvac_flow.py: it configures `hvac.Client(url, token, namespace,
 * strict_http=True)` as hvac's README says, runs every step and prints the results as JSON; each
 * step is one test here, so a report names what fails.
 *
 * hvac must be importable: a missing python3-hvac fails this file with the install command (CI's
 * .ci/run installs it), it never skips.
 */
import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, inject, it } from "vitest";
import { BODIES } from "../helpers/sync-bodies";
import { E2E_ROOT_TOKEN } from "./env";

const run = promisify(execFile);

/** The steps hvac_flow.py runs, in order: every one must be reported, and pass. */
const STEPS = [
  "token.create",
  "token.lookup_self",
  "token.lookup",
  "token.lookup_accessor",
  "token.renew",
  "token.renew_self",
  "token.revoke",
  "kv.mount",
  "kv.write",
  "kv.read",
  "kv.patch",
  "kv.list",
  "kv.delete",
  "kv.undelete",
  "kv.destroy",
  "kv.metadata",
  "pki.mount",
  "pki.tune",
  "pki.root_generate",
  "pki.config_urls",
  "pki.role",
  "pki.issue",
  "pki.sign",
  "pki.revoke",
  "pki.crl",
  "pki.lease",
  "policy.acl_write",
  "policy.acl_read",
  "policy.acl_list",
  "policy.legacy_write",
  "policy.legacy_read",
  "policy.legacy_list",
  "policy.enforced",
  "policy.delete",
  "ns.create",
  "ns.mount",
  "ns.kv_write_read",
  "ns.not_in_root",
  "ns.delete",
  "sync.activate",
  "sync.config",
  "sync.destination_create",
  "sync.association_set",
  "sync.association_remove",
  "sync.destination_delete",
] as const;

interface Step {
  name: string;
  ok: boolean;
  detail?: unknown;
  error?: string;
}

/**
 * A python3 that can import hvac. Debian's python3-hvac lives in /usr/bin/python3's dist-packages,
 * which a python3 earlier on PATH (pyenv, a venv) does not see, so the system one comes first.
 * HVAC_PYTHON overrides the choice.
 */
async function findPython(): Promise<string> {
  const candidates = process.env.HVAC_PYTHON ? [process.env.HVAC_PYTHON] : ["/usr/bin/python3", "python3"];
  const tried: string[] = [];
  for (const py of candidates) {
    try {
      await run(py, ["-c", "import hvac"], { timeout: 20_000 });
      return py;
    } catch (e) {
      tried.push(`${py}: ${String((e as { stderr?: string }).stderr ?? e).trim().split("\n").pop()}`);
    }
  }
  throw new Error(
    `hvac is not installed: these e2e tests drive the real hvac client (Debian's python3-hvac 0.11.2). ` +
      `Install it with: apt-get install -y python3-hvac (.ci/run does this in CI). Tried: ${tried.join("; ")}`,
  );
}

describe("hvac (python3-hvac, unmodified, strict_http=True)", () => {
  let results = new Map<string, Step>();
  let version = "";

  beforeAll(async () => {
    const py = await findPython();
    const { stdout, stderr } = await run(py, [path.join(import.meta.dirname, "hvac_flow.py")], {
      timeout: 90_000,
      maxBuffer: 16 * 1024 * 1024,
      env: {
        ...process.env,
        LANYARD_ADDR: inject("baseUrl"),
        LANYARD_TOKEN: E2E_ROOT_TOKEN,
        FAKE_REPOHOST: inject("fakeEndpoints").REPOHOST_ENDPOINT,
        SYNC_GH_BODY: JSON.stringify(BODIES.repohost),
        // hvac honours these; the harness must not leak a developer's own Vault settings into it.
        VAULT_ADDR: "",
        VAULT_TOKEN: "",
        VAULT_NAMESPACE: "",
        NO_PROXY: "127.0.0.1,localhost",
      },
    });
    let out: { version: string; steps: Step[] };
    try {
      out = JSON.parse(stdout.trim().split("\n").pop() ?? "");
    } catch {
      throw new Error(`hvac_flow.py printed no JSON result. stdout: ${stdout.slice(0, 2000)} stderr: ${stderr.slice(0, 2000)}`);
    }
    version = out.version;
    results = new Map(out.steps.map((s) => [s.name, s]));
  }, 120_000);

  it("reports exactly the expected steps", () => {
    expect([...results.keys()], `hvac ${version}`).toEqual([...STEPS]);
  });

  it.each(STEPS)("%s", (name) => {
    const s = results.get(name);
    expect(s, `step ${name} was not reported`).toBeDefined();
    expect(s?.ok, `${name}: ${s?.error ?? ""}`).toBe(true);
  });
});
