import { describe, expect, it } from "vitest";
import { buildAcl, capabilitiesFor, isAllowed } from "../../src/auth/acl";
import { parsePolicy } from "../../src/auth/policy-parser";

const acl = (...policies: string[]) => buildAcl(policies.map((p) => parsePolicy(p).rules));
const caps = (a: ReturnType<typeof acl>, path: string) => [...capabilitiesFor(a, path)].sort();

describe("ACL path matching", () => {
  const a = acl(`
    path "secret/*"          { capabilities = ["read"] }
    path "secret/foo"        { capabilities = ["update"] }
    path "secret/+/bar"      { capabilities = ["delete"] }
    path "secret/zip/*"      { capabilities = ["list"] }
    path "secret/zip/+"      { capabilities = ["create"] }
    path "secret/locked/*"   { capabilities = ["deny"] }
    path "team/+/config"     { capabilities = ["read", "update"] }
    path "+/shared/*"        { capabilities = ["read"] }
  `);

  it.each([
    ["secret/foo", ["update"]], // exact beats glob
    ["secret/foobar", ["read"]], // glob is a string prefix
    ["secret/x/bar", ["delete"]], // + matches one segment
    ["secret/zip/bar", ["create"]], // same first wildcard: not ending in * wins
    ["secret/zip/a/b", ["list"]],
    ["secret/locked/x", []], // deny in the deciding rule removes everything
    ["team/blue/config", ["read", "update"]],
    ["team/blue/green/config", []], // + is exactly one segment
    ["other/shared/thing", ["read"]],
    ["elsewhere", []],
  ])("%s → %j", (path, want) => {
    expect(caps(a, path)).toEqual(want);
  });

  it("prefers the pattern whose first wildcard comes later", () => {
    const b = acl('path "secret/+/bar" { capabilities = ["read"] }', 'path "secret/foo/*" { capabilities = ["list"] }');
    expect(caps(b, "secret/foo/bar")).toEqual(["list"]);
  });

  it("prefers the longer of two globs", () => {
    const b = acl('path "a/*" { capabilities = ["read"] }', 'path "a/b/*" { capabilities = ["list"] }');
    expect(caps(b, "a/b/c")).toEqual(["list"]);
    expect(caps(b, "a/c")).toEqual(["read"]);
  });

  it("merges the same path across policies, and deny there overrides", () => {
    const merged = acl('path "x/*" { capabilities = ["read"] }', 'path "x/*" { capabilities = ["list"] }');
    expect(caps(merged, "x/y")).toEqual(["list", "read"]);
    const denied = acl('path "x/*" { capabilities = ["read"] }', 'path "x/*" { capabilities = ["deny"] }');
    expect(caps(denied, "x/y")).toEqual([]);
  });

  it("requires sudo on root-protected paths on top of the capability", () => {
    const plain = acl('path "pki/root" { capabilities = ["delete"] }');
    const sudo = acl('path "pki/root" { capabilities = ["delete", "sudo"] }');
    expect(isAllowed(plain, "pki/root", "delete", false)).toBe(true);
    expect(isAllowed(plain, "pki/root", "delete", true)).toBe(false);
    expect(isAllowed(sudo, "pki/root", "delete", true)).toBe(true);
  });

  it("grants everything to root", () => {
    const root = buildAcl([], true);
    expect(isAllowed(root, "anything/at/all", "delete", true)).toBe(true);
  });
});
