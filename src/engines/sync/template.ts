/**
 * The secret-name template language (reference/secrets-sync.md §1.11): a safe subset of Go
 * text/template, parsed and evaluated here without any code generation.
 *
 * Supported: text; actions `{{ pipeline }}` with trim markers `{{- ` / ` -}}`; comments
 * `{{/* ... *\/}}`; pipelines `cmd | cmd | ...` where a piped value becomes the last argument;
 * operands `.Field` (the variables of §1.11), `$var`, "quoted" and `raw` strings, integers,
 * true/false and parenthesised pipelines; variable declaration `$x := ...` and assignment
 * `$x = ...`; the functions of Vault's template helper that are deterministic (uppercase,
 * lowercase, replace, truncate, truncate_sha256, sha256, base64) plus Go's print and printf.
 *
 * Why it is safe: there are no control structures at all (if/range/with/define/template/block
 * are refused), so evaluation is one pass over a tree whose size is bounded by the template
 * length; nesting depth and every intermediate string are capped; functions are a fixed table of
 * pure string operations. Non-deterministic helpers (random, uuid, unix_time, timestamp) are
 * refused because a destination must compute the same external name again to unsync it.
 */
import { bytesToBase64, bytesToHex, sha256Hex } from "../../core/encoding";
import { trimEndChars } from "../../core/text";

export const TEMPLATE_VARIABLES = [
  "DestinationType",
  "DestinationName",
  "NamespacePath",
  "NamespaceBaseName",
  "NamespaceID",
  "MountPath",
  "MountBaseName",
  "MountAccessor",
  "SecretPath",
  "SecretBaseName",
  "SecretKey",
] as const;
export type TemplateVariable = (typeof TEMPLATE_VARIABLES)[number];
export type TemplateData = Record<TemplateVariable, string>;

/** Longest template source accepted. */
export const MAX_TEMPLATE_LENGTH = 1024;
/** Longest string any step of an evaluation may produce (also the longest rendered name). */
export const MAX_RENDERED_LENGTH = 4096;
const MAX_DEPTH = 8;

export class TemplateError extends Error {}

type Value = string | number | boolean;

type Operand =
  | { kind: "field"; name: TemplateVariable }
  | { kind: "var"; name: string }
  | { kind: "literal"; value: Value }
  | { kind: "func"; name: FuncName }
  | { kind: "pipe"; pipe: Pipeline };

interface Command {
  operands: Operand[];
}

interface Pipeline {
  /** `$x := ...` declares, `$x = ...` assigns; either prints nothing. */
  decl?: { name: string };
  commands: Command[];
}

type TemplateNode = { kind: "text"; text: string } | { kind: "action"; pipe: Pipeline };

export interface ParsedTemplate {
  source: string;
  nodes: TemplateNode[];
  /** Every variable the template mentions, including in declarations (§1.11 validation rule). */
  variables: ReadonlySet<TemplateVariable>;
}

// ---------------------------------------------------------------------------------------------
// Functions

interface FuncDef {
  /** Number of arguments, counting the piped value. */
  arity: number | "variadic";
  call(args: Value[]): Value | Promise<Value>;
}

function str(fn: string, v: Value | undefined): string {
  if (typeof v !== "string") throw new TemplateError(`${fn}: wrong type for value; expected string; got ${typeof v}`);
  return v;
}

function int(fn: string, v: Value | undefined): number {
  if (typeof v !== "number") throw new TemplateError(`${fn}: wrong type for value; expected int; got ${typeof v}`);
  return v;
}

function capped(s: string): string {
  if (s.length > MAX_RENDERED_LENGTH) throw new TemplateError(`result longer than ${MAX_RENDERED_LENGTH} characters`);
  return s;
}

/** Go's %v of a value. */
function show(v: Value): string {
  return typeof v === "string" ? v : String(v);
}

/** Go's fmt.Sprint: operands joined, with a space between two operands that are both non-strings. */
function sprint(args: Value[]): string {
  let out = "";
  args.forEach((a, i) => {
    const prev = args[i - 1];
    if (i > 0 && typeof a !== "string" && prev !== undefined && typeof prev !== "string") out += " ";
    out += show(a);
  });
  return out;
}

/** A small fmt.Sprintf: verbs %s %v %d %q %x %X and %%, no flags or widths. */
function sprintf(format: string, args: Value[]): string {
  let out = "";
  let next = 0;
  for (let i = 0; i < format.length; i++) {
    const c = format[i];
    if (c !== "%") {
      out += c;
      continue;
    }
    const verb = format[++i];
    if (verb === "%") {
      out += "%";
      continue;
    }
    if (verb === undefined || !"svdqxX".includes(verb)) {
      throw new TemplateError(`printf: unsupported verb %${verb ?? ""} (supported: %s %v %d %q %x %X %%)`);
    }
    const arg = args[next++];
    if (arg === undefined) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    switch (verb) {
      case "s":
      case "v":
        out += show(arg);
        break;
      case "d":
        out += typeof arg === "number" ? String(arg) : `%!d(${typeof arg}=${show(arg)})`;
        break;
      case "q":
        out += typeof arg === "string" ? JSON.stringify(arg) : `%!q(${typeof arg}=${show(arg)})`;
        break;
      default: {
        const hex =
          typeof arg === "number" ? arg.toString(16) : bytesToHex(new TextEncoder().encode(show(arg)));
        out += verb === "X" ? hex.toUpperCase() : hex;
      }
    }
    capped(out);
  }
  if (next < args.length) out += `%!(EXTRA ${args.slice(next).map(show).join(", ")})`;
  return out;
}

const FUNCS = {
  uppercase: { arity: 1, call: ([s]: Value[]) => str("uppercase", s).toUpperCase() },
  lowercase: { arity: 1, call: ([s]: Value[]) => str("lowercase", s).toLowerCase() },
  // Vault's helper takes (find, replacement, input): the piped value comes last.
  replace: {
    arity: 3,
    call: ([find, repl, s]: Value[]) => capped(str("replace", s).replaceAll(str("replace", find), str("replace", repl))),
  },
  truncate: {
    arity: 2,
    call: ([n, s]: Value[]) => {
      const max = int("truncate", n);
      if (max <= 0) throw new TemplateError("truncate: max length must be > 0");
      const chars = Array.from(str("truncate", s));
      return chars.length > max ? chars.slice(0, max).join("") : chars.join("");
    },
  },
  // Keeps max-8 characters and appends the first 8 hex digits of the SHA-256 of the cut tail.
  truncate_sha256: {
    arity: 2,
    call: async ([n, s]: Value[]) => {
      const max = int("truncate_sha256", n);
      if (max <= 8) throw new TemplateError("truncate_sha256: max length must be > 8");
      const chars = Array.from(str("truncate_sha256", s));
      if (chars.length <= max) return chars.join("");
      const cut = max - 8;
      return chars.slice(0, cut).join("") + (await sha256Hex(chars.slice(cut).join(""))).slice(0, 8);
    },
  },
  sha256: { arity: 1, call: ([s]: Value[]) => sha256Hex(str("sha256", s)) },
  base64: { arity: 1, call: ([s]: Value[]) => capped(bytesToBase64(new TextEncoder().encode(str("base64", s)))) },
  print: { arity: "variadic", call: (args: Value[]) => capped(sprint(args)) },
  printf: {
    arity: "variadic",
    call: ([format, ...rest]: Value[]) => sprintf(str("printf", format), rest),
  },
} satisfies Record<string, FuncDef>;
type FuncName = keyof typeof FUNCS;

const NON_DETERMINISTIC = new Set(["random", "uuid", "unix_time", "unix_time_millis", "timestamp"]);
const CONTROL = new Set(["if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"]);

function isFunc(name: string): name is FuncName {
  return Object.hasOwn(FUNCS, name);
}

function isVariable(name: string): name is TemplateVariable {
  return (TEMPLATE_VARIABLES as readonly string[]).includes(name);
}

// ---------------------------------------------------------------------------------------------
// Lexing and parsing

type Token =
  | { t: "lparen" | "rparen" | "pipe" | "declare" | "assign" }
  | { t: "field"; name: string }
  | { t: "var"; name: string }
  | { t: "ident"; name: string }
  | { t: "literal"; value: Value };

const SPACE = /[ \t\r\n]/;
const IDENT = /[A-Za-z0-9_]/;

const GO_ESCAPES: Record<string, string> = { a: "\x07", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v", "\\": "\\", '"': '"' };

class Parser {
  private pos = 0;
  private readonly declared = new Set<string>();
  readonly variables = new Set<TemplateVariable>();

  constructor(private readonly src: string) {}

  private fail(msg: string): never {
    throw new TemplateError(`${msg} (at character ${this.pos + 1})`);
  }

  parse(): TemplateNode[] {
    const nodes: TemplateNode[] = [];
    let trimNext = false;
    while (this.pos < this.src.length) {
      const open = this.src.indexOf("{{", this.pos);
      let text = this.src.slice(this.pos, open === -1 ? undefined : open);
      if (trimNext) text = text.replace(/^[ \t\r\n]+/, "");
      if (open === -1) {
        if (text) nodes.push({ kind: "text", text });
        break;
      }
      this.pos = open + 2;
      // "{{- " trims the whitespace before the action; "{{-3}}" is the number -3 (Go rule).
      if (this.src[this.pos] === "-" && SPACE.test(this.src[this.pos + 1] ?? "")) {
        text = trimEndChars(text, " \t\r\n");
        this.pos += 2;
      }
      if (text) nodes.push({ kind: "text", text });
      const action = this.action();
      trimNext = action.trimAfter;
      if (action.pipe) nodes.push({ kind: "action", pipe: action.pipe });
    }
    return nodes;
  }

  /** Parses from after "{{" to after "}}". */
  private action(): { pipe: Pipeline | null; trimAfter: boolean } {
    this.skipSpace();
    if (this.src.startsWith("/*", this.pos)) {
      const end = this.src.indexOf("*/", this.pos + 2);
      if (end === -1) this.fail("unclosed comment");
      this.pos = end + 2;
      return { pipe: null, trimAfter: this.closeDelim() };
    }
    const tokens = this.tokens();
    const trimAfter = this.closeDelim();
    const pipe = new TokenParser(tokens, this).pipeline(0, true);
    return { pipe, trimAfter };
  }

  /** Consumes " -}}" or "}}"; returns whether the trim marker was present. */
  private closeDelim(): boolean {
    const ws = this.skipSpace();
    if (ws && this.src.startsWith("-}}", this.pos)) {
      this.pos += 3;
      return true;
    }
    if (this.src.startsWith("}}", this.pos)) {
      this.pos += 2;
      return false;
    }
    return this.fail(this.pos >= this.src.length ? "unclosed action" : `unexpected "${this.src[this.pos]}" in action`);
  }

  private skipSpace(): boolean {
    const start = this.pos;
    while (SPACE.test(this.src[this.pos] ?? "")) this.pos++;
    return this.pos > start;
  }

  private ident(): string {
    const start = this.pos;
    while (IDENT.test(this.src[this.pos] ?? "")) this.pos++;
    return this.src.slice(start, this.pos);
  }

  /** The tokens of one action, up to (not including) its closing delimiter. */
  private tokens(): Token[] {
    const out: Token[] = [];
    for (;;) {
      const before = this.pos;
      const hadSpace = this.skipSpace();
      const c = this.src[this.pos];
      if (c === undefined) this.fail("unclosed action");
      if (this.src.startsWith("}}", this.pos) || (hadSpace && this.src.startsWith("-}}", this.pos))) {
        // Leave the space for closeDelim: " -}}" is a trim marker only after whitespace.
        this.pos = before;
        return out;
      }
      if (c === "(") {
        out.push({ t: "lparen" });
        this.pos++;
      } else if (c === ")") {
        out.push({ t: "rparen" });
        this.pos++;
      } else if (c === "|") {
        out.push({ t: "pipe" });
        this.pos++;
      } else if (this.src.startsWith(":=", this.pos)) {
        out.push({ t: "declare" });
        this.pos += 2;
      } else if (c === "=") {
        out.push({ t: "assign" });
        this.pos++;
      } else if (c === '"') {
        out.push({ t: "literal", value: this.quoted() });
      } else if (c === "`") {
        const end = this.src.indexOf("`", this.pos + 1);
        if (end === -1) this.fail("unterminated raw string");
        out.push({ t: "literal", value: this.src.slice(this.pos + 1, end) });
        this.pos = end + 1;
      } else if (c === "." || c === "$") {
        this.pos++;
        const name = this.ident();
        if (c === "." && this.src[this.pos] === ".") this.fail("chained fields are not supported");
        out.push(c === "." ? { t: "field", name } : { t: "var", name });
      } else if (/[-0-9]/.test(c)) {
        const m = /^-?[0-9]+/.exec(this.src.slice(this.pos));
        if (!m || IDENT.test(this.src[this.pos + m[0].length] ?? "") || this.src[this.pos + m[0].length] === ".") {
          this.fail("only decimal integer numbers are supported");
        }
        const n = Number(m[0]);
        if (!Number.isSafeInteger(n)) this.fail(`number ${m[0]} is out of range`);
        out.push({ t: "literal", value: n });
        this.pos += m[0].length;
      } else if (/[A-Za-z_]/.test(c)) {
        out.push({ t: "ident", name: this.ident() });
      } else {
        this.fail(`unexpected "${c}" in action`);
      }
    }
  }

  private quoted(): string {
    let out = "";
    this.pos++;
    for (;;) {
      const c = this.src[this.pos++];
      if (c === undefined || c === "\n") this.fail("unterminated quoted string");
      if (c === '"') return out;
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = this.src[this.pos++] ?? "";
      const simple = GO_ESCAPES[e];
      if (simple !== undefined) {
        out += simple;
      } else if (e === "x" || e === "u") {
        const len = e === "x" ? 2 : 4;
        const hex = this.src.slice(this.pos, this.pos + len);
        if (!new RegExp(`^[0-9A-Fa-f]{${len}}$`).test(hex)) this.fail(`invalid escape \\${e}${hex}`);
        out += String.fromCharCode(parseInt(hex, 16));
        this.pos += len;
      } else {
        this.fail(`unsupported escape sequence \\${e}`);
      }
    }
  }

  declare(name: string): void {
    this.declared.add(name);
  }

  isDeclared(name: string): boolean {
    return this.declared.has(name);
  }

  error(msg: string): never {
    return this.fail(msg);
  }
}

class TokenParser {
  private i = 0;

  constructor(
    private readonly tokens: Token[],
    private readonly p: Parser,
  ) {}

  pipeline(depth: number, top: boolean): Pipeline {
    if (depth > MAX_DEPTH) this.p.error(`parentheses nested deeper than ${MAX_DEPTH}`);
    let decl: Pipeline["decl"];
    const first = this.tokens[this.i];
    const second = this.tokens[this.i + 1];
    if (first?.t === "var" && (second?.t === "declare" || second?.t === "assign")) {
      if (!top) this.p.error("variables can only be declared at the start of an action");
      if (first.name === "") this.p.error("cannot assign to $");
      if (second.t === "assign" && !this.p.isDeclared(first.name)) this.p.error(`undefined variable "$${first.name}"`);
      decl = { name: first.name };
      this.i += 2;
    }
    const commands: Command[] = [];
    for (;;) {
      commands.push(this.command(depth, commands.length > 0));
      const t = this.tokens[this.i];
      if (t?.t !== "pipe") break;
      this.i++;
    }
    const end = this.tokens[this.i];
    if (top && end !== undefined) this.p.error(`unexpected ${end.t} in action`);
    // Declared after the pipeline, so "$x := $x" does not see itself (Go's scoping).
    if (decl) this.p.declare(decl.name);
    return { decl, commands };
  }

  private command(depth: number, piped: boolean): Command {
    const operands: Operand[] = [];
    for (;;) {
      const t = this.tokens[this.i];
      if (t === undefined || t.t === "pipe" || t.t === "rparen") break;
      this.i++;
      operands.push(this.operand(t, depth));
    }
    const head = operands[0];
    if (!head) return this.p.error("missing value for command");
    const argc = operands.length - 1 + (piped ? 1 : 0);
    if (head.kind === "func") {
      const { arity } = FUNCS[head.name];
      if (arity !== "variadic" && argc !== arity) {
        this.p.error(`wrong number of args for ${head.name}: want ${arity} got ${argc}`);
      }
      if (head.name === "printf" && argc === 0) this.p.error("wrong number of args for printf: want at least 1 got 0");
    } else if (argc > 0) {
      this.p.error(piped ? "a value can only be piped into a function" : "can't give argument to non-function");
    }
    return { operands };
  }

  private operand(t: Token, depth: number): Operand {
    switch (t.t) {
      case "literal":
        return { kind: "literal", value: t.value };
      case "field":
        if (t.name === "") this.p.error("the dot itself cannot be used; name a variable such as .SecretPath");
        if (!isVariable(t.name)) this.p.error(`unknown variable ".${t.name}" (known: ${TEMPLATE_VARIABLES.map((v) => `.${v}`).join(", ")})`);
        this.p.variables.add(t.name);
        return { kind: "field", name: t.name };
      case "var":
        if (t.name === "") this.p.error("$ itself cannot be used; name a variable such as .SecretPath");
        if (!this.p.isDeclared(t.name)) this.p.error(`undefined variable "$${t.name}"`);
        return { kind: "var", name: t.name };
      case "ident":
        if (t.name === "true" || t.name === "false") return { kind: "literal", value: t.name === "true" };
        if (t.name === "nil") this.p.error("nil is not a command");
        if (CONTROL.has(t.name)) this.p.error(`{{${t.name}}} and other control structures are not supported in secret name templates`);
        if (NON_DETERMINISTIC.has(t.name)) {
          this.p.error(`function "${t.name}" is not allowed: a secret name must render the same every time`);
        }
        if (!isFunc(t.name)) this.p.error(`function "${t.name}" not defined`);
        return { kind: "func", name: t.name };
      case "lparen": {
        const pipe = this.pipeline(depth + 1, false);
        if (this.tokens[this.i]?.t !== "rparen") this.p.error("unclosed left paren");
        this.i++;
        return { kind: "pipe", pipe };
      }
      default:
        return this.p.error(`unexpected ${t.t} in operand`);
    }
  }
}

/** Parses a template; throws TemplateError with a message that says what and where. */
export function parseTemplate(source: string): ParsedTemplate {
  if (source.length > MAX_TEMPLATE_LENGTH) throw new TemplateError(`template is longer than ${MAX_TEMPLATE_LENGTH} characters`);
  const parser = new Parser(source);
  const nodes = parser.parse();
  return { source, nodes, variables: parser.variables };
}

// ---------------------------------------------------------------------------------------------
// Evaluation

async function evalPipeline(pipe: Pipeline, data: TemplateData, vars: Map<string, Value>): Promise<Value> {
  let value: Value | undefined;
  for (const cmd of pipe.commands) value = await evalCommand(cmd, data, vars, value);
  if (value === undefined) throw new TemplateError("missing value for command");
  if (pipe.decl) vars.set(pipe.decl.name, value);
  return value;
}

async function evalOperand(op: Operand, data: TemplateData, vars: Map<string, Value>): Promise<Value> {
  switch (op.kind) {
    case "literal":
      return op.value;
    case "field":
      return data[op.name];
    case "var": {
      const v = vars.get(op.name);
      if (v === undefined) throw new TemplateError(`undefined variable "$${op.name}"`);
      return v;
    }
    case "pipe":
      return evalPipeline(op.pipe, data, vars);
    case "func":
      return FUNCS[op.name].call([]);
  }
}

async function evalCommand(cmd: Command, data: TemplateData, vars: Map<string, Value>, piped: Value | undefined): Promise<Value> {
  const [head, ...rest] = cmd.operands;
  if (!head) throw new TemplateError("missing value for command");
  if (head.kind !== "func") return evalOperand(head, data, vars);
  const args: Value[] = [];
  for (const op of rest) args.push(await evalOperand(op, data, vars));
  if (piped !== undefined) args.push(piped);
  const out = await FUNCS[head.name].call(args);
  return typeof out === "string" ? capped(out) : out;
}

/** Renders a parsed template. Work is linear in the template size; every string is capped. */
export async function renderTemplate(t: ParsedTemplate, data: TemplateData): Promise<string> {
  const vars = new Map<string, Value>();
  let out = "";
  for (const node of t.nodes) {
    if (node.kind === "text") {
      out += node.text;
    } else {
      const v = await evalPipeline(node.pipe, data, vars);
      if (!node.pipe.decl) out += show(v);
    }
    capped(out);
  }
  return out;
}
