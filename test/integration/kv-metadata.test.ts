import { afterEach, describe, expect, it, vi } from "vitest";
import { onKvChange, type KvChangeEvent } from "../../src/engines/kv/events";
import { api, del, list, mount, patch, read, tokenWithPolicy, write } from "../helpers/api";

const cleanups: Array<() => void> = [];
afterEach(() => {
  for (const off of cleanups.splice(0)) off();
});

describe("kv metadata", () => {
  it("reads the metadata of a key with its versions", async () => {
    const m = await mount("kv");
    const w1 = await write(`${m}/data/app`, { data: { a: "1" } });
    const w2 = await write(`${m}/data/app`, { data: { a: "2" } });
    const r = await read(`${m}/metadata/app`);
    expect(r.body.data).toEqual({
      cas_required: false,
      created_time: w1.body.data.created_time,
      current_version: 2,
      custom_metadata: null,
      delete_version_after: "0s",
      max_versions: 0,
      oldest_version: 0,
      updated_time: w2.body.data.created_time,
      versions: {
        "1": { created_time: w1.body.data.created_time, deletion_time: "", destroyed: false },
        "2": { created_time: w2.body.data.created_time, deletion_time: "", destroyed: false },
      },
    });
    expect((await read(`${m}/metadata/nope`, {}, 404)).body).toEqual({ errors: [] });
  });

  it("creates metadata before any version and updates it without touching the versions", async () => {
    const m = await mount("kv");
    await write(`${m}/metadata/pre`, { max_versions: 5, cas_required: true, delete_version_after: "1h30m", custom_metadata: { team: "a" } }, {}, 204);
    const r = (await read(`${m}/metadata/pre`)).body.data;
    expect(r).toMatchObject({
      max_versions: 5,
      cas_required: true,
      delete_version_after: "1h30m0s",
      custom_metadata: { team: "a" },
      current_version: 0,
      versions: {},
    });
    // The key exists without data: reads are 404, cas 0 creates version 1.
    await read(`${m}/data/pre`, {}, 404);
    await write(`${m}/data/pre`, { data: { a: "1" }, options: { cas: 0 } });
    // Fields that are not sent keep their values; custom_metadata is replaced as a whole.
    await write(`${m}/metadata/pre`, { custom_metadata: { owner: "b" } }, {}, 204);
    const after = (await read(`${m}/metadata/pre`)).body.data;
    expect(after).toMatchObject({ max_versions: 5, cas_required: true, current_version: 1, custom_metadata: { owner: "b" } });
    expect(Date.parse(after.updated_time)).toBeGreaterThanOrEqual(Date.parse(after.created_time));
  });

  it("merge-patches metadata and answers 404 for a missing key", async () => {
    const m = await mount("kv");
    await patch(`${m}/metadata/missing`, { max_versions: 2 }, {}, 404);
    await write(`${m}/metadata/pm`, { max_versions: 4, custom_metadata: { a: "1", b: "2" } }, {}, 204);
    await patch(`${m}/metadata/pm`, { cas_required: true, custom_metadata: { b: null, c: "3" } }, {}, 204);
    const r = (await read(`${m}/metadata/pm`)).body.data;
    expect(r).toMatchObject({ max_versions: 4, cas_required: true, custom_metadata: { a: "1", c: "3" } });
    // null for the whole map removes every key on a patch; on a write null means "not sent".
    await write(`${m}/metadata/pm`, { custom_metadata: null, max_versions: 6 }, {}, 204);
    expect((await read(`${m}/metadata/pm`)).body.data).toMatchObject({ max_versions: 6, custom_metadata: { a: "1", c: "3" } });
    await patch(`${m}/metadata/pm`, { custom_metadata: null }, {}, 204);
    expect((await read(`${m}/metadata/pm`)).body.data.custom_metadata).toBeNull();
    const bad = await api("PATCH", `${m}/metadata/pm`, { body: { max_versions: 1 }, contentType: "application/json" });
    expect(bad.status).toBe(415);
  });

  it("validates metadata input and names the field", async () => {
    const m = await mount("kv");
    const cases: Array<[unknown, string]> = [
      [{ max_versions: -1 }, "max_versions"],
      [{ max_versions: "many" }, "max_versions"],
      [{ cas_required: "perhaps" }, "cas_required"],
      [{ delete_version_after: "soon" }, "delete_version_after"],
      [{ custom_metadata: "x" }, "custom_metadata"],
      [{ custom_metadata: { a: 1 } }, "custom_metadata"],
      [{ custom_metadata: { a: "x".repeat(513) } }, "custom_metadata"],
      [{ custom_metadata: Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, "v"])) }, "custom_metadata"],
    ];
    for (const [body, field] of cases) {
      const r = await write(`${m}/metadata/bad`, body, {}, 400);
      expect(r.body.errors[0], JSON.stringify(body).slice(0, 60)).toContain(field);
    }
    await read(`${m}/metadata/bad`, {}, 404);
    // Unknown fields are ignored with a warning, so the write answers 200 rather than 204.
    const r = await write(`${m}/metadata/warn`, { max_versions: 3, bogus: true }, {}, 200);
    expect(r.body.warnings).toEqual(["Endpoint ignored these unrecognized parameters: [bogus]"]);
    expect((await read(`${m}/metadata/warn`)).body.data.max_versions).toBe(3);
  });

  it("deletes every version and the metadata", async () => {
    const m = await mount("kv");
    const events: KvChangeEvent[] = [];
    cleanups.push(onKvChange((e) => void (e.mountPath === `${m}/` && events.push(e))));
    for (let i = 0; i < 3; i++) await write(`${m}/data/dm`, { data: { i: String(i) } });
    await del(`${m}/metadata/dm`);
    await read(`${m}/metadata/dm`, {}, 404);
    await read(`${m}/data/dm?version=1`, {}, 404);
    // Writing again starts over at version 1.
    expect((await write(`${m}/data/dm`, { data: { a: "b" } })).body.data.version).toBe(1);
    await del(`${m}/metadata/never-existed`);
    await vi.waitFor(() => expect(events.map((e) => e.kind)).toEqual(["written", "written", "written", "metadata-deleted", "written"]));
  });
});

describe("kv metadata: list", () => {
  it("lists keys and folders at the mount root and below", async () => {
    const m = await mount("kv");
    for (const p of ["a", "b/c", "b/d/e", "b/f", "zz"]) await write(`${m}/data/${p}`, { data: { x: "1" } });
    await write(`${m}/metadata/meta-only`, { max_versions: 1 }, {}, 204);
    expect((await list(`${m}/metadata`)).body.data.keys).toEqual(["a", "b/", "meta-only", "zz"]);
    expect((await list(`${m}/metadata/`)).body.data.keys).toEqual(["a", "b/", "meta-only", "zz"]);
    expect((await list(`${m}/metadata/b`)).body.data.keys).toEqual(["c", "d/", "f"]);
    expect((await list(`${m}/metadata/b/d/`)).body.data.keys).toEqual(["e"]);
    // A prefix that is not a folder boundary lists nothing.
    expect((await list(`${m}/metadata/z`, {}, 404)).body).toEqual({ errors: [] });
    expect((await list(`${m}/metadata/nothing`, {}, 404)).body).toEqual({ errors: [] });
  });

  it("answers 404 with no errors on an empty mount and keeps deleted keys listed until metadata is deleted", async () => {
    const m = await mount("kv");
    expect((await list(`${m}/metadata`, {}, 404)).body).toEqual({ errors: [] });
    await write(`${m}/data/k`, { data: { x: "1" } });
    await del(`${m}/data/k`);
    expect((await list(`${m}/metadata`)).body.data.keys).toEqual(["k"]);
    await del(`${m}/metadata/k`);
    await list(`${m}/metadata`, {}, 404);
  });

  it("does not list another mount's keys", async () => {
    const m1 = await mount("kv");
    const m2 = await mount("kv");
    await write(`${m1}/data/one`, { data: { x: "1" } });
    await write(`${m2}/data/two`, { data: { x: "1" } });
    expect((await list(`${m1}/metadata`)).body.data.keys).toEqual(["one"]);
  });

  it("needs the list capability on the folder", async () => {
    const m = await mount("kv");
    await write(`${m}/data/team/a`, { data: { x: "1" } });
    const token = await tokenWithPolicy(`path "${m}/metadata/team/" { capabilities = ["list"] }`);
    expect((await list(`${m}/metadata/team`, { token })).body.data.keys).toEqual(["a"]);
    await list(`${m}/metadata`, { token }, 403);
    await read(`${m}/metadata/team/a`, { token }, 403);
  });
});

describe("kv config", () => {
  it("reads defaults and writes settings per mount", async () => {
    const m = await mount("kv");
    expect((await read(`${m}/config`)).body.data).toEqual({ cas_required: false, delete_version_after: "0s", max_versions: 0 });
    await write(`${m}/config`, { max_versions: 7, delete_version_after: 90 }, {}, 204);
    expect((await read(`${m}/config`)).body.data).toEqual({ cas_required: false, delete_version_after: "1m30s", max_versions: 7 });
    await write(`${m}/config`, { cas_required: true }, {}, 204);
    expect((await read(`${m}/config`)).body.data).toEqual({ cas_required: true, delete_version_after: "1m30s", max_versions: 7 });
    const other = await mount("kv");
    expect((await read(`${other}/config`)).body.data.max_versions).toBe(0);
  });

  it("refuses bad config values", async () => {
    const m = await mount("kv");
    expect((await write(`${m}/config`, { max_versions: -2 }, {}, 400)).body.errors[0]).toContain("max_versions");
    expect((await write(`${m}/config`, { delete_version_after: "-1h" }, {}, 400)).body.errors[0]).toContain("delete_version_after");
    expect((await write(`${m}/config`, { cas_required: "nah" }, {}, 400)).body.errors[0]).toContain("cas_required");
    expect((await read(`${m}/config`)).body.data.max_versions).toBe(0);
  });

  it("applies max_versions 0 as the default of 10", async () => {
    const m = await mount("kv");
    await write(`${m}/config`, { max_versions: 0 }, {}, 204);
    for (let i = 0; i < 11; i++) await write(`${m}/data/d`, { data: { i: String(i) } });
    const meta = (await read(`${m}/metadata/d`)).body.data;
    expect(Object.keys(meta.versions)).toHaveLength(10);
    expect(meta.oldest_version).toBe(2);
  });
});
