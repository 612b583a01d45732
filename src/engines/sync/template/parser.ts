/**
 * Lexing and parsing a template into the tree of ./types.ts; every error says what and where.
 * Nesting depth and the template's length are bounded, so the tree is bounded too.
 */
import { trimEndChars } from "../../../core/text";
import { CONTROL, FUNCS, isFunc, NON_DETERMINISTIC } from "./functions";
import {
  MAX_DEPTH,
  MAX_TEMPLATE_LENGTH,
  TEMPLATE_VARIABLES,
  TemplateError,
  type Command,
  type Operand,
  type ParsedTemplate,
  type Pipeline,
  type TemplateNode,
  type TemplateVariable,
  type Value,
} from "./types";

function isVariable(name: string): name is TemplateVariable {
  return (TEMPLATE_VARIABLES as readonly string[]).includes(name);
}

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
