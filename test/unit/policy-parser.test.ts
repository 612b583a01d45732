import { describe, expect, it } from "vitest";
import { PolicyParseError, parsePolicy } from "../../src/auth/policy-parser";

describe("parsePolicy (HCL)", () => {
  it("reads path blocks with capabilities, comments and trailing commas", () => {
    const p = parsePolicy(`
      # issue certificates
      path "pki/issue/*" {
        capabilities = ["create", "update",]
      }
      // and read the CA
      /* block
         comment */
      path "pki/cert/ca" { capabilities = ["read"] }
    `);
    expect(p.rules).toEqual([
      { path: "pki/issue/*", capabilities: ["create", "update"] },
      { path: "pki/cert/ca", capabilities: ["read"] },
    ]);
  });

  it("accepts the legacy policy shorthand", () => {
    const p = parsePolicy('path "secret/*" { policy = "write" }');
    expect(p.rules[0]?.capabilities).toEqual(expect.arrayContaining(["create", "read", "update", "delete", "list"]));
    expect(parsePolicy('path "x" { policy = "deny" }').rules[0]?.capabilities).toEqual(["deny"]);
  });

  it("accepts the nested path object form", () => {
    const p = parsePolicy('path = { "a/*" = { capabilities = ["read"] } }');
    expect(p.rules).toEqual([{ path: "a/*", capabilities: ["read"] }]);
  });

  it.each([
    ['path "a" { capabilities = ["fly"] }', 'line 1: path "a": invalid capability "fly"'],
    ['path "a" {\n  capabilities = ["read"\n}', "line 3"],
    ['path "a" {\n  capabilities = ["read"]\n', "line 2: expected '}'"],
    ['path "a" {\n\n  capabilities "read"\n}', "line 3"],
    ['mount "a" { }', 'line 1: unsupported top-level key "mount"'],
    ['path "a" { allowed_parameters = { "x" = [] } }', "unsupported key"],
    ['path "a/*/b" { capabilities = ["read"] }', "only allowed at the end"],
    ['path "a" { capabilities = ["read"] ', "expected '}'"],
    ['path "unterminated { }', "unterminated string"],
  ])("refuses %j with the line and the reason", (src, message) => {
    expect(() => parsePolicy(src)).toThrow(PolicyParseError);
    expect(() => parsePolicy(src)).toThrow(message);
  });
});

describe("parsePolicy (JSON)", () => {
  it("reads the JSON form", () => {
    const p = parsePolicy(JSON.stringify({ path: { "secret/data/*": { capabilities: ["read", "list"] } } }));
    expect(p.rules).toEqual([{ path: "secret/data/*", capabilities: ["read", "list"] }]);
  });

  it("refuses malformed JSON and wrong shapes", () => {
    expect(() => parsePolicy("{ nope")).toThrow("malformed JSON");
    expect(() => parsePolicy('{"path": {"a": {"capabilities": "read"}}}')).toThrow("must be a list");
    expect(() => parsePolicy('{"paths": {}}')).toThrow("unsupported top-level key");
  });
});

describe("parsePolicy (identity templates)", () => {
  const src = 'path "kv/data/{{identity.entity.name}}/*" { capabilities = ["read"] }\npath "kv/data/shared" { capabilities = ["read"] }';

  it("refuses a templated path by default (a write), naming it", () => {
    expect(() => parsePolicy(src)).toThrow(PolicyParseError);
    expect(() => parsePolicy(src)).toThrow('line 1: path "kv/data/{{identity.entity.name}}/*": identity templating is not supported');
    expect(() => parsePolicy(JSON.stringify({ path: { "a/{{identity.entity.id}}": { capabilities: ["read"] } } }))).toThrow('path "a/{{identity.entity.id}}"');
  });

  it("leaves templated rules out of a stored policy, keeping the others", () => {
    expect(parsePolicy(src, { templatedPaths: "skip" }).rules).toEqual([{ path: "kv/data/shared", capabilities: ["read"] }]);
  });
});
