/**
 * The parser of the linear-time regular expressions (src/core/linear-regex.ts): a safe subset of
 * Go's RE2 syntax (https://github.com/google/re2/wiki/Syntax, https://pkg.go.dev/regexp/syntax),
 * the dialect of go-bexpr's `matches` (github.com/hashicorp/go-bexpr evaluates it with Go's
 * regexp package) and so of Vault's audit `filter` option.
 *
 * Kept: literals (by code point), `.` (any character but `\n`), classes `[a-z]`, `[^…]` with
 * ranges and escapes, `\d \D \w \W \s \S` (ASCII, as in RE2), `\t \n \r \f \v \a`, `\xHH`,
 * `\x{H…}`, an escaped punctuation character, anchors `^ $ \A \z` (text start and end: no
 * multi-line mode), `* + ?` with their lazy forms, `{m}` `{m,}` `{m,n}` up to MAX_REPEAT,
 * groups `( )` `(?: )` `(?P<n> )` `(?<n> )` (captures are not reported, only whether it matches),
 * alternation `|`.
 *
 * Refused with the offset where it was found: what a linear engine cannot run (backreferences
 * `\1` `\k<n>`, lookaround `(?= (?! (?<= (?<!`), what this subset leaves out (flags `(?i)`,
 * `\b \B`, `\p{…}`, POSIX classes `[[:alpha:]]`, `\Q…\E`, octal), repetition bounds over
 * MAX_REPEAT and programs over MAX_PROGRAM instructions (each repetition is expanded, so
 * `(a{100}){100}` counts 10,000).
 */

export class RegexSyntaxError extends Error {
  constructor(
    message: string,
    /** Offset (UTF-16 code units, from 0) in the pattern where the problem was found. */
    readonly offset: number,
  ) {
    super(message);
  }
}

/** Largest `{m,n}` bound (RE2 allows 1000; a safe filter never needs more). */
export const MAX_REPEAT = 100;
/** Largest compiled program, in instructions: the matcher's cost per input character. */
export const MAX_PROGRAM = 500;
/** Deepest group nesting. */
export const MAX_GROUP_DEPTH = 32;

/** Sorted, non-overlapping, non-adjacent inclusive code point ranges: [lo0, hi0, lo1, hi1, …]. */
export type Ranges = number[];

export type RegexNode =
  | { t: "empty" }
  | { t: "set"; ranges: Ranges }
  | { t: "begin" }
  | { t: "end" }
  | { t: "cat"; items: RegexNode[] }
  | { t: "alt"; items: RegexNode[] }
  /** `max` -1: unbounded. */
  | { t: "rep"; item: RegexNode; min: number; max: number };

const MAX_CODE_POINT = 0x10ffff;

export function normalize(pairs: Ranges): Ranges {
  const list: [number, number][] = [];
  for (let i = 0; i + 1 < pairs.length; i += 2) list.push([pairs[i] ?? 0, pairs[i + 1] ?? 0]);
  list.sort((x, y) => x[0] - y[0]);
  const out: Ranges = [];
  for (const [lo, hi] of list) {
    const last = out.length - 1;
    if (last > 0 && lo <= (out[last] ?? 0) + 1) out[last] = Math.max(out[last] ?? 0, hi);
    else out.push(lo, hi);
  }
  return out;
}

export function complement(ranges: Ranges): Ranges {
  const n = normalize(ranges);
  const out: Ranges = [];
  let next = 0;
  for (let i = 0; i < n.length; i += 2) {
    const lo = n[i] ?? 0;
    if (lo > next) out.push(next, lo - 1);
    next = (n[i + 1] ?? 0) + 1;
  }
  if (next <= MAX_CODE_POINT) out.push(next, MAX_CODE_POINT);
  return out;
}

// RE2's Perl classes are ASCII-only: \d [0-9], \w [0-9A-Za-z_], \s [\t\n\f\r ].
const DIGIT: Ranges = [0x30, 0x39];
const WORD: Ranges = normalize([0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a]);
const SPACE: Ranges = normalize([0x09, 0x0a, 0x0c, 0x0d, 0x20, 0x20]);
const PERL: Record<string, Ranges> = {
  d: DIGIT,
  D: complement(DIGIT),
  w: WORD,
  W: complement(WORD),
  s: SPACE,
  S: complement(SPACE),
};
const CONTROL: Record<string, number> = { a: 7, f: 12, t: 9, n: 10, r: 13, v: 11 };
/** `.`: any character but newline (RE2 without the `s` flag). */
const ANY_BUT_NEWLINE: Ranges = complement([0x0a, 0x0a]);

const isAsciiAlnum = (c: number) => (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a);

/** Instructions a node compiles to (src/core/linear-regex.ts emits exactly this many). */
export function programSize(node: RegexNode): number {
  switch (node.t) {
    case "empty":
      return 0;
    case "set":
    case "begin":
    case "end":
      return 1;
    case "cat":
      return node.items.reduce((sum, n) => sum + programSize(n), 0);
    case "alt":
      return node.items.reduce((sum, n) => sum + programSize(n), 0) + 2 * (node.items.length - 1);
    case "rep": {
      const s = programSize(node.item);
      return node.min * s + (node.max < 0 ? s + 2 : (node.max - node.min) * (s + 1));
    }
  }
}

type Escape = { kind: "set"; ranges: Ranges } | { kind: "char"; c: number } | { kind: "begin" } | { kind: "end" };

class RegexParser {
  private pos = 0;
  private depth = 0;

  constructor(private readonly src: string) {}

  parse(): RegexNode {
    const node = this.alternation();
    if (this.pos < this.src.length) throw this.fail("unmatched )", this.pos);
    return node;
  }

  private fail(message: string, at: number): RegexSyntaxError {
    return new RegexSyntaxError(message, at);
  }

  private peek(): number | undefined {
    return this.src.codePointAt(this.pos);
  }

  private take(): number {
    const c = this.src.codePointAt(this.pos);
    if (c === undefined) throw this.fail("unexpected end of pattern", this.pos);
    this.pos += c > 0xffff ? 2 : 1;
    return c;
  }

  private eat(s: string): boolean {
    if (!this.src.startsWith(s, this.pos)) return false;
    this.pos += s.length;
    return true;
  }

  private alternation(): RegexNode {
    const items = [this.concatenation()];
    while (this.eat("|")) items.push(this.concatenation());
    return items.length === 1 ? (items[0] as RegexNode) : { t: "alt", items };
  }

  private concatenation(): RegexNode {
    const items: RegexNode[] = [];
    for (let c = this.peek(); c !== undefined && c !== 0x7c && c !== 0x29; c = this.peek()) {
      const start = this.pos;
      const atom = this.atom();
      items.push(this.repetitions(atom, start));
    }
    if (items.length === 0) return { t: "empty" };
    return items.length === 1 ? (items[0] as RegexNode) : { t: "cat", items };
  }

  /** A `{m}`, `{m,}` or `{m,n}` at the cursor, or null when the brace is a literal (as in RE2). */
  private braces(): { min: number; max: number; end: number } | null {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(this.src.slice(this.pos, this.pos + 16));
    if (!m) return null;
    const bound = (text: string) => {
      const n = text.length > 4 ? Infinity : Number(text);
      if (n > MAX_REPEAT) throw this.fail(`repetition bound ${text} is over ${MAX_REPEAT}`, this.pos);
      return n;
    };
    const min = bound(m[1] ?? "");
    const max = m[2] === undefined ? min : m[3] === "" ? -1 : bound(m[3] ?? "");
    if (max >= 0 && max < min) throw this.fail(`invalid repetition {${m[1]},${m[3]}}: max below min`, this.pos);
    return { min, max, end: this.pos + m[0].length };
  }

  private repetitions(atom: RegexNode, start: number): RegexNode {
    let node = atom;
    let repeated = false;
    for (;;) {
      const c = this.peek();
      let min: number;
      let max: number;
      const at = this.pos;
      if (c === 0x2a || c === 0x2b || c === 0x3f) {
        this.pos++;
        [min, max] = c === 0x2a ? [0, -1] : c === 0x2b ? [1, -1] : [0, 1];
      } else if (c === 0x7b) {
        const b = this.braces();
        if (!b) return node;
        this.pos = b.end;
        ({ min, max } = b);
      } else {
        return node;
      }
      if (repeated) throw this.fail(`invalid nested repetition operator ${JSON.stringify(this.src.slice(at, this.pos))}`, at);
      if (atom.t === "begin" || atom.t === "end") throw this.fail("missing argument to repetition operator", at);
      repeated = true;
      this.eat("?"); // lazy form: the same set of matches
      node = { t: "rep", item: node, min, max };
      if (programSize(node) > MAX_PROGRAM) throw this.fail(`pattern too large (over ${MAX_PROGRAM} instructions once repetitions are expanded)`, start);
    }
  }

  private atom(): RegexNode {
    const at = this.pos;
    const c = this.take();
    switch (c) {
      case 0x28: // (
        return this.group(at);
      case 0x5b: // [
        return { t: "set", ranges: this.charClass(at) };
      case 0x2e: // .
        return { t: "set", ranges: ANY_BUT_NEWLINE };
      case 0x5e: // ^
        return { t: "begin" };
      case 0x24: // $
        return { t: "end" };
      case 0x2a:
      case 0x2b:
      case 0x3f:
        throw this.fail("missing argument to repetition operator", at);
      case 0x7b: {
        this.pos = at;
        if (this.braces()) throw this.fail("missing argument to repetition operator", at);
        this.pos = at + 1;
        return { t: "set", ranges: [c, c] };
      }
      case 0x5c: {
        const e = this.escape(false);
        if (e.kind === "set") return { t: "set", ranges: e.ranges };
        if (e.kind === "char") return { t: "set", ranges: [e.c, e.c] };
        return { t: e.kind };
      }
      default:
        return { t: "set", ranges: [c, c] };
    }
  }

  private group(at: number): RegexNode {
    if (this.eat("?")) {
      if (this.src.startsWith("=", this.pos) || this.src.startsWith("!", this.pos) || this.src.startsWith("<=", this.pos) || this.src.startsWith("<!", this.pos)) {
        throw this.fail("lookaround assertions are not supported", at);
      }
      const named = /^P?<[A-Za-z0-9_]+>/.exec(this.src.slice(this.pos, this.pos + 40));
      if (named) this.pos += named[0].length;
      else if (!this.eat(":")) throw this.fail("flags and group options other than (?: and (?P<name> are not supported", at);
    }
    if (++this.depth > MAX_GROUP_DEPTH) throw this.fail(`groups nested deeper than ${MAX_GROUP_DEPTH}`, at);
    const inner = this.alternation();
    if (!this.eat(")")) throw this.fail("missing )", at);
    this.depth--;
    return inner;
  }

  /** After `\`. Inside a class, anchors are not escapes. */
  private escape(inClass: boolean): Escape {
    const at = this.pos - 1;
    if (this.pos >= this.src.length) throw this.fail("trailing backslash", at);
    const c = this.take();
    const ch = String.fromCodePoint(c);
    const perl = PERL[ch];
    if (perl) return { kind: "set", ranges: perl };
    const control = CONTROL[ch];
    if (control !== undefined) return { kind: "char", c: control };
    if (!inClass && ch === "A") return { kind: "begin" };
    if (!inClass && ch === "z") return { kind: "end" };
    if (ch >= "1" && ch <= "9") throw this.fail(`backreference \\${ch} is not supported`, at);
    if (ch === "0") throw this.fail("octal escapes are not supported", at);
    if (ch === "k") throw this.fail("backreferences are not supported", at);
    if (ch === "b" || ch === "B") throw this.fail(`word boundary \\${ch} is not supported`, at);
    if (ch === "p" || ch === "P") throw this.fail("Unicode classes \\p and \\P are not supported", at);
    if (ch === "Q" || ch === "E") throw this.fail("\\Q…\\E quoting is not supported", at);
    if (ch === "x") return { kind: "char", c: this.hex(at) };
    if (c < 0x80 && !isAsciiAlnum(c)) return { kind: "char", c };
    throw this.fail(`invalid escape \\${ch}`, at);
  }

  private hex(at: number): number {
    const m = /^(?:\{([0-9A-Fa-f]{1,6})\}|([0-9A-Fa-f]{2}))/.exec(this.src.slice(this.pos, this.pos + 8));
    const digits = m?.[1] ?? m?.[2];
    if (!m || digits === undefined) throw this.fail("invalid \\x escape", at);
    const value = parseInt(digits, 16);
    if (value > MAX_CODE_POINT) throw this.fail("\\x escape beyond U+10FFFF", at);
    this.pos += m[0].length;
    return value;
  }

  /** After `[`: the class's ranges, negated when it starts with `^`. `]` first is a literal (RE2). */
  private charClass(at: number): Ranges {
    const negate = this.eat("^");
    const pairs: Ranges = [];
    let first = true;
    for (;;) {
      if (this.pos >= this.src.length) throw this.fail("missing ]", at);
      if (!first && this.eat("]")) break;
      first = false;
      if (this.src.startsWith("[:", this.pos)) throw this.fail("POSIX classes like [:alpha:] are not supported", this.pos);
      const itemAt = this.pos;
      const lo = this.classAtom();
      if (typeof lo !== "number") {
        pairs.push(...lo);
        continue;
      }
      if (this.src.startsWith("-", this.pos) && !this.src.startsWith("-]", this.pos) && this.pos + 1 < this.src.length) {
        this.pos++;
        const hi = this.classAtom();
        if (typeof hi !== "number") throw this.fail("a class like \\d cannot end a range", itemAt);
        if (hi < lo) throw this.fail("invalid character class range", itemAt);
        pairs.push(lo, hi);
      } else {
        pairs.push(lo, lo);
      }
    }
    const ranges = normalize(pairs);
    return negate ? complement(ranges) : ranges;
  }

  private classAtom(): number | Ranges {
    const c = this.take();
    if (c !== 0x5c) return c;
    const e = this.escape(true);
    if (e.kind === "set") return e.ranges;
    if (e.kind === "char") return e.c;
    throw this.fail("anchors are not allowed in a class", this.pos - 2);
  }
}

/** The syntax tree of `pattern`, or a RegexSyntaxError naming what is refused and where. */
export function parseRegex(pattern: string): RegexNode {
  const node = new RegexParser(pattern).parse();
  if (programSize(node) + 1 > MAX_PROGRAM) throw new RegexSyntaxError(`pattern too large (over ${MAX_PROGRAM} instructions once repetitions are expanded)`, 0);
  return node;
}
