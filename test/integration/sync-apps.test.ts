import { env } from "cloudflare:test";
import { describe, expect, it } from "vitest";
import { api, del, list, patch, read, tokenWithPolicy, write } from "../helpers/api";
import { BODIES, uid } from "../helpers/sync-bodies";
import {
  EC_PKCS8_PEM,
  RSA_1024_PKCS1_PEM,
  RSA_PKCS1_FINGERPRINT,
  RSA_PKCS1_PEM,
  RSA_PKCS8_FINGERPRINT,
  RSA_PKCS8_PEM,
} from "../helpers/sync-fixtures";

const app = (name: string) => `sys/sync/repohost-apps/${name}`;
const keyLine = RSA_PKCS1_PEM.split("\n")[5] ?? "";

describe("sys/sync/repohost-apps", () => {
  it("configures an app from a PKCS#1 key: app_id as an integer, key obfuscated, the host's fingerprint", async () => {
    const name = `app-${uid()}`;
    const r = await write(app(name), { app_id: "123456", private_key: RSA_PKCS1_PEM });
    expect(r.body.mount_type).toBe("system");
    expect(r.body.data).toEqual({ name, app_id: 123456, fingerprint: RSA_PKCS1_FINGERPRINT, private_key: "*****" });
    const got = await read(app(name));
    expect(got.body.mount_type).toBe("system");
    expect(got.body.data).toEqual(r.body.data);
    expect(got.text).not.toContain(keyLine);
    const row = await env.DB.prepare("SELECT * FROM sync_repohost_apps WHERE name = ?").bind(name).first();
    expect(JSON.stringify(row)).not.toContain(keyLine);
    expect(JSON.stringify(row)).not.toContain("PRIVATE KEY");
  });

  it("accepts PKCS#8 and a numeric app_id; POST again replaces the key", async () => {
    const name = `app-${uid()}`;
    await write(app(name), { app_id: "1", private_key: RSA_PKCS1_PEM });
    const r = await write(app(name), { app_id: 77, private_key: RSA_PKCS8_PEM });
    expect(r.body.data).toMatchObject({ app_id: 77, fingerprint: RSA_PKCS8_FINGERPRINT });
    expect((await read(app(name))).body.data.fingerprint).toBe(RSA_PKCS8_FINGERPRINT);
  });

  it("refuses bad input naming the field, never echoing the key, storing nothing", async () => {
    const name = `app-${uid()}`;
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ private_key: RSA_PKCS1_PEM }, /"app_id"/],
      [{ app_id: "1" }, /"private_key"/],
      [{ app_id: "abc", private_key: RSA_PKCS1_PEM }, /^app_id: must be a positive integer/],
      [{ app_id: "0", private_key: RSA_PKCS1_PEM }, /^app_id: /],
      [{ app_id: "1", private_key: "not a key" }, /^private_key: not a PEM-encoded key/],
      [{ app_id: "1", private_key: EC_PKCS8_PEM }, /^private_key: .*RSA/],
      [{ app_id: "1", private_key: RSA_1024_PKCS1_PEM }, /^private_key: RSA keys must have at least 2048 bits/],
      [{ app_id: "1", private_key: RSA_PKCS1_PEM.replace(/\n[A-Za-z0-9+/]{64}\n/, "\nAAAA\n") }, /^private_key: /],
    ];
    for (const [body, msg] of cases) {
      const r = await write(app(name), body, {}, 400);
      expect(r.body.errors[0]).toMatch(msg);
      expect(r.text).not.toContain(keyLine);
      expect(r.text).not.toContain("MII");
    }
    await read(app(name), {}, 404);
  });

  it("lists app names; an empty list is 404", async () => {
    const ns = `ns${uid()}`;
    await write(`sys/namespaces/${ns}`);
    await list("sys/sync/repohost-apps", { namespace: ns }, 404);
    await write(app("b-app"), { app_id: "2", private_key: RSA_PKCS1_PEM }, { namespace: ns });
    await write(app("a-app"), { app_id: "1", private_key: RSA_PKCS1_PEM }, { namespace: ns });
    const r = await list("sys/sync/repohost-apps", { namespace: ns });
    expect(r.body.data).toEqual({ keys: ["a-app", "b-app"] });
    await read(app("a-app"), {}, 404); // apps belong to their namespace
  });

  it("a repohost destination can use an app; the app cannot be deleted while referenced", async () => {
    const name = `app-${uid()}`;
    await write(app(name), { app_id: "42", private_key: RSA_PKCS1_PEM });
    const dest = `gh-${uid()}`;
    const d = await write(`sys/sync/destinations/repohost/${dest}`, {
      repository_owner: "octo-org",
      repository_name: "hello-world",
      app_name: name,
      installation_id: "987654",
    });
    expect(d.body.data.connection_details).toEqual({
      access_token: "",
      repository_owner: "octo-org",
      repository_name: "hello-world",
      environment_name: "",
      app_config: { app_name: name },
      installation_id: 987654,
    });
    const refused = await del(app(name), {}, 400);
    expect(refused.body.errors[0]).toContain(`destinations repohost/${dest} still use it`);
    expect((await read(app(name))).body.data.app_id).toBe(42);
    // Switching the destination to a token releases the app.
    const p = await patch(`sys/sync/destinations/repohost/${dest}`, { access_token: BODIES.repohost.access_token });
    expect(p.body.data.connection_details).toEqual({
      access_token: "*****",
      repository_owner: "octo-org",
      repository_name: "hello-world",
      environment_name: "",
    });
    await del(app(name));
    await read(app(name), {}, 404);
    await del(app(name)); // idempotent
    // And a destination cannot then switch to the deleted app.
    const back = await patch(`sys/sync/destinations/repohost/${dest}`, { app_name: name, installation_id: "1" }, {}, 400);
    expect(back.body.errors[0]).toMatch(/^app_name: no repository-host app named/);
  });

  it("deleting a destination that used the app frees it", async () => {
    const name = `app-${uid()}`;
    await write(app(name), { app_id: "42", private_key: RSA_PKCS8_PEM });
    const dest = `gh-${uid()}`;
    await write(`sys/sync/destinations/repohost/${dest}`, { repository_owner: "o", repository_name: "r", app_name: name, installation_id: "5" });
    await del(app(name), {}, 400);
    await del(`sys/sync/destinations/repohost/${dest}`);
    await del(app(name));
  });

  it("applies create/update/read/delete on the app path and list on the collection (Vault docs: secrets sync policies)", async () => {
    const name = `app-${uid()}`;
    const creator = await tokenWithPolicy(`path "sys/sync/repohost-apps/*" { capabilities = ["create"] }`);
    const updater = await tokenWithPolicy(`path "sys/sync/repohost-apps/*" { capabilities = ["update", "read"] }`);
    const lister = await tokenWithPolicy(`path "sys/sync/repohost-apps" { capabilities = ["list"] }`);
    const body = { app_id: "5", private_key: RSA_PKCS1_PEM };
    expect((await api("POST", app(name), { token: updater, body })).status).toBe(403);
    expect((await api("POST", app(name), { token: creator, body })).status).toBe(200);
    expect((await api("POST", app(name), { token: creator, body })).status).toBe(403);
    expect((await api("POST", app(name), { token: updater, body })).status).toBe(200);
    expect((await api("GET", app(name), { token: updater })).status).toBe(200);
    expect((await api("GET", app(name), { token: lister })).status).toBe(403);
    expect((await api("GET", "sys/sync/repohost-apps?list=true", { token: lister })).status).toBe(200);
    expect((await api("DELETE", app(name), { token: updater })).status).toBe(403);
  });
});
