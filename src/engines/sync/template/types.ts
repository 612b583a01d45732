/**
 * The template language's vocabulary (./index.ts describes the language): the variables a
 * template may read, its values, the parsed tree, and the caps every step respects.
 */

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
/** Deepest nesting of parenthesised pipelines. */
export const MAX_DEPTH = 8;

export class TemplateError extends Error {}

export type Value = string | number | boolean;

/** The functions a template may call (./functions.ts FUNCS defines each). */
export type FuncName = "uppercase" | "lowercase" | "replace" | "truncate" | "truncate_sha256" | "sha256" | "base64" | "print" | "printf";

export type Operand =
  | { kind: "field"; name: TemplateVariable }
  | { kind: "var"; name: string }
  | { kind: "literal"; value: Value }
  | { kind: "func"; name: FuncName }
  | { kind: "pipe"; pipe: Pipeline };

export interface Command {
  operands: Operand[];
}

export interface Pipeline {
  /** `$x := ...` declares, `$x = ...` assigns; either prints nothing. */
  decl?: { name: string };
  commands: Command[];
}

export type TemplateNode = { kind: "text"; text: string } | { kind: "action"; pipe: Pipeline };

export interface ParsedTemplate {
  source: string;
  nodes: TemplateNode[];
  /** Every variable the template mentions, including in declarations (a secret-key template must mention .SecretKey). */
  variables: ReadonlySet<TemplateVariable>;
}

/** Every string an evaluation produces passes here: longer than MAX_RENDERED_LENGTH is refused. */
export function capped(s: string): string {
  if (s.length > MAX_RENDERED_LENGTH) throw new TemplateError(`result longer than ${MAX_RENDERED_LENGTH} characters`);
  return s;
}

/** Go's %v of a value. */
export function show(v: Value): string {
  return typeof v === "string" ? v : String(v);
}
