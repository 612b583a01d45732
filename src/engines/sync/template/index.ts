/**
 * The secret-name template language (Vault API: `secret_name_template` of
 * /v1/sys/sync/destinations/:type/:name): a safe subset of Go text/template, parsed and
 * evaluated here without any code generation. ./parser.ts builds the tree, ./functions.ts holds
 * the functions, this module evaluates.
 *
 * Supported: text; actions `{{ pipeline }}` with trim markers `{{- ` / ` -}}`; comments
 * `{{/* ... *\/}}`; pipelines `cmd | cmd | ...` where a piped value becomes the last argument;
 * operands `.Field` (the variables Vault documents: ./types.ts TEMPLATE_VARIABLES), `$var`,
 * "quoted" and `raw` strings, integers, true/false and parenthesised pipelines; variable declaration `$x := ...` and assignment
 * `$x = ...`; the functions of Vault's template helper that are deterministic (uppercase,
 * lowercase, replace, truncate, truncate_sha256, sha256, base64) plus Go's print and printf.
 *
 * Why it is safe: there are no control structures at all (if/range/with/define/template/block
 * are refused), so evaluation is one pass over a tree whose size is bounded by the template
 * length; nesting depth and every intermediate string are capped; functions are a fixed table of
 * pure string operations. Non-deterministic helpers (random, uuid, unix_time, timestamp) are
 * refused because a destination must compute the same external name again to unsync it.
 */
import { FUNCS } from "./functions";
import { capped, show, TemplateError, type Command, type Operand, type ParsedTemplate, type Pipeline, type TemplateData, type Value } from "./types";

export { parseTemplate } from "./parser";
export { MAX_RENDERED_LENGTH, MAX_TEMPLATE_LENGTH, TemplateError, type ParsedTemplate, type TemplateData } from "./types";

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
