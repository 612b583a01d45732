/**
 * Every capability check made outside the dispatcher resolves the path exactly as
 * the dispatcher does — relative to the token's namespace. Before the fix, a root-namespace
 * token allowed `secret/data/*` (root's secret) could sync team1's `secret/data/s` to its own
 * destination, a token allowed `team1/secret/data/*` was refused, and `update` without `sudo`
 * on `team1/auth/token/create` made orphan tokens in team1.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { api, write } from "../helpers/api";
import { FakeCloudone, CLOUDONE_HOSTS } from "../helpers/fake-cloudone";
import { installFakes } from "../helpers/fake-router";
import { BODIES, SECRETS, uid } from "../helpers/sync-bodies";
import { destPath } from "../helpers/sync-engine";

const fake = new FakeCloudone({ [SECRETS.awsKey]: SECRETS.awsSecret });
let uninstall: () => void;
beforeAll(() => {
  uninstall = installFakes([{ hosts: CLOUDONE_HOSTS, fake }]);
});
afterAll(() => uninstall());

/** A namespace with a KV-v2 mount `secret` holding secret `s`; root also has `secret/data/s`. */
async function setup(): Promise<string> {
  const ns = `team-${uid()}`;
  await write(`sys/namespaces/${ns}`, {});
  await write(`${ns}/sys/mounts/secret`, { type: "kv", options: { version: "2" } }, {}, 204);
  await write(`${ns}/secret/data/s`, { data: { v: "team-secret" } });
  await api("POST", "sys/mounts/secret", { body: { type: "kv", options: { version: "2" } } });
  await write("secret/data/s", { data: { v: "root-secret" } });
  return ns;
}

/** A root-namespace token holding one policy. */
async function rootNsToken(policy: string): Promise<string> {
  const name = `p-${uid()}`;
  await write(`sys/policies/acl/${name}`, { policy }, {}, 204);
  const r = await write("auth/token/create", { policies: [name] });
  return r.body.auth.client_token as string;
}

describe("sync association read check sees the request's namespace", () => {
  it("a grant on root's secret/data/* does not let a token sync team1's secret (the leak)", async () => {
    const ns = await setup();
    const token = await rootNsToken(`path "${ns}/sys/sync/*" { capabilities = ["create", "read", "update", "list"] }
path "secret/data/*" { capabilities = ["read"] }`);
    // The direct read is refused by the dispatcher ...
    expect((await api("GET", `${ns}/secret/data/s`, { token })).status).toBe(403);
    const d = `exfil-${uid()}`;
    const created = await api("POST", `${ns}/${destPath("cloudone-sm", d)}`, { token, body: BODIES["cloudone-sm"] });
    expect(created.status, JSON.stringify(created.body)).toBe(200);
    // ... and so is the sync that would copy it out.
    const r = await api("POST", `${ns}/${destPath("cloudone-sm", d)}/associations/set`, { token, body: { mount: "secret", secret_name: "s" } });
    expect(r.status, JSON.stringify(r.body)).toBe(403);
    expect(r.body.errors[0]).toContain("permission denied to read the content of the secret s");
    expect([...fake.secrets.values()].map((s) => s.value).join(" ")).not.toContain("team-secret");
  });

  it("a grant on team1/secret/data/* lets the same kind of token sync team1's secret", async () => {
    const ns = await setup();
    const token = await rootNsToken(`path "${ns}/sys/sync/*" { capabilities = ["create", "read", "update", "list"] }
path "${ns}/secret/data/*" { capabilities = ["read"] }`);
    expect((await api("GET", `${ns}/secret/data/s`, { token })).status).toBe(200);
    const d = `ok-${uid()}`;
    await api("POST", `${ns}/${destPath("cloudone-sm", d)}`, { token, body: BODIES["cloudone-sm"] });
    const r = await api("POST", `${ns}/${destPath("cloudone-sm", d)}/associations/set`, { token, body: { mount: "secret", secret_name: "s" } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
  });

  it("the namespace header resolves like the path prefix", async () => {
    const ns = await setup();
    const token = await rootNsToken(`path "${ns}/sys/sync/*" { capabilities = ["create", "read", "update", "list"] }
path "secret/data/*" { capabilities = ["read"] }`);
    const d = `hdr-${uid()}`;
    await api("POST", destPath("cloudone-sm", d), { token, namespace: ns, body: BODIES["cloudone-sm"] });
    const r = await api("POST", `${destPath("cloudone-sm", d)}/associations/set`, { token, namespace: ns, body: { mount: "secret", secret_name: "s" } });
    expect(r.status).toBe(403);
  });
});

describe("orphan tokens need sudo on the path as the request's namespace sees it", () => {
  it("update without sudo on team1/auth/token/create cannot make an orphan in team1", async () => {
    const ns = `team-${uid()}`;
    await write(`sys/namespaces/${ns}`, {});
    const token = await rootNsToken(`path "${ns}/auth/token/create" { capabilities = ["update"] }
path "auth/token/create" { capabilities = ["update", "sudo"] }`);
    const r = await api("POST", `${ns}/auth/token/create`, { token, body: { no_parent: true, policies: ["default"] } });
    expect(r.status, JSON.stringify(r.body)).toBe(400);
    expect(r.body.errors[0]).toContain("no_parent");
    // With sudo on the team1 path, the orphan is allowed.
    const sudo = await rootNsToken(`path "${ns}/auth/token/create" { capabilities = ["update", "sudo"] }`);
    const ok = await api("POST", `${ns}/auth/token/create`, { token: sudo, body: { no_parent: true, policies: ["default"] } });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.auth.orphan).toBe(true);
  });
});

describe("sys/capabilities-self answers for paths of the request's namespace", () => {
  it("a root-namespace token asking in team1 gets team1's grants, not root's", async () => {
    const ns = `team-${uid()}`;
    await write(`sys/namespaces/${ns}`, {});
    const token = await rootNsToken(`path "${ns}/secret/data/*" { capabilities = ["read"] }
path "secret/data/*" { capabilities = ["update"] }
path "${ns}/sys/capabilities-self" { capabilities = ["update"] }`);
    const r = await api("POST", `${ns}/sys/capabilities-self`, { token, body: { paths: ["secret/data/x"] } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data.capabilities).toEqual(["read"]);
    const root = await api("POST", "sys/capabilities-self", { token, body: { paths: ["secret/data/x"] } });
    expect(root.body.data.capabilities).toEqual(["update"]);
  });

  it("sys/capabilities answers for another token the same way", async () => {
    const ns = `team-${uid()}`;
    await write(`sys/namespaces/${ns}`, {});
    const target = await rootNsToken(`path "${ns}/secret/data/*" { capabilities = ["read"] }`);
    const r = await api("POST", `${ns}/sys/capabilities`, { body: { token: target, paths: ["secret/data/x"] } });
    expect(r.status, JSON.stringify(r.body)).toBe(200);
    expect(r.body.data.capabilities).toEqual(["read"]);
  });
});
