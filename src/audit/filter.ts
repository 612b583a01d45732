/**
 * The audit device option `filter`: Vault's filter expressions
 * (https://developer.hashicorp.com/vault/docs/enterprise/audit/filtering,
 * https://developer.hashicorp.com/vault/docs/concepts/filtering), whose grammar is go-bexpr's
 * (github.com/hashicorp/go-bexpr, grammar.peg). A device writes an entry only when its filter
 * is true for that entry.
 *
 * Grammar, loosest binding first (`not` > `and` > `or`):
 *
 *   expr    := and ("or" and)*
 *   and     := unary ("and" unary)*
 *   unary   := "not" unary | "(" expr ")" | match
 *   match   := selector ("==" | "!=" | "contains" | "not contains" | "matches" | "not matches") value
 *            | selector "is" ["not"] "empty"
 *            | value ("in" | "not in") selector
 *   value   := "double-quoted" | `raw` | number | bare word (taken as its text, as go-bexpr does)
 *
 * Selectors: path, operation, mount_type, mount_point, namespace (Vault's audit filter
 * properties); any other is refused. `contains` / `in` are substring tests on these string
 * fields (go-bexpr's `in` on a string). `matches` is an unanchored RE2-style search run by a
 * linear-time engine (src/core/linear-regex.ts) that refuses, at parse time, what it cannot
 * run safely. Double-quoted strings take Go's escapes (strconv.Unquote) and also `\"`, which
 * go-bexpr does not allow; backquoted strings are raw.
 *
 * Every error is a 400 whose message starts with `filter:` and gives the offset (in characters,
 * from 0) where the problem is. Limits keep hostile expressions cheap: FILTER_LIMITS.
 */
import { badRequest } from "../core/errors";
import { LinearRegex, RegexSyntaxError } from "../core/linear-regex";
import { tokenize, type Token } from "./filter-tokens";

export const FILTER_LIMITS = {
  /** UTF-8 bytes of the expression. */
  maxBytes: 4096,
  /** Nesting of parentheses and `not`. */
  maxDepth: 32,
  /** Comparisons (`path == "…"`, `path matches "…"`, …) in one expression. */
  maxClauses: 64,
  /** Instructions of all the `matches` patterns together (the per-character cost of evaluating them all). */
  maxPatternProgram: 1000,
} as const;

export const FILTER_SELECTORS = ["path", "operation", "mount_type", "mount_point", "namespace"] as const;
export type FilterSelector = (typeof FILTER_SELECTORS)[number];
export type AuditFilterFields = Record<FilterSelector, string>;

type MatchOp = "==" | "!=" | "contains" | "not contains" | "matches" | "not matches" | "is empty" | "is not empty";

export type FilterNode =
  | { kind: "or"; items: FilterNode[] }
  | { kind: "and"; items: FilterNode[] }
  | { kind: "not"; item: FilterNode }
  | { kind: "match"; selector: FilterSelector; op: MatchOp; value: string; regex: LinearRegex | null };

export interface AuditFilter {
  /** The expression as the operator wrote it (what a read of the device returns). */
  readonly source: string;
  readonly root: FilterNode;
}

const fail = (message: string) => badRequest(`filter: ${message}`);

/** A token's text for an error message: JSON-quoted (no control characters) and cut to 24 characters. */
const quoted = (text: string) => JSON.stringify(text.length > 24 ? `${text.slice(0, 24)}…` : text);
const describe = (t: Token) => (t.kind === "eof" ? "end of expression" : `token ${quoted(t.text)}`);

const isSelector = (s: string): s is FilterSelector => (FILTER_SELECTORS as readonly string[]).includes(s);

class FilterParser {
  private i = 0;
  private depth = 0;
  private clauses = 0;
  private patternProgram = 0;

  constructor(private readonly tokens: Token[]) {}

  parse(): FilterNode {
    const node = this.or();
    const t = this.peek();
    if (t.kind !== "eof") throw this.unexpected(t, t.kind === ")" ? "no ( to close" : "\"and\", \"or\" or the end");
    return node;
  }

  private peek(k = 0): Token {
    return this.tokens[Math.min(this.i + k, this.tokens.length - 1)] as Token;
  }

  private isWord(t: Token, word: string): boolean {
    return t.kind === "word" && t.text === word;
  }

  private unexpected(t: Token, expected: string): Error {
    return fail(`unexpected ${describe(t)} at ${t.pos}; expected ${expected}`);
  }

  private or(): FilterNode {
    const items = [this.and()];
    while (this.isWord(this.peek(), "or")) {
      this.i++;
      items.push(this.and());
    }
    return items.length === 1 ? (items[0] as FilterNode) : { kind: "or", items };
  }

  private and(): FilterNode {
    const items = [this.unary()];
    while (this.isWord(this.peek(), "and")) {
      this.i++;
      items.push(this.unary());
    }
    return items.length === 1 ? (items[0] as FilterNode) : { kind: "and", items };
  }

  private enter(t: Token): void {
    if (++this.depth > FILTER_LIMITS.maxDepth) throw fail(`nested deeper than ${FILTER_LIMITS.maxDepth} at ${t.pos}`);
  }

  private unary(): FilterNode {
    const t = this.peek();
    if (this.isWord(t, "not")) {
      this.i++;
      this.enter(t);
      const item = this.unary();
      this.depth--;
      return { kind: "not", item };
    }
    if (t.kind === "(") {
      this.i++;
      this.enter(t);
      const inner = this.or();
      const close = this.peek();
      if (close.kind !== ")") throw this.unexpected(close, `")" to close the "(" at ${t.pos}`);
      this.i++;
      this.depth--;
      return inner;
    }
    return this.match();
  }

  private selector(t: Token): FilterSelector {
    if (t.kind !== "word") throw this.unexpected(t, "a selector (path, operation, mount_type, mount_point or namespace)");
    if (!isSelector(t.text)) throw fail(`unknown selector ${JSON.stringify(t.text)} at ${t.pos}; allowed: ${FILTER_SELECTORS.join(", ")}`);
    return t.text;
  }

  private value(): { value: string; token: Token } {
    const t = this.peek();
    if (t.kind !== "word" && t.kind !== "string" && t.kind !== "number") throw this.unexpected(t, "a value (a quoted string)");
    this.i++;
    return { value: t.value, token: t };
  }

  /** `not` followed by `word` at the cursor (the two-word operators). */
  private notThen(word: string): boolean {
    return this.isWord(this.peek(), "not") && this.isWord(this.peek(1), word);
  }

  private match(): FilterNode {
    const first = this.peek();
    if (++this.clauses > FILTER_LIMITS.maxClauses) throw fail(`more than ${FILTER_LIMITS.maxClauses} comparisons at ${first.pos}`);
    // value (not) in selector
    const inOp = this.isWord(this.peek(1), "in") ? "contains" : this.isWord(this.peek(1), "not") && this.isWord(this.peek(2), "in") ? "not contains" : null;
    if (inOp) {
      const { value } = this.value();
      this.i += inOp === "contains" ? 1 : 2;
      const sel = this.peek();
      const selector = this.selector(sel);
      this.i++;
      return { kind: "match", selector, op: inOp, value, regex: null };
    }
    const selector = this.selector(first);
    this.i++;
    const t = this.peek();
    let op: MatchOp;
    if (t.kind === "op") op = t.text === "==" ? "==" : "!=";
    else if (this.isWord(t, "contains") || this.isWord(t, "matches")) op = t.text === "contains" ? "contains" : "matches";
    else if (this.notThen("contains") || this.notThen("matches")) op = this.peek(1).text === "contains" ? "not contains" : "not matches";
    else if (this.isWord(t, "is") && this.isWord(this.peek(1), "empty")) op = "is empty";
    else if (this.isWord(t, "is") && this.isWord(this.peek(1), "not") && this.isWord(this.peek(2), "empty")) op = "is not empty";
    else throw this.unexpected(t, `an operator after ${JSON.stringify(selector)} (==, !=, matches, not matches, contains, not contains, is empty, is not empty)`);
    this.i += op === "is not empty" ? 3 : op === "is empty" || op.startsWith("not ") ? 2 : 1;
    if (op === "is empty" || op === "is not empty") return { kind: "match", selector, op, value: "", regex: null };
    const { value, token } = this.value();
    const regex = op === "matches" || op === "not matches" ? this.pattern(value, token) : null;
    return { kind: "match", selector, op, value, regex };
  }

  private pattern(value: string, token: Token): LinearRegex {
    let regex: LinearRegex;
    try {
      regex = LinearRegex.compile(value);
    } catch (e) {
      if (!(e instanceof RegexSyntaxError)) throw e;
      throw fail(`invalid pattern ${quoted(token.text)} at ${token.pos}: ${e.message} (at ${e.offset} in the pattern)`);
    }
    this.patternProgram += regex.size;
    if (this.patternProgram > FILTER_LIMITS.maxPatternProgram) {
      throw fail(`patterns too large at ${token.pos} (over ${FILTER_LIMITS.maxPatternProgram} instructions in all)`);
    }
    return regex;
  }
}

/** Parses a filter expression; throws a 400 ApiError (`filter: …`) on anything it refuses. */
export function parseFilter(text: string): AuditFilter {
  if (text.length > FILTER_LIMITS.maxBytes || new TextEncoder().encode(text).length > FILTER_LIMITS.maxBytes) {
    throw fail(`expression longer than ${FILTER_LIMITS.maxBytes} bytes`);
  }
  const tokens = tokenize(text, (message) => fail(message));
  if (tokens.length === 1) throw fail("empty expression");
  return { source: text, root: new FilterParser(tokens).parse() };
}

/** The `filter` option as enable receives it: absent or empty (Vault's default) means no filter. */
export function parseFilterOption(value: string | undefined): AuditFilter | null {
  return value === undefined || value.trim() === "" ? null : parseFilter(value);
}

function compare(node: Extract<FilterNode, { kind: "match" }>, field: string): boolean {
  switch (node.op) {
    case "==":
      return field === node.value;
    case "!=":
      return field !== node.value;
    case "contains":
      return field.includes(node.value);
    case "not contains":
      return !field.includes(node.value);
    case "matches":
      return node.regex?.test(field) ?? false;
    case "not matches":
      return !(node.regex?.test(field) ?? false);
    case "is empty":
      return field === "";
    case "is not empty":
      return field !== "";
  }
}

/**
 * Three-valued evaluation: true or false, or null when the answer depends on a selector missing
 * from `known` (Kleene logic: `false and ?` is false, `true or ?` is true). Sound, not complete:
 * null can also come back for an expression that is in fact constant, e.g.
 * `operation == "read" or operation != "read"` with `operation` unknown.
 */
function partial(node: FilterNode, known: Partial<AuditFilterFields>): boolean | null {
  switch (node.kind) {
    case "match": {
      const field = known[node.selector];
      return field === undefined ? null : compare(node, field);
    }
    case "not": {
      const v = partial(node.item, known);
      return v === null ? null : !v;
    }
    case "and":
    case "or": {
      const decisive = node.kind === "or";
      let unknown = false;
      for (const item of node.items) {
        const v = partial(item, known);
        if (v === decisive) return decisive;
        if (v === null) unknown = true;
      }
      return unknown ? null : !decisive;
    }
  }
}

/** Whether a device with this filter writes the entry with these fields. */
export function evaluate(filter: AuditFilter, fields: AuditFilterFields): boolean {
  return partial(filter.root, fields) === true;
}

/**
 * The filter's answer when only some fields are known (say the path of a public PKI read and its
 * operation, before the mount or namespace are looked up): true or false when the unknown ones
 * cannot change it, null otherwise. A caller skips auditing a request for a device only on false.
 */
export function constantFor(filter: AuditFilter, known: Partial<AuditFilterFields>): boolean | null {
  return partial(filter.root, known);
}
