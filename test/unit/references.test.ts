/**
 * The repository stands on its own: every file a comment, doc or script names exists in the
 * repository, nothing names a path of a build machine, and nothing cites an issue tracker entry of
 * this project (an issue number means nothing to a reader of a clone). Public sources (RFCs,
 * Vault's API docs, a provider's reference, an upstream repository's `owner/repo#N`) are cited by
 * their public names instead. What this checks is text, so it reads every tracked kind of file
 * whole: code, comments, docs, migrations and configuration.
 */
import { readdirSync, readFileSync, statSync } from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

const ROOT = path.resolve(import.meta.dirname, "../..");
const SKIP_DIRS = new Set(["node_modules", ".git", ".wrangler", "dist", "fixtures"]);
const TEXT = /\.(ts|mjs|js|md|toml|sql|py|json)$/;

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name) || (name.startsWith(".") && name !== ".ci")) continue;
    const p = path.join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else out.push(path.relative(ROOT, p));
  }
  return out;
}

/** Files whose text holds made-up paths on purpose: the import-rule and code-size tests' own examples. */
const EXAMPLES = new Set(["test/unit/architecture.test.ts", "test/unit/references.test.ts", "test/unit/code-size.test.ts"]);
const ALL = walk(ROOT);
const CHECKED = ALL.filter((f) => (TEXT.test(f) || f === ".ci/run") && f !== "package-lock.json" && !EXAMPLES.has(f));

/** A file name or relative path with one of the extensions this repository uses. */
const FILE_REF = /(?<![\w/@.:$*<-])((?:[\w.-]+\/)*[\w-][\w.-]*\.(?:md|ts|mjs|toml|sql|py))\b/g;
/** Files that a script or test writes at run time, not files of the repository. */
const GENERATED = new Set(["dns-hook.mjs", "seed.sql"]);

/** Whether some file of the repository is `ref`, read from the repository root or as a path suffix. */
function exists(ref: string): boolean {
  const clean = ref.replace(/^(\.\.?\/)+/, "");
  return ALL.some((f) => f === clean || f.endsWith(`/${clean}`));
}

/** Upstream projects whose trackers may be cited by number when the number follows their name. */
const UPSTREAM = "hashicorp|openbao|smallstep|letsencrypt|cloudflare|golang|nodejs|microsoft|google";

/**
 * Whether a line cites an issue of this project: "issue 14", "issues 12", "#3". Not an issue of an
 * upstream tracker cited by its owner (`hashicorp/vault#21164`, "OpenBao issue 1234"), and not a
 * standard's number that is written with `#` (`PKCS #10`). An upstream name elsewhere on the line
 * does not excuse a number of this project's tracker.
 */
function citesIssue(text: string): boolean {
  const rest = text
    .replace(/\b[\w.-]+\/[\w.-]+#\d+/g, "")
    .replace(new RegExp(`\\b(${UPSTREAM})(\\/[\\w.-]+)?('s)? issues? #?\\d+`, "gi"), "")
    .replace(/\bPKCS ?#\d+/g, "");
  return /\b[Ii]ssues? #?\d+\b/.test(rest) || /(^|[\s(])#\d{1,3}\b(?![\w-])/.test(rest);
}

interface Finding {
  file: string;
  line: number;
  what: string;
}

function scan(file: string): Finding[] {
  const out: Finding[] = [];
  readFileSync(path.join(ROOT, file), "utf8")
    .split("\n")
    .forEach((text, i) => {
      const at = (what: string) => out.push({ file, line: i + 1, what });
      for (const m of text.matchAll(FILE_REF)) {
        const ref = m[1] ?? "";
        const before = text.slice(0, m.index);
        // A URL's path, a file made at run time, a placeholder (`bench-NAME.mjs`), or code (`this.sql`).
        if (/https?:\/\/\S*$/.test(before) || GENERATED.has(ref) || /NAME/.test(ref) || /^(this|ctx)\./.test(ref)) continue;
        if (!exists(ref)) at(`names ${ref}, which is not in the repository`);
      }
      if (/(^|[\s(`"'])\/(work|root|home|tmp\/bash_jobs)\//.test(text) && !file.startsWith("test/")) at("names a path of a build machine");
      if (/\b(shared|reference|spec)\/[\w-]+\.md\b/.test(text)) at("names a document outside the repository");
      // The project's docs are cited by file and heading; numbered sections belong to documents elsewhere.
      if (/\.md §/.test(text)) at("cites a numbered section of a document (the repository's docs have none)");
      if (citesIssue(text)) at("cites an issue number");
    });
  return out;
}

describe("references", () => {
  it("every file a comment or doc names is in the repository; no build-machine paths, no issue numbers", () => {
    const findings = CHECKED.flatMap(scan);
    const shown = findings.slice(0, 60).map((f) => `${f.file}:${f.line} ${f.what}`);
    expect(shown, `${findings.length} findings`).toEqual([]);
  });

  it("the scanner sees what it must refuse", () => {
    expect(exists("docs/security.md")).toBe(true);
    expect(exists("security.md")).toBe(true);
    expect(exists("CONTRACT.md")).toBe(false);
    expect("see pki-engine.md §4".match(FILE_REF)?.[0]).toBe("pki-engine.md");
    expect("https://example.com/a.md".match(FILE_REF)).toBeNull();
    expect(citesIssue("the limits of issue 18 #1")).toBe(true);
    expect(citesIssue("(issue 12): Cloudflare refuses the LIST verb")).toBe(true);
    expect(citesIssue("see hashicorp/vault#21164 and OpenBao issue 1234")).toBe(false);
    expect(citesIssue("a PKCS #10 request, PKCS#8 keys")).toBe(false);
  });
});
