/**
 * The audit `filter` option (src/audit/filter.ts): go-bexpr's grammar as Vault's audit filters
 * use it (https://developer.hashicorp.com/vault/docs/enterprise/audit/filtering), its errors and
 * limits, partial evaluation for the public PKI paths, and the linear-time `matches` engine
 * (src/core/linear-regex.ts) checked against JavaScript's RegExp on random patterns of the
 * subset both read alike, then on inputs that make a backtracking engine take forever.
 */
import { describe, expect, it } from "vitest";
import { ApiError } from "../../src/core/errors";
import { LinearRegex, MAX_PROGRAM, RegexSyntaxError } from "../../src/core/linear-regex";
import { type AuditFilterFields, constantFor, evaluate, FILTER_LIMITS, parseFilter, parseFilterOption } from "../../src/audit/filter";
import { allFiltered, unauditedRead } from "../../src/audit/device-filter";
import type { AuditDevice } from "../../src/audit/types";

const FIELDS: AuditFilterFields = { path: "secret/data/app", operation: "read", mount_type: "kv", mount_point: "secret/", namespace: "" };
const on = (expr: string, fields: Partial<AuditFilterFields> = {}) => evaluate(parseFilter(expr), { ...FIELDS, ...fields });

/** The 400 message parseFilter throws for `expr`. */
function refusal(expr: string): string {
  try {
    parseFilter(expr);
  } catch (e) {
    expect(e).toBeInstanceOf(ApiError);
    expect((e as ApiError).status).toBe(400);
    return (e as ApiError).message;
  }
  throw new Error(`accepted: ${expr}`);
}

/** CPU milliseconds of this process spent in `f` (wall time says little on a loaded machine). */
function cpuMs(f: () => unknown): number {
  const before = process.cpuUsage();
  f();
  const d = process.cpuUsage(before);
  return (d.user + d.system) / 1000;
}

function timed<T>(budgetMs: number, f: () => T): T {
  let v: T | undefined;
  expect(cpuMs(() => (v = f()))).toBeLessThan(budgetMs);
  return v as T;
}

/** A small deterministic generator, so a failure reproduces. */
function rng(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

describe("filter grammar", () => {
  it.each<[string, Partial<AuditFilterFields>, boolean]>([
    // Vault's documented examples.
    ['mount_type == "kv"', {}, true],
    ['mount_type == "kv"', { mount_type: "pki" }, false],
    ['operation == "read" and path matches "secret/.*"', {}, true],
    ['operation == "read" and path matches "secret/.*"', { operation: "update" }, false],
    ['not (path matches "/ocsp")', { path: "pki/ocsp/MEow" }, false],
    ['not (path matches "/ocsp")', {}, true],
    ['namespace == "" and mount_point == "secret/"', {}, true],
    // Operators.
    ['path != "secret/data/app"', {}, false],
    ['path contains "data"', {}, true],
    ['path not contains "data"', {}, false],
    ['"data" in path', {}, true],
    ['"data" not in path', {}, false],
    ['path not matches "^pki/"', {}, true],
    ["namespace is empty", {}, true],
    ["namespace is not empty", {}, false],
    // Bare words and numbers are values, as in go-bexpr.
    ["mount_type == kv", {}, true],
    ["operation == 1", { operation: "1" }, true],
    // Strings: escapes, \" (beyond go-bexpr), raw strings.
    ['path == "a\\"b\\\\c\\td\\u00e9"', { path: 'a"b\\c\td\u00e9' }, true],
    ["path matches `^secret/data/[a-z]+$`", {}, true],
    ['path matches "^secret/data/\\\\w+$"', {}, true],
    // Parentheses and whitespace.
    ['((path=="secret/data/app"))', {}, true],
    ['\t( operation == "read" )\n', {}, true],
    ['not not operation == "read"', {}, true],
    ['not(operation == "list")', {}, true],
  ])("%s with %j → %s", (expr, fields, expected) => {
    expect(on(expr, fields)).toBe(expected);
  });

  it("binds not tighter than and, and and tighter than or", () => {
    // a or (b and c): true by `a` alone.
    expect(on('operation == "read" or operation == "list" and path == "none"')).toBe(true);
    // (not a) and b: false because `not a` is false; `not (a and b)` would be true.
    expect(on('not operation == "read" and path == "none"')).toBe(false);
    // (a and b) or c
    expect(on('path == "none" and operation == "read" or mount_type == "kv"')).toBe(true);
    expect(on('path == "none" and (operation == "read" or mount_type == "kv")')).toBe(false);
    // not (a or b) against (not a) or b
    expect(on('not (operation == "read" or path == "none")')).toBe(false);
    expect(on('not operation == "read" or path == "secret/data/app"')).toBe(true);
  });

  it("keeps the source and treats an absent or empty option as no filter", () => {
    expect(parseFilter('path == "x"').source).toBe('path == "x"');
    expect(parseFilterOption(undefined)).toBeNull();
    expect(parseFilterOption("  ")).toBeNull();
    expect(parseFilterOption('path == "x"')).not.toBeNull();
  });
});

describe("filter errors: a 400 naming the field and the offset", () => {
  it.each<[string, string]>([
    ['path = "x"', 'filter: unexpected character "=" at 5'],
    ['path == "x" and', "filter: unexpected end of expression at 15"],
    ['(path == "x"', 'filter: unexpected end of expression at 12; expected ")" to close the "(" at 0'],
    ['path == "x")', 'filter: unexpected token ")" at 11; expected no ( to close'],
    ['path == "x" mount_type == "kv"', 'filter: unexpected token "mount_type" at 12'],
    ['token == "x"', 'filter: unknown selector "token" at 0; allowed: path, operation, mount_type, mount_point, namespace'],
    ['path.sub == "x"', 'filter: unknown selector "path.sub" at 0'],
    ['path is "x"', 'filter: unexpected token "is" at 5; expected an operator'],
    ["path ==", "filter: unexpected end of expression at 7; expected a value"],
    ['"x" in "y"', 'filter: unexpected token "\\"y\\"" at 7; expected a selector'],
    ['path == "abc', "filter: unterminated string starting at 8"],
    ["path == `abc", "filter: unterminated string starting at 8"],
    ['path == "a\\.b"', 'filter: invalid escape "\\\\." at 10'],
    ['path == "a\nb"', "filter: newline in the string starting at 8"],
    ["path == 12ab", "filter: invalid number at 8"],
    ["", "filter: empty expression"],
    ['path matches "a(b"', 'filter: invalid pattern "\\"a(b\\"" at 13: missing ) (at 1 in the pattern)'],
  ])("%j", (expr, message) => {
    expect(refusal(expr)).toContain(message);
  });

  it("refuses what the linear engine cannot run, at enable time", () => {
    expect(refusal('path matches "(a)\\\\1"')).toContain("backreference \\1 is not supported");
    expect(refusal('path matches "a(?=b)"')).toContain("lookaround assertions are not supported");
    expect(refusal('path matches "a(?!b)"')).toContain("lookaround");
    expect(refusal('path matches "(?<=a)b"')).toContain("lookaround");
    expect(refusal('path matches "a{1000}"')).toContain("repetition bound 1000 is over 100");
    expect(refusal('path matches "(a{100}){100}"')).toContain("pattern too large");
    expect(refusal('path matches "(?i)abc"')).toContain("flags");
  });
});

describe("any input is a filter or a 400, never another error", () => {
  it("on 4,000 random expressions and patterns", () => {
    const next = rng(17);
    const pieces = ["path", "operation", "mount_type", " ", "==", "!=", "=", "!", "and", "or", "not", "in", "is", "empty", "matches", "contains", "(", ")", '"', "`", "\\", "a", "1", "-", ".", "x", "*", "[", "]", "{", "}", "?", "|", "^", "$", "é", "😀", "\\n", "\\u", "\\x", "\n"];
    const pick = () => pieces[Math.floor(next() * pieces.length)] ?? "";
    for (let k = 0; k < 4_000; k++) {
      let text = "";
      const n = Math.floor(next() * 14);
      for (let i = 0; i < n; i++) text += pick();
      for (const expr of [text, `path matches "${text}"`, `path matches \`${text}\``]) {
        try {
          const f = parseFilter(expr);
          expect(typeof evaluate(f, FIELDS)).toBe("boolean");
        } catch (e) {
          if (!(e instanceof ApiError) || e.status !== 400 || !e.message.startsWith("filter: ")) throw e;
        }
      }
    }
  }, 30_000);
});

describe("filter limits", () => {
  it("refuses expressions over 4096 bytes, counted in UTF-8", () => {
    expect(refusal(`path == "${"a".repeat(4100)}"`)).toBe(`filter: expression longer than ${FILTER_LIMITS.maxBytes} bytes`);
    expect(refusal(`path == "${"é".repeat(2045)}"`)).toContain("longer than 4096 bytes");
    expect(on(`path == "${"a".repeat(4000)}"`)).toBe(false);
  });

  it("refuses deep nesting and too many comparisons, quickly", () => {
    timed(200, () => {
      expect(refusal(`${"(".repeat(2000)}path == "x"${")".repeat(2000)}`)).toContain("nested deeper than 32 at 32");
      expect(refusal(`${"not ".repeat(1000)}path == "x"`)).toContain("nested deeper than 32");
      expect(refusal(Array.from({ length: 200 }, () => 'path=="x"').join(" or "))).toContain("more than 64 comparisons");
      expect(refusal(`path matches "${"(".repeat(1000)}"`)).toContain("groups nested deeper than 32");
    });
    expect(on(`${"(".repeat(32)}path == "secret/data/app"${")".repeat(32)}`)).toBe(true);
  });

  it("caps the patterns of one filter in all", () => {
    // 101 instructions each (100 characters and the final match): 9 fit, 10 do not.
    const many = (n: number) => Array.from({ length: n }, () => 'path matches "[a-z]{100}"').join(" or ");
    expect(on(many(9))).toBe(false);
    expect(refusal(many(10))).toContain(`patterns too large at 274 (over ${FILTER_LIMITS.maxPatternProgram} instructions in all)`);
  });

  it("evaluates a 4 KB expression of the largest patterns on a 100,000-character path in linear time", () => {
    // Each pattern near MAX_PROGRAM instructions, with a DFA too large to cache: the worst per character.
    const pattern = "(a|b)*a(a|b){100}c";
    expect(LinearRegex.compile(pattern).size).toBeGreaterThan(0.8 * MAX_PROGRAM);
    // As many as the filter's pattern budget allows, then comparisons with long strings up to 4 KB.
    const big = Array.from({ length: 2 }, () => `path matches "${pattern}"`).join(" or ");
    const expr = `${big} or path == "${"x".repeat(4096 - big.length - 20)}"`;
    expect(expr.length).toBeGreaterThan(4050);
    const filter = parseFilter(expr);
    const next = rng(3);
    const path = Array.from({ length: 100_000 }, () => (next() < 0.5 ? "a" : "b")).join("");
    // About 0.3 s of CPU on a 2024 laptop core.
    expect(timed(3000, () => evaluate(filter, { ...FIELDS, path }))).toBe(false);
  }, 30_000);
});

describe("the public PKI reads example of docs/audit.md (Filters)", () => {
  const example = parseFilter(
    "not (path matches `^pki/(ocsp(/.*)?|ca(/pem)?|ca_chain|crl(/delta)?(/pem)?|cert/.*|issuer/[^/]+/crl(/delta)?(/pem|/der)?)$` or path matches `^pki/(.*/)?acme/(directory|new-nonce)$`)",
  );
  const excluded = ["pki/ocsp", "pki/ocsp/MFQwUjBQME4wTDAJBgUrDgMCGgUABBQ%2F", "pki/ca", "pki/ca/pem", "pki/ca_chain", "pki/crl", "pki/crl/pem", "pki/crl/delta", "pki/crl/delta/pem", "pki/cert/ca", "pki/cert/crl", "pki/cert/1a-2b", "pki/issuer/default/crl/der", "pki/issuer/root-2024/crl/delta/pem", "pki/acme/directory", "pki/acme/new-nonce", "pki/roles/web/acme/directory", "pki/issuer/default/roles/web/acme/new-nonce"];
  const kept = ["pki/issue/web", "pki/sign/web", "pki/revoke", "pki/crl/rotate", "pki/crl/rotate-delta", "pki/roles/web", "pki/issuer/default", "pki/acme/new-order", "pki/acme/new-account", "pki/config/crl", "pki/certs", "pki2/ocsp", "secret/data/pki/ca"];

  it("leaves out the public reads, whatever the mount and namespace", () => {
    for (const path of excluded) expect(constantFor(example, { path, operation: "read" }), path).toBe(false);
  });

  it("keeps every other request", () => {
    for (const path of kept) expect(evaluate(example, { ...FIELDS, path }), path).toBe(true);
  });
});

describe("constantFor: partial evaluation for the public PKI paths", () => {
  const publicReads = parseFilter('not (path matches "/(ocsp|crl|ca|cert/ca)$" or path matches "/acme/(directory|new-nonce)$")');
  it("is false when the known path alone excludes the entry", () => {
    expect(constantFor(publicReads, { path: "pki/ocsp" })).toBe(false);
    expect(constantFor(publicReads, { path: "pki_int/acme/new-nonce" })).toBe(false);
    expect(constantFor(publicReads, { path: "pki/issue/web" })).toBe(true);
  });

  it("is null when an unknown field decides, and decides when it cannot", () => {
    const f = parseFilter('mount_type == "pki" and path matches "ocsp"');
    expect(constantFor(f, { path: "pki/ocsp" })).toBeNull();
    expect(constantFor(f, { path: "pki/crl" })).toBe(false);
    expect(constantFor(parseFilter('mount_type == "kv" or path matches "ocsp"'), { path: "pki/ocsp" })).toBe(true);
    expect(constantFor(parseFilter('not (mount_type == "kv")'), { path: "pki/ocsp" })).toBeNull();
    expect(constantFor(f, { path: "pki/ocsp", mount_type: "pki" })).toBe(true);
  });
});

describe("layer 0's question with devices enabled (unauditedRead, allFiltered)", () => {
  const device = (id: string, filter?: string): AuditDevice => ({
    id,
    path: `${id}/`,
    type: "http",
    description: "",
    options: filter === undefined ? {} : { filter },
    local: false,
    salt: "s",
    logRaw: false,
    hmacAccessor: true,
    elideListResponses: false,
  });
  it("answers for the list it is given, also when the same kept fields are asked again with a new list", () => {
    const kept = { path: "pki/ocsp", mount_type: "pki" };
    const excluding = [device("a", 'not (path matches "/ocsp")')];
    expect(allFiltered(excluding)).toBe(true);
    expect(unauditedRead(excluding, kept)).toBe(true);
    expect(unauditedRead(excluding, kept)).toBe(true);
    // The list re-read after a device without a filter was enabled: every read is audited again.
    const reread = [...excluding, device("b")];
    expect(allFiltered(reread)).toBe(false);
    expect(unauditedRead(reread, kept)).toBe(false);
    // Another kept answer under the first list: its own verdict.
    expect(unauditedRead(excluding, { path: "pki/crl", mount_type: "pki" })).toBe(false);
  });
});

describe("linear regex: RE2 semantics of the subset", () => {
  it.each<[string, string, boolean]>([
    ["", "", true],
    ["", "abc", true],
    ["b", "abc", true],
    ["^b", "abc", false],
    ["c$", "abc", true],
    ["a$", "a\n", false],
    ["\\Aab\\z", "ab", true],
    [".", "\n", false],
    ["[^a]", "\n", true],
    ["[]a]", "]", true],
    ["[a-]", "-", true],
    ["a{2,3}$", "xaaaa", true],
    ["^a{2,3}$", "aaaa", false],
    ["^a{2,}$", "aaaa", true],
    ["^a*?$", "aaa", true],
    ["^(?P<x>ab)+$", "abab", true],
    ["^(?<x>ab)+$", "ababa", false],
    ["a|^b", "cb", false],
    ["(^|/)ocsp$", "pki/ocsp", true],
    ["(^|/)ocsp$", "pki/xocsp", false],
    ["^\\x41\\x{1F600}$", "A😀", true],
    ["^.$", "😀", true],
    ["^\\d\\w\\s\\W$", "1_ -", true],
    ["\\s", "\v", false],
    ["x{", "x{", true],
    ["a{,2}", "a{,2}", true],
    ["(a*)*b", "aaab", true],
  ])("%j on %j → %s", (pattern, input, expected) => {
    expect(LinearRegex.compile(pattern).test(input)).toBe(expected);
  });

  it.each<[string, string]>([
    ["\\1", "backreference"],
    ["\\k<x>", "backreferences"],
    ["(?=a)", "lookaround"],
    ["(?<!a)", "lookaround"],
    ["a{101}", "repetition bound"],
    ["a{2,1}", "max below min"],
    ["\\b", "word boundary"],
    ["\\pL", "Unicode classes"],
    ["[[:alpha:]]", "POSIX"],
    ["a**", "nested repetition"],
    ["*a", "missing argument"],
    ["^*", "missing argument"],
    ["(a", "missing )"],
    ["a)", "unmatched )"],
    ["[a", "missing ]"],
    ["[z-a]", "invalid character class range"],
    ["\\q", "invalid escape"],
    ["a\\", "trailing backslash"],
    ["\\0", "octal"],
    [`(${"a?".repeat(300)})`, "pattern too large"],
  ])("refuses %j", (pattern, message) => {
    expect(() => LinearRegex.compile(pattern)).toThrow(RegexSyntaxError);
    expect(() => LinearRegex.compile(pattern)).toThrow(message);
  });
});

/** A random pattern that RE2 and JavaScript (without flags) read the same way. */
function randomPattern(next: () => number, depth = 0): string {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(next() * xs.length)] as T;
  const atoms = ["a", "b", "c", "/", "-", ".", "\\.", "\\/", "\\-", "[ab]", "[^a]", "[a-c]", "[^/]", "[\\d.]", "[a\\-]", "\\d", "\\w", "\\s", "\\W"];
  const quantifiers = ["", "", "", "", "*", "+", "?", "*?", "+?", "??", "{2}", "{1,3}", "{0,2}", "{2,}"];
  const branch = () => {
    let s = next() < 0.1 ? "^" : "";
    const n = 1 + Math.floor(next() * 4);
    for (let i = 0; i < n; i++) {
      const atom = depth < 3 && next() < 0.2 ? `(${next() < 0.5 ? "?:" : ""}${randomPattern(next, depth + 1)})` : pick(atoms);
      s += atom + pick(quantifiers);
    }
    return s + (next() < 0.1 ? "$" : "");
  };
  const branches = [branch()];
  while (next() < 0.25) branches.push(next() < 0.1 ? "" : branch());
  return branches.join("|");
}

describe("linear regex against JavaScript's RegExp", () => {
  it("gives RegExp's answer on 3,000 random patterns × 20 inputs", () => {
    const next = rng(11);
    const alphabet = ["a", "b", "c", "/", "-", ".", "1", " ", "_", "\n", "x"];
    let tooLarge = 0;
    let compared = 0;
    for (let k = 0; k < 3000; k++) {
      const pattern = randomPattern(next);
      let ours: LinearRegex;
      try {
        ours = LinearRegex.compile(pattern);
      } catch (e) {
        // Nested counted repetitions can go over the program size; they are refused, not run.
        expect(String(e)).toContain("pattern too large");
        tooLarge++;
        continue;
      }
      const theirs = new RegExp(pattern);
      for (let j = 0; j < 20; j++) {
        const len = Math.floor(next() * 12);
        let input = "";
        for (let i = 0; i < len; i++) input += alphabet[Math.floor(next() * alphabet.length)];
        const expected = theirs.test(input);
        if (ours.test(input) !== expected) expect.fail(`${JSON.stringify(pattern)} on ${JSON.stringify(input)}: expected ${expected}`);
        compared++;
      }
    }
    expect(tooLarge).toBeLessThan(100);
    expect(compared).toBeGreaterThan(55_000);
  }, 30_000);
});

describe("linear regex on hostile inputs", () => {
  const aaa = "a".repeat(100_000);
  it.each<[string, string, boolean]>([
    ["(a*)*b", aaa, false],
    ["(a|aa)*c", aaa, false],
    ["(x+x+)+y", "x".repeat(100_000), false],
    ["^(a|a?)+$", `${aaa}!`, false],
    ["(.*a){20}", aaa, true],
    ["(.*){20}b", aaa, false],
    ["a(b|c)*d.*e", `a${"bc".repeat(50_000)}`, false],
  ])("%j on 100,000 characters", { timeout: 30_000 }, (pattern, input, expected) => {
    const re = LinearRegex.compile(pattern);
    expect(timed(2000, () => re.test(input))).toBe(expected);
  });

  it("grows linearly with the input when the DFA cache cannot hold the states", () => {
    const re = LinearRegex.compile("(a|b)*a(a|b){60}c");
    const next = rng(5);
    const input = (n: number) => Array.from({ length: n }, () => (next() < 0.5 ? "a" : "b")).join("");
    const small = input(5_000);
    const large = input(50_000);
    re.test(small); // warm up the JIT
    const smallMs = cpuMs(() => re.test(small));
    const largeMs = cpuMs(() => re.test(large));
    // 10× the input: about 10× the time (a quadratic engine would take about 100×).
    expect(largeMs).toBeLessThan(Math.max(40 * smallMs, 50));
  }, 30_000);
});
