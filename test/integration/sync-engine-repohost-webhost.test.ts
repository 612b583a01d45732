/**
 * repohost (sealed box, access token and app installation token) and webhost-project (upsert,
 * teamId, delete by id) against their fakes, with secret-key granularity: one external secret
 * per key, a removed key is unsynced, per-key entries in the association shapes.
 */
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { write } from "../helpers/api";
import { FakeRepohost, REPOHOST_HOSTS } from "../helpers/fake-repohost";
import { installFakes } from "../helpers/fake-router";
import { FakeWebhost, WEBHOST_HOSTS } from "../helpers/fake-webhost";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { RSA_PKCS1_PEM } from "../helpers/sync-fixtures";
import { RFC3339, destPath, entries, kvSecret, removeAssoc, setAssoc, waitForStatus } from "../helpers/sync-engine";
import { parsePem, wrapPkcs1 } from "../../src/engines/sync/rsa";

const gh = new FakeRepohost([SECRETS.ghToken]);
const vercel = new FakeWebhost(SECRETS.vercelToken);
let uninstall: () => void;
beforeAll(async () => {
  uninstall = installFakes([
    { hosts: REPOHOST_HOSTS, fake: gh },
    { hosts: WEBHOST_HOSTS, fake: vercel },
  ]);
  vercel.addProject("prj_abc123");
  vercel.addProject("prj_team", "team_42");
});
afterAll(() => uninstall());

const upper = (s: string) => s.toUpperCase().replace(/[^A-Z0-9_]/g, "_");

describe("repohost", () => {
  it("secret-key: one sealed secret per key (opened by the fake), KV change adds/removes keys, remove unsyncs all", async () => {
    const dest = `gh-${uid()}`;
    await write(destPath("repohost", dest), BODIES.repohost);
    const s = await kvSecret({ api_key: "k-1", db_pass: "p-1" });
    const prefix = `VAULT_${upper(s.accessor)}_APP_CONFIG_`;
    const r = await setAssoc("repohost", dest, s);
    const e = r.body.data.associated_secrets;
    expect(Object.keys(e).sort()).toEqual([`${s.accessor}/${s.secret}/api_key`, `${s.accessor}/${s.secret}/db_pass`]);
    expect(e[`${s.accessor}/${s.secret}/api_key`]).toMatchObject({ accessor: s.accessor, secret_name: s.secret, sub_key: "api_key", sync_status: "SYNCED" });
    expect(e[`${s.accessor}/${s.secret}/api_key`].updated_at).toMatch(RFC3339);
    expect(gh.value("octo-org/hello-world", `${prefix}API_KEY`)).toBe("k-1");
    expect(gh.value("octo-org/hello-world", `${prefix}DB_PASS`)).toBe("p-1");

    await write(`${s.mount}/data/${s.secret}`, { data: { api_key: "k-2" } });
    await vi.waitFor(() => expect(gh.value("octo-org/hello-world", `${prefix}DB_PASS`)).toBeUndefined(), { timeout: 20_000, interval: 100 });
    expect(gh.value("octo-org/hello-world", `${prefix}API_KEY`)).toBe("k-2");
    await waitForStatus("repohost", dest, `${s.accessor}/${s.secret}/api_key`, "SYNCED");
    expect(Object.keys(await entries("repohost", dest))).toEqual([`${s.accessor}/${s.secret}/api_key`]);

    const rm = await removeAssoc("repohost", dest, s);
    expect(rm.body.data.associated_secrets[`${s.accessor}/${s.secret}`].sync_status).toBe("UNSYNCED");
    expect(gh.value("octo-org/hello-world", `${prefix}API_KEY`)).toBeUndefined();
  });

  it("environment secrets through an app: JWT → installation token (cached), name rules refused client-side", async () => {
    await write("sys/sync/repohost-apps/lanyard-app", { app_id: "4242", private_key: RSA_PKCS1_PEM });
    await gh.addApp(4242, wrapPkcs1(parsePem(RSA_PKCS1_PEM).der));
    const dest = `gh-app-${uid()}`;
    await write(destPath("repohost", dest), {
      app_name: "lanyard-app",
      installation_id: "77",
      repository_owner: "octo-org",
      repository_name: "hello-world",
      environment_name: "prod",
      granularity: "secret-path",
    });
    const a = await kvSecret({ x: "1" }, "one");
    const b = await kvSecret({ y: "2" }, "two");
    const before = gh.tokenRequests;
    expect((await setAssoc("repohost", dest, a)).body.data.associated_secrets[`${a.accessor}/one`].sync_status).toBe("SYNCED");
    expect((await setAssoc("repohost", dest, b)).body.data.associated_secrets[`${b.accessor}/two`].sync_status).toBe("SYNCED");
    expect(gh.tokenRequests - before).toBe(1);
    expect(gh.value("octo-org/hello-world/prod", `VAULT_${upper(a.accessor)}_ONE`)).toBe('{"x":"1"}');

    const bad = `gh-bad-${uid()}`;
    await write(destPath("repohost", bad), { ...BODIES.repohost, granularity: "secret-path", secret_name_template: "GITHUB_{{ .SecretPath }}" });
    const r = await setAssoc("repohost", bad, a);
    const e = r.body.data.associated_secrets[`${a.accessor}/one`];
    expect(e.sync_status).toBe("CLIENT_SIDE_ERROR");
    expect(e.last_error).toContain("GITHUB_");
  });
});

describe("webhost-project", () => {
  it("upserts per key for the deployment environments, team projects get teamId, remove deletes by id", async () => {
    const dest = `vc-${uid()}`;
    await write(destPath("webhost-project", dest), { ...BODIES["webhost-project"], project_id: "prj_team", team_id: "team_42" });
    const s = await kvSecret({ token: "t-1" });
    const name = `VAULT_${upper(s.accessor)}_APP_CONFIG_TOKEN`;
    expect((await setAssoc("webhost-project", dest, s)).body.data.associated_secrets[`${s.accessor}/${s.secret}/token`].sync_status).toBe("SYNCED");
    expect(vercel.value("prj_team", name)).toBe("t-1");
    expect(vercel.projects.get("prj_team")?.envs.find((e) => e.key === name)?.target.sort()).toEqual(["preview", "production"]);
    await write(`${s.mount}/data/${s.secret}`, { data: { token: "t-2" } });
    await vi.waitFor(() => expect(vercel.value("prj_team", name)).toBe("t-2"), { timeout: 20_000, interval: 100 });
    expect(vercel.projects.get("prj_team")?.envs.filter((e) => e.key === name)).toHaveLength(1);
    await removeAssoc("webhost-project", dest, s);
    // The KV write's queued job may still hold the association's lease (its provider write is
    // seen above before its outcome is recorded); the removal is then queued behind it and
    // converges asynchronously, as associations/remove answers while a sync is in flight.
    await vi.waitFor(() => expect(vercel.value("prj_team", name)).toBeUndefined(), { timeout: 20_000, interval: 100 });
  });

  it("a wrong token is CLIENT_SIDE_ERROR with the provider's code", async () => {
    const dest = `vc-${uid()}`;
    await write(destPath("webhost-project", dest), { ...BODIES["webhost-project"], access_token: "wrong-token-0123456789" });
    const s = await kvSecret({ token: "t" });
    const e = (await setAssoc("webhost-project", dest, s)).body.data.associated_secrets[`${s.accessor}/${s.secret}`];
    expect(e.sync_status).toBe("CLIENT_SIDE_ERROR");
    expect(e.last_error).toContain("forbidden");
    expect(JSON.stringify(e)).not.toContain("wrong-token");
  });
});
