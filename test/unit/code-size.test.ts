/**
 * The size rule of src/: no file over 450 lines and no function over 80 lines. A file or function
 * past these bounds holds more than one thing, and a reader has to keep too much in mind to change
 * it safely; split it along the seams its own comments mark. Lines are counted as `wc -l` does;
 * a function (declaration, method, accessor, constructor, function expression or arrow function)
 * runs from the first line of its text to the line its body closes on, comments above it not
 * included. It runs under plain Node (the "unit-node" Vitest project): TypeScript's parser and the
 * file system only.
 */
import fs from "node:fs";
import path from "node:path";
import ts from "typescript";
import { describe, expect, it } from "vitest";

const SRC = path.resolve(import.meta.dirname, "../../src");
const MAX_FILE_LINES = 450;
const MAX_FUNCTION_LINES = 80;

/**
 * Files and functions allowed past the bounds, by `src/<file>` or `src/<file>:<function name>`,
 * each with the reason it is kept whole. Empty: nothing is.
 */
const EXCEPTIONS: ReadonlyMap<string, string> = new Map<string, string>([]);

function sourceFiles(dir: string): string[] {
  const out: string[] = [];
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) out.push(...sourceFiles(p));
    else if (/\.(ts|tsx|mts)$/.test(e.name)) out.push(p);
  }
  return out.sort();
}

/** Lines as `wc -l` counts them: a last line without its newline still counts. */
function lineCount(text: string): number {
  if (text === "") return 0;
  const newlines = text.split("\n").length - 1;
  return text.endsWith("\n") ? newlines : newlines + 1;
}

function functionName(node: ts.SignatureDeclaration): string {
  if (node.name) return node.name.getText();
  if (ts.isConstructorDeclaration(node)) return "constructor";
  // `const f = () => …`, `{ run: function () … }`: the name it is bound to.
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent)) && parent.name) return parent.name.getText();
  return "(anonymous)";
}

/** Every function of `text` longer than `max` lines: `name (N lines, line L)`. */
function longFunctions(fileName: string, text: string, max: number): { name: string; lines: number; line: number }[] {
  const sf = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, true);
  const out: { name: string; lines: number; line: number }[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const first = sf.getLineAndCharacterOfPosition(node.getStart(sf)).line;
      const last = sf.getLineAndCharacterOfPosition(node.end).line;
      const lines = last - first + 1;
      if (lines > max) out.push({ name: functionName(node), lines, line: first + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(sf);
  return out;
}

describe("code size", () => {
  const files = sourceFiles(SRC).map((abs) => ({
    rel: `src/${path.relative(SRC, abs).split(path.sep).join("/")}`,
    text: fs.readFileSync(abs, "utf8"),
  }));

  it(`no file of src/ is over ${MAX_FILE_LINES} lines`, () => {
    const long = files
      .map((f) => ({ rel: f.rel, lines: lineCount(f.text) }))
      .filter((f) => f.lines > MAX_FILE_LINES && !EXCEPTIONS.has(f.rel))
      .map((f) => `${f.rel}: ${f.lines} lines`);
    expect(long).toEqual([]);
  });

  it(`no function of src/ is over ${MAX_FUNCTION_LINES} lines`, () => {
    const long = files.flatMap((f) =>
      longFunctions(f.rel, f.text, MAX_FUNCTION_LINES)
        .filter((fn) => !EXCEPTIONS.has(`${f.rel}:${fn.name}`))
        .map((fn) => `${f.rel}:${fn.line} ${fn.name}: ${fn.lines} lines`),
    );
    expect(long).toEqual([]);
    // Parsing every file of src/ takes a few seconds on a loaded two-core machine.
  }, 60_000);

  it("every exception still names something past the bounds", () => {
    // An exception that no longer applies would silently allow the next long file or function.
    const stale = [...EXCEPTIONS.keys()].filter((key) => {
      const [rel, fn] = key.split(":");
      const file = files.find((f) => f.rel === rel);
      if (!file) return true;
      if (fn === undefined) return lineCount(file.text) <= MAX_FILE_LINES;
      return !longFunctions(file.rel, file.text, MAX_FUNCTION_LINES).some((l) => l.name === fn);
    });
    expect(stale).toEqual([]);
  });

  it("the counters measure what they claim", () => {
    expect(lineCount("")).toBe(0);
    expect(lineCount("a\nb\n")).toBe(2);
    expect(lineCount("a\nb")).toBe(2);
    const body = Array.from({ length: 5 }, (_, i) => `  const x${i} = ${i};`).join("\n");
    const text = `// a comment\nexport function f(): void {\n${body}\n}\nconst g = () => {\n${body}\n};\nclass C {\n  m(): void {\n${body}\n  }\n}\n`;
    expect(longFunctions("t.ts", text, 6).map((l) => `${l.name}:${l.line}:${l.lines}`)).toEqual(["f:2:7", "g:9:7", "m:17:7"]);
    expect(longFunctions("t.ts", text, 7)).toEqual([]);
  });
});
