import { describe, expect, it } from "vitest";
import { api, del, read, write } from "../helpers/api";

const uid = () => crypto.randomUUID().slice(0, 6);

describe("mounts", () => {
  it("enables, lists, reads, tunes and disables engines", async () => {
    const kv = `kv${uid()}`;
    const pki = `pki${uid()}`;
    await write(`sys/mounts/${kv}`, { type: "kv", options: { version: "2" }, description: "secrets" }, {}, 204);
    await write(`sys/mounts/${pki}`, { type: "pki" }, {}, 204);
    const all = await read("sys/mounts");
    const entry = all.body.data[`${kv}/`];
    expect(entry).toMatchObject({
      type: "kv",
      description: "secrets",
      options: { version: "2" },
      config: { default_lease_ttl: 2764800, max_lease_ttl: 2764800 },
    });
    expect(entry.accessor).toMatch(/^kv_[0-9a-f]{8}$/);
    expect(all.body.data[`${pki}/`].accessor).toMatch(/^pki_[0-9a-f]{8}$/);
    expect(all.body[`${kv}/`]).toEqual(entry); // also at the top level, as upstream does
    expect((await read(`sys/mounts/${kv}`)).body.data.accessor).toBe(entry.accessor);

    await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "1h", max_lease_ttl: 7200, description: "tuned" }, {}, 204);
    const tuned = await read(`sys/mounts/${kv}/tune`);
    expect(tuned.body.data).toMatchObject({ default_lease_ttl: 3600, max_lease_ttl: 7200, description: "tuned" });
    await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "3h" }, {}, 400);
    // Vault's tune: an empty string leaves a TTL as it is; "system" goes back to the system's.
    await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "", max_lease_ttl: "" }, {}, 204);
    expect((await read(`sys/mounts/${kv}/tune`)).body.data).toMatchObject({ default_lease_ttl: 3600, max_lease_ttl: 7200 });
    await write(`sys/mounts/${kv}/tune`, { default_lease_ttl: "system", max_lease_ttl: "" }, {}, 204);
    // The system default (768h) is above this mount's max, so the default in effect is the max.
    expect((await read(`sys/mounts/${kv}/tune`)).body.data).toMatchObject({ default_lease_ttl: 7200, max_lease_ttl: 7200 });

    await del(`sys/mounts/${kv}`);
    await read(`sys/mounts/${kv}`, {}, 400); // Vault: "No secret engine mount at <path>/"
    await del(`sys/mounts/${kv}`); // idempotent
  });

  it("accepts kv-v2 and refuses other types, versions and taken paths", async () => {
    const p = `k${uid()}`;
    await write(`sys/mounts/${p}`, { type: "kv-v2" }, {}, 204);
    expect((await read(`sys/mounts/${p}`)).body.data.options).toEqual({ version: "2" });
    expect((await write(`sys/mounts/x${uid()}`, { type: "kv", options: { version: "1" } }, {}, 400)).body.errors[0]).toContain("version");
    expect((await write(`sys/mounts/x${uid()}`, { type: "ssh" }, {}, 400)).body.errors[0]).toContain("type");
    expect((await write(`sys/mounts/x${uid()}`, {}, {}, 400)).body.errors[0]).toContain('"type"');
    expect((await write(`sys/mounts/${p}`, { type: "kv" }, {}, 400)).body.errors[0]).toContain("already in use");
    expect((await write(`sys/mounts/${p}/nested`, { type: "kv" }, {}, 400)).body.errors[0]).toContain("already in use");
    await write("sys/mounts/sys", { type: "kv" }, {}, 400);
    await write("sys/mounts/auth/x", { type: "kv" }, {}, 400);
    // Vault does not cap a mount's max lease TTL at the system default: 10000h is accepted.
    await write(`sys/mounts/t${uid()}`, { type: "kv", config: { max_lease_ttl: "10000h" } }, {}, 204);
  });

  it("routes requests under a multi-segment mount path to its engine", async () => {
    const p = `team${uid()}/secrets`;
    await write(`sys/mounts/${p}`, { type: "kv" }, {}, 204);
    expect(Object.keys((await read("sys/mounts")).body.data)).toContain(`${p}/`);
    expect((await api("GET", `${p}/no-such-endpoint`)).status).toBe(404);
  });
});
