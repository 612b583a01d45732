/**
 * The glob matcher and the linear trims. No timing asserts: the inputs are large
 * enough that a backtracking implementation does not finish within the test timeout (the old
 * RegExp glob took 91 s on the 750 KB subject below, the old trims 15 s on 100,000 slashes),
 * while a linear one answers at once; the assertions are on the answers.
 */
import { describe, expect, it } from "vitest";
import { globMatch } from "../../src/core/glob";
import { trimChar, trimEndChar, trimStartChar, utf8Length } from "../../src/core/text";
import { isEmailShaped } from "../../src/engines/sync/providers/cloudthree-sm/destination";
import { compileRoute, matchRoute, route } from "../../src/core/route";

/** Reference semantics by dynamic programming over (pattern, subject) prefixes: obviously right, O(n·m). */
function reference(pattern: string, subject: string): boolean {
  let row = new Array<boolean>(subject.length + 1).fill(false);
  row[0] = true;
  for (const c of pattern) {
    const next = new Array<boolean>(subject.length + 1).fill(false);
    if (c === "*") {
      next[0] = row[0] ?? false;
      for (let j = 1; j <= subject.length; j++) next[j] = (row[j] ?? false) || (next[j - 1] ?? false);
    } else {
      for (let j = 1; j <= subject.length; j++) next[j] = (row[j - 1] ?? false) && subject[j - 1] === c;
    }
    row = next;
  }
  return row[subject.length] ?? false;
}

describe("globMatch: upstream's go-glob semantics", () => {
  // [pattern, subject, matches]: go-glob's own cases, then the edges of a split-at-stars matcher.
  const TABLE: [string, string, boolean][] = [
    ["hello world", "hello world", true],
    ["hello world", "hello", false],
    ["hello*", "hello", true],
    ["hello*", "hello world", true],
    ["hello*", "hell", false],
    ["*world", "hello world", true],
    ["*world", "world", true],
    ["*world", "worlds", false],
    ["*lo wo*", "hello world", true],
    ["*lo wo*", "hello_world", false],
    ["he*o w*d", "hello world", true],
    ["this*is*a*glob", "this is a glob", true],
    ["this*is*a*glob", "this is a glob, not", false],
    ["*", "", true],
    ["*", "anything at all", true],
    ["**", "", true],
    ["", "", true],
    ["", "x", false],
    ["*a*", "", false],
    ["a*a", "a", false],
    ["a*a", "aa", true],
    ["a*a", "aba", true],
    ["ab*ba", "aba", false],
    ["ab*ba", "abba", true],
    ["*ab*ab*", "abab", true],
    ["*ab*ab*", "aba", false],
    // Nothing but `*` is special: regex and shell metacharacters are literal.
    ["a.c", "abc", false],
    ["a?c", "abc", false],
    ["[a]*", "a", false],
    ["[a]*", "[a]b", true],
    ["a+b", "aab", false],
    ["(x)*", "(x)y", true],
    ["\\d*", "1", false],
    ["\\d*", "\\d1", true],
    ["^$*", "^$", true],
    // Case-sensitive; `*` crosses dots, slashes and newlines.
    ["*.foo", "a.FOO", false],
    ["x*x.foo", "xylophone.files.pyrex.foo", true],
    ["spiffe://*/ns/*/callback", "spiffe://td/ns/a/b/callback", true],
    ["spiffe://*/ns/*/callback", "spiffe://td/ns/callback", false],
    ["a*b", "a\nb", true],
    ["é*", "été", true],
  ];
  it.each(TABLE)("%j ~ %j → %s", (pattern, subject, want) => {
    expect(globMatch(pattern, subject)).toBe(want);
    expect(reference(pattern, subject)).toBe(want);
  });

  it("agrees with the reference on every pattern and subject over {a, b, *} up to length 6", () => {
    const words = (alphabet: string, max: number): string[] => {
      const out = [""];
      for (let i = 0; i < out.length; i++) {
        const w = out[i] ?? "";
        if (w.length < max) for (const c of alphabet) out.push(w + c);
      }
      return out;
    };
    const subjects = words("ab", 6);
    const disagreements: string[] = [];
    for (const p of words("ab*", 5)) for (const s of subjects) if (globMatch(p, s) !== reference(p, s)) disagreements.push(`${p} ~ ${s}`);
    expect(disagreements).toEqual([]);
  });
});

describe("globMatch does not backtrack", () => {
  it("the issue's URI repro: two stars against a 750 KB subject", () => {
    const body = "a/ns/".repeat(150_000);
    expect(globMatch("spiffe://*/ns/*/callback", `spiffe://${body}`)).toBe(false);
    expect(globMatch("spiffe://*/ns/*/callback", `spiffe://${body}callback`)).toBe(true);
  });

  it("the issue's CN repro: eight stars, grown from 40 characters to 200,000", () => {
    const pattern = "*a*a*a*a*a*a*a*a*b";
    expect(globMatch(pattern, "a".repeat(40))).toBe(false);
    expect(globMatch(pattern, "a".repeat(200_000))).toBe(false);
    expect(globMatch(pattern, `${"a".repeat(200_000)}b`)).toBe(true);
  });

  it("a thousand stars against a 200,000-character subject", () => {
    const pattern = `${"*a".repeat(1000)}*b`;
    expect(globMatch(pattern, "a".repeat(200_000))).toBe(false);
    expect(globMatch(pattern, `${"a".repeat(200_000)}b`)).toBe(true);
    expect(globMatch(pattern, `${"a".repeat(999)}b`)).toBe(false);
  });
});

describe("linear trims", () => {
  it("trim only the given character, at the given ends", () => {
    expect(trimEndChar("a/b//", "/")).toBe("a/b");
    expect(trimEndChar("///", "/")).toBe("");
    expect(trimEndChar("a", "/")).toBe("a");
    expect(trimStartChar("//a/b/", "/")).toBe("a/b/");
    expect(trimChar("//a//b//", "/")).toBe("a//b");
    expect(trimChar("", "/")).toBe("");
  });

  it("a long inner run of slashes (quadratic for /\\/+$/ and /^\\/+|\\/+$/g)", () => {
    const s = `a${"/".repeat(300_000)}b`;
    expect(trimEndChar(s, "/")).toBe(s);
    expect(trimChar(s, "/")).toBe(s);
    expect(trimChar(`${s}//`, "/")).toBe(s);
  });

  it("route matching trims trailing slashes without a regex", () => {
    const routes = [compileRoute(route({ pattern: "certs/*rest", handlers: {} }))];
    expect(matchRoute(routes, "certs/a/b//")?.params).toEqual({ rest: "a/b" });
    const inner = `certs/a${"/".repeat(300_000)}b`;
    expect(matchRoute(routes, inner)?.params.rest).toBe(inner.slice("certs/".length));
    expect(matchRoute(routes, `x${"/".repeat(300_000)}y`)).toBeNull();
  });

  it("utf8Length counts UTF-8 bytes as TextEncoder would", () => {
    for (const s of ["", "abc", "é", "€", "😀", "a😀é€", "\ud800", "x\udc00y"]) {
      expect(utf8Length(s), JSON.stringify(s)).toBe(new TextEncoder().encode(s).length);
    }
  });
});

describe("cloudthree-sm client_email shape", () => {
  it("accepts local@domain.tld and refuses what the old pattern refused", () => {
    expect(isEmailShaped("svc@project.iam.gserviceaccount.com")).toBe(true);
    expect(isEmailShaped("a@b.c")).toBe(true);
    for (const bad of ["", "@b.c", "a@.c", "a@b.", "a@bc", "a@b@c.d", "a b@c.d", "a@b.c\n", "abc"]) {
      expect(isEmailShaped(bad), JSON.stringify(bad)).toBe(false);
    }
  });

  it("a 300,000-character domain full of dots with a trailing space", () => {
    expect(isEmailShaped(`a@${"a.".repeat(150_000)} `)).toBe(false);
    expect(isEmailShaped(`a@${"a.".repeat(150_000)}a`)).toBe(true);
  });
});
