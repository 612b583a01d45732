/** The engine's pure parts: planning, failure mapping, backoff, Retry-After, SigV4, messages. */
import { describe, expect, it } from "vitest";
import { failureMessage, failureStatus, keyValue, planOperation } from "../../src/engines/sync/plan";
import { ConnectorError } from "../../src/engines/sync/connectors/types";
import { parseRetryAfter } from "../../src/engines/sync/connectors/http";
import { backoffSeconds, parseMessage } from "../../src/engines/sync/messages";
import { signature } from "../../src/engines/sync/providers/cloudone-sm/sigv4";
import type { ExternalEntry } from "../../src/engines/sync/association-store";

const entry = (name: string): ExternalEntry => ({ name, status: "SYNCED", updatedAt: 1 });

describe("planOperation", () => {
  it("ok/secret-path: one put of the whole map as JSON", () => {
    const p = planOperation("synced", { a: "1", b: { c: 2 } }, "secret-path", { "": "vault/x" }, {});
    expect(p).toEqual({ puts: [{ subKey: "", name: "vault/x", value: '{"a":"1","b":{"c":2}}' }], removes: [], target: "SYNCED" });
  });
  it("ok/secret-key: one put per key, non-strings as JSON, removed keys deleted", () => {
    const p = planOperation("synced", { a: "1", n: 5 }, "secret-key", { a: "A", n: "N" }, { a: entry("A"), gone: entry("GONE") });
    expect(p.puts).toEqual([
      { subKey: "a", name: "A", value: "1" },
      { subKey: "n", name: "N", value: "5" },
    ]);
    expect(p.removes).toEqual([{ subKey: "gone", name: "GONE" }]);
  });
  it("ok/renamed template: the old name is deleted", () => {
    const p = planOperation("synced", { a: "1" }, "secret-path", { "": "new" }, { "": entry("old") });
    expect(p.removes).toEqual([{ subKey: "", name: "old" }]);
  });
  it("ok/removed intent or missing secret: everything is deleted, target UNSYNCED", () => {
    const prev = { a: entry("A"), b: entry("B") };
    expect(planOperation("unsynced", { a: "1" }, "secret-key", { a: "A" }, prev)).toEqual({
      puts: [],
      removes: [
        { subKey: "a", name: "A" },
        { subKey: "b", name: "B" },
      ],
      target: "UNSYNCED",
    });
    expect(planOperation("synced", null, "secret-path", {}, {}).target).toBe("UNSYNCED");
  });
  it("keyValue keeps strings and encodes the rest", () => {
    expect(keyValue("x")).toBe("x");
    expect(keyValue([1])).toBe("[1]");
  });
});

describe("failures", () => {
  it("maps connector errors to the spec's statuses and never a value", () => {
    expect(failureStatus(new ConnectorError("client", "AccessDenied", "no"))).toBe("CLIENT_SIDE_ERROR");
    expect(failureStatus(new ConnectorError("external", "InternalServiceError", "down"))).toBe("EXTERNAL_SERVICE_ERROR");
    expect(failureStatus(new Error("boom"))).toBe("INTERNAL_VAULT_ERROR");
    expect(failureMessage(new Error("secret-value-in-a-bug"))).not.toContain("secret-value");
    expect(new ConnectorError("external", "x", "y", 3).retryable).toBe(true);
  });
  it("backoff doubles, is capped, and honours Retry-After", () => {
    expect([1, 2, 3, 4].map((a) => backoffSeconds(a))).toEqual([2, 4, 8, 16]);
    expect(backoffSeconds(20)).toBe(600);
    expect(backoffSeconds(1, 30)).toBe(30);
    expect(backoffSeconds(1, 10 ** 9)).toBe(43_200);
  });
  it("parses Retry-After as seconds or an HTTP date", () => {
    expect(parseRetryAfter("7")).toBe(7);
    expect(parseRetryAfter(null)).toBeUndefined();
    expect(parseRetryAfter(new Date(Date.UTC(2030, 0, 1, 0, 0, 30)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(30);
    expect(parseRetryAfter("soon")).toBeUndefined();
  });
  it("parses only well-formed queue messages", () => {
    expect(parseMessage({ kind: "association", id: "x" })).toEqual({ kind: "association", id: "x" });
    expect(parseMessage({ kind: "purge", namespaceId: "root", type: "repohost", name: "n" })).not.toBeNull();
    expect(parseMessage({ kind: "purge", namespaceId: "root", type: "nope", name: "n" })).toBeNull();
    expect(parseMessage("x")).toBeNull();
  });
});

describe("SigV4", () => {
  it("matches the provider's published example (GET ListUsers, 20150830T123600Z)", async () => {
    const s = await signature(
      { secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" },
      {
        method: "GET",
        url: new URL("https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08"),
        headers: { "content-type": "application/x-www-form-urlencoded; charset=utf-8", "x-amz-date": "20150830T123600Z" },
        body: "",
        region: "us-east-1",
        service: "iam",
        amzDate: "20150830T123600Z",
      },
    );
    expect(s.signedHeaders).toBe("content-type;host;x-amz-date");
    expect(s.signature).toBe("5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
  });
});
