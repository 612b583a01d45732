import { describe, expect, it } from "vitest";
import { splitPath } from "../../src/core/path";
import { decodeJsonObject, operationOf, readBody } from "../../src/core/request";

describe("operationOf", () => {
  const q = (s: string) => new URLSearchParams(s);
  it.each([
    ["GET", "", "read"],
    ["GET", "list=true", "list"],
    ["GET", "list=false", "read"],
    ["LIST", "", "list"],
    ["POST", "", "update"],
    ["PUT", "", "update"],
    ["PATCH", "", "patch"],
    ["DELETE", "", "delete"],
    ["HEAD", "", null],
    ["OPTIONS", "", null],
  ])("%s ?%s is %s", (method, query, want) => {
    expect(operationOf(method, q(query))).toBe(want);
  });

  it("refuses a list value that is not a boolean", () => {
    expect(() => operationOf("GET", q("list=perhaps"))).toThrow();
  });
});

describe("splitPath", () => {
  it("keeps a trailing slash out and refuses dot and empty segments", () => {
    expect(splitPath("sys/mounts/")).toEqual(["sys", "mounts"]);
    expect(() => splitPath("a//b")).toThrow("empty");
    expect(() => splitPath("a/../b")).toThrow("'..'");
    expect(() => splitPath("a/%2e%2e/b")).toThrow("'..'");
  });
});

describe("body reading", () => {
  it("refuses bodies over the limit with 413", async () => {
    const req = new Request("http://x/", { method: "POST", body: "x".repeat(100) });
    await expect(readBody(req, 10)).rejects.toMatchObject({ status: 413 });
  });

  it("decodes objects only", () => {
    expect(decodeJsonObject(new TextEncoder().encode(""))).toEqual({});
    expect(decodeJsonObject(new TextEncoder().encode('{"a":1}'))).toEqual({ a: 1 });
    expect(() => decodeJsonObject(new TextEncoder().encode("[1]"))).toThrow();
    expect(() => decodeJsonObject(new TextEncoder().encode("{"))).toThrow("JSON");
  });
});
