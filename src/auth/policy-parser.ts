/**
 * Parses ACL policies in the engine's HCL syntax and in its JSON form:
 *
 *   path "pki/issue/*" { capabilities = ["create", "update"] }
 *   {"path": {"pki/issue/*": {"capabilities": ["create", "update"]}}}
 *
 * Errors carry the line and the reason. The legacy `policy = "read"` shorthand is accepted.
 * Parameter constraints (allowed_parameters, …) are refused rather than silently ignored, so a
 * policy never reads as stricter than it is.
 *
 * Identity templates in paths (`path "kv/data/{{identity.entity.name}}/*"`, Vault's "Templated
 * policies", developer.hashicorp.com/vault/docs/concepts/policies) are refused at write: Lanyard
 * has no identity entities, so no template could ever be filled in, and matched literally such a
 * rule would hand one shared path to every holder. A policy stored before that refusal is read
 * with its templated rules left out, which is what Vault does with a path whose template cannot
 * be resolved for the token (one without an entity).
 */
import { MAX_JSON_DEPTH, parseJsonLimited } from "../core/json";

import { CAPABILITIES, type Capability } from "../core/caller";

export { CAPABILITIES, type Capability };

export interface PathRule {
  path: string;
  capabilities: Capability[];
}

export interface ParsedPolicy {
  rules: PathRule[];
}

export class PolicyParseError extends Error {}

export interface ParseOptions {
  /** "refuse" (a write: PolicyParseError) or "skip" (a stored policy: the rule is left out). */
  templatedPaths: "refuse" | "skip";
}

const REFUSE: ParseOptions = { templatedPaths: "refuse" };

/** Whether a policy path holds an identity template (`{{…}}`). */
export function isTemplatedPath(path: string): boolean {
  return path.includes("{{");
}

// Legacy shorthand of the engine's first policy syntax.
const LEGACY: Record<string, Capability[]> = {
  deny: ["deny"],
  read: ["read", "list"],
  write: ["create", "read", "update", "patch", "delete", "list"],
  sudo: ["create", "read", "update", "patch", "delete", "list", "sudo"],
};

type Value = string | number | boolean | Value[] | Block;
interface Entry {
  key: string;
  labels: string[];
  value: Value;
  line: number;
}
interface Block {
  entries: Entry[];
}

interface Tok {
  kind: "str" | "ident" | "num" | "punct";
  text: string;
  line: number;
}

function tokenize(src: string): Tok[] {
  const toks: Tok[] = [];
  let i = 0;
  let line = 1;
  const fail = (msg: string): never => {
    throw new PolicyParseError(`line ${line}: ${msg}`);
  };
  while (i < src.length) {
    const c = src[i] as string;
    if (c === "\n") {
      line++;
      i++;
    } else if (/\s/.test(c)) {
      i++;
    } else if (c === "#" || (c === "/" && src[i + 1] === "/")) {
      while (i < src.length && src[i] !== "\n") i++;
    } else if (c === "/" && src[i + 1] === "*") {
      const end = src.indexOf("*/", i + 2);
      if (end < 0) fail("unterminated comment");
      for (let j = i; j < end; j++) if (src[j] === "\n") line++;
      i = end + 2;
    } else if (c === '"') {
      let s = "";
      i++;
      for (;;) {
        if (i >= src.length || src[i] === "\n") fail("unterminated string");
        const ch = src[i] as string;
        if (ch === '"') break;
        if (ch === "\\") {
          const nx = src[i + 1];
          const map: Record<string, string> = { n: "\n", t: "\t", '"': '"', "\\": "\\" };
          if (nx === undefined || !(nx in map)) fail(`invalid escape \\${nx ?? ""}`);
          s += map[nx as string];
          i += 2;
        } else {
          s += ch;
          i++;
        }
      }
      i++;
      toks.push({ kind: "str", text: s, line });
    } else if ("{}[]=,".includes(c)) {
      toks.push({ kind: "punct", text: c, line });
      i++;
    } else if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][\w.-]*/.exec(src.slice(i)) as RegExpExecArray;
      toks.push({ kind: "ident", text: m[0], line });
      i += m[0].length;
    } else if (/[-\d]/.test(c)) {
      const m = /^-?\d+(\.\d+)?/.exec(src.slice(i));
      if (!m) fail(`unexpected character '${c}'`);
      toks.push({ kind: "num", text: (m as RegExpExecArray)[0], line });
      i += (m as RegExpExecArray)[0].length;
    } else {
      fail(`unexpected character '${c}'`);
    }
  }
  return toks;
}

class Parser {
  #pos = 0;
  /** Open blocks and lists: body() and value() recurse, so nesting is bounded. */
  #depth = 0;
  constructor(private readonly toks: Tok[]) {}

  #peek(): Tok | undefined {
    return this.toks[this.#pos];
  }
  #line(): number {
    return this.#peek()?.line ?? this.toks[this.toks.length - 1]?.line ?? 1;
  }
  #fail(msg: string): never {
    throw new PolicyParseError(`line ${this.#line()}: ${msg}`);
  }
  #take(): Tok {
    const t = this.toks[this.#pos++];
    if (!t) this.#fail("unexpected end of policy");
    return t;
  }
  #punct(p: string): boolean {
    const t = this.#peek();
    if (t?.kind === "punct" && t.text === p) {
      this.#pos++;
      return true;
    }
    return false;
  }

  #enter(): void {
    if (++this.#depth > MAX_JSON_DEPTH) this.#fail(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  }

  body(closing: boolean): Block {
    this.#enter();
    const entries: Entry[] = [];
    for (;;) {
      const t = this.#peek();
      if (!t) {
        if (closing) this.#fail("expected '}'");
        this.#depth--;
        return { entries };
      }
      if (t.kind === "punct" && t.text === "}") {
        if (!closing) this.#fail("unexpected '}'");
        this.#pos++;
        this.#depth--;
        return { entries };
      }
      if (t.kind !== "ident" && t.kind !== "str") this.#fail(`expected a key, found '${t.text}'`);
      this.#pos++;
      const line = t.line;
      const labels: string[] = [];
      while (this.#peek()?.kind === "str") labels.push(this.#take().text);
      if (this.#punct("=")) {
        entries.push({ key: t.text, labels, value: this.value(), line });
      } else if (this.#punct("{")) {
        entries.push({ key: t.text, labels, value: this.body(true), line });
      } else {
        throw new PolicyParseError(`line ${line}: expected '=' or '{' after "${t.text}"`);
      }
      this.#punct(",");
    }
  }

  value(): Value {
    const t = this.#take();
    if (t.kind === "str") return t.text;
    if (t.kind === "num") return Number(t.text);
    if (t.kind === "ident" && (t.text === "true" || t.text === "false")) return t.text === "true";
    if (t.kind === "punct" && t.text === "[") {
      this.#enter();
      const items: Value[] = [];
      while (!this.#punct("]")) {
        items.push(this.value());
        if (!this.#punct(",") && !(this.#peek()?.text === "]" && this.#peek()?.kind === "punct")) {
          this.#fail("expected ',' or ']' in list");
        }
      }
      this.#depth--;
      return items;
    }
    if (t.kind === "punct" && t.text === "{") return this.body(true);
    this.#pos--;
    return this.#fail(`unexpected '${t.text}'`);
  }
}

function toCapabilities(path: string, raw: unknown, where: string): Capability[] {
  if (!Array.isArray(raw)) throw new PolicyParseError(`${where}: capabilities of path "${path}" must be a list`);
  const out: Capability[] = [];
  for (const c of raw) {
    if (typeof c !== "string" || !(CAPABILITIES as readonly string[]).includes(c)) {
      throw new PolicyParseError(`${where}: path "${path}": invalid capability ${JSON.stringify(c)}`);
    }
    out.push(c as Capability);
  }
  return out;
}

function ruleFrom(path: string, settings: Record<string, unknown>, where: string, opts: ParseOptions): PathRule | null {
  if (path === "" && settings.capabilities === undefined) {
    throw new PolicyParseError(`${where}: empty path`);
  }
  if (isTemplatedPath(path)) {
    if (opts.templatedPaths === "skip") return null;
    throw new PolicyParseError(
      `${where}: path "${path}": identity templating is not supported (Lanyard has no identity entities, so the template could never be filled in)`,
    );
  }
  const caps = new Set<Capability>();
  for (const [key, v] of Object.entries(settings)) {
    if (key === "capabilities") {
      for (const c of toCapabilities(path, v, where)) caps.add(c);
    } else if (key === "policy") {
      const legacy = typeof v === "string" ? LEGACY[v] : undefined;
      if (!legacy) throw new PolicyParseError(`${where}: path "${path}": invalid policy ${JSON.stringify(v)}`);
      for (const c of legacy) caps.add(c);
    } else {
      throw new PolicyParseError(
        `${where}: path "${path}": unsupported key "${key}" (only capabilities and policy are supported)`,
      );
    }
  }
  if (path.includes("*") && path.indexOf("*") !== path.length - 1) {
    throw new PolicyParseError(`${where}: path "${path}": '*' is only allowed at the end of a path`);
  }
  return { path: path.replace(/^\//, ""), capabilities: [...caps] };
}

function blockToObject(b: Block): Record<string, unknown> {
  const o: Record<string, unknown> = {};
  for (const e of b.entries) o[e.key] = e.value;
  return o;
}

function parseJsonPolicy(src: string, opts: ParseOptions): ParsedPolicy {
  // The parser's own message would quote the policy text; say only what is wrong.
  const parsed = parseJsonLimited(src);
  if (!parsed.ok) {
    throw new PolicyParseError(parsed.reason === "malformed" ? "malformed JSON" : `JSON nested deeper than ${MAX_JSON_DEPTH} levels`);
  }
  const doc = parsed.value;
  if (typeof doc !== "object" || doc === null || Array.isArray(doc)) throw new PolicyParseError("JSON policy must be an object");
  const rules: PathRule[] = [];
  for (const [key, v] of Object.entries(doc)) {
    if (key === "name") continue;
    if (key !== "path") throw new PolicyParseError(`unsupported top-level key "${key}"`);
    if (typeof v !== "object" || v === null || Array.isArray(v)) throw new PolicyParseError(`"path" must be an object`);
    for (const [p, settings] of Object.entries(v)) {
      if (typeof settings !== "object" || settings === null || Array.isArray(settings)) {
        throw new PolicyParseError(`path "${p}" must map to an object`);
      }
      const rule = ruleFrom(p, settings as Record<string, unknown>, "json", opts);
      if (rule) rules.push(rule);
    }
  }
  return { rules };
}

/**
 * Parses a policy text (HCL or JSON). Throws PolicyParseError with the line and the reason.
 * Writes use the default options (templated paths refused); loading a stored policy skips them.
 */
export function parsePolicy(src: string, opts: ParseOptions = REFUSE): ParsedPolicy {
  if (src.trimStart().startsWith("{")) return parseJsonPolicy(src, opts);
  const block = new Parser(tokenize(src)).body(false);
  const rules: PathRule[] = [];
  const add = (rule: PathRule | null) => {
    if (rule) rules.push(rule);
  };
  for (const e of block.entries) {
    const where = `line ${e.line}`;
    if (e.key === "name" && typeof e.value === "string") continue;
    if (e.key !== "path") throw new PolicyParseError(`${where}: unsupported top-level key "${e.key}"`);
    if (e.labels.length === 1 && typeof e.value === "object" && !Array.isArray(e.value)) {
      add(ruleFrom(e.labels[0] as string, blockToObject(e.value), where, opts));
    } else if (e.labels.length === 0 && typeof e.value === "object" && !Array.isArray(e.value)) {
      // `path = { "a/*" = { ... } }` or `path { "a/*" { ... } }`
      for (const inner of e.value.entries) {
        const settings = inner.value;
        const p = inner.labels[0] ?? inner.key;
        if (typeof settings !== "object" || Array.isArray(settings)) {
          throw new PolicyParseError(`line ${inner.line}: path "${p}" must be a block`);
        }
        add(ruleFrom(p, blockToObject(settings), `line ${inner.line}`, opts));
      }
    } else {
      throw new PolicyParseError(`${where}: expected path "<glob>" { ... }`);
    }
  }
  return { rules };
}
