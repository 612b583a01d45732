/**
 * What a destination type is made of (spec/secrets-sync-api.md "Destination types";
 * reference/secrets-sync.md §1.4): its connection fields, which of them are sensitive (sealed at
 * rest, obfuscated on read) or immutable after creation, its defaults, its tag rules and its
 * validation. Every type is one `DestinationDef` in the registry (./registry.ts), typed so that
 * the compiler refuses a type without one. Part 2 adds a connector per type beside these.
 */
import type { EndpointOverrideVar } from "../../../core/config";
import { badRequest, type ApiError } from "../../../core/errors";
import type { FieldSchema } from "../../../core/fields";
import type { NameStyle } from "../template";

export const DESTINATION_TYPES = ["cloudone-sm", "cloudtwo-kv", "cloudthree-sm", "repohost", "webhost-project"] as const;
export type DestinationType = (typeof DESTINATION_TYPES)[number];

export function isDestinationType(s: string): s is DestinationType {
  return (DESTINATION_TYPES as readonly string[]).includes(s);
}

/**
 * Vault's names of the five types (issue 12), accepted wherever a type appears in a path or a
 * body; answers always use the spec's names.
 */
export const VAULT_TYPE_ALIASES: Readonly<Record<string, DestinationType>> = {
  "aws-sm": "cloudone-sm",
  "azure-kv": "cloudtwo-kv",
  "gcp-sm": "cloudthree-sm",
  gh: "repohost",
  "vercel-project": "webhost-project",
};

/** The spec's type for a spec name or a Vault alias; null for anything else. */
export function canonicalDestinationType(s: string): DestinationType | null {
  if (isDestinationType(s)) return s;
  return VAULT_TYPE_ALIASES[s] ?? null;
}

export const GRANULARITIES = ["secret-path", "secret-key"] as const;
export type Granularity = (typeof GRANULARITIES)[number];

/** Connection details as stored: strings and lists of strings only. */
export type ConnectionValue = string | string[];
export type Connection = Record<string, ConnectionValue>;

export interface ValidationContext {
  env: Env;
  /** The stored connection when this write updates a destination, else null. */
  previous: Connection | null;
  /** Whether a repository-host app of this name exists in the request's namespace. */
  appExists(name: string): Promise<boolean>;
}

/** Provider limits for custom tags (reference §2.1–2.3); null for types without tags (§1.4). */
export interface TagRules {
  /** Custom tags allowed: the provider's maximum minus the one ownership tag the sync adds (§1.13). */
  maxTags: number;
  maxKeyLength: number;
  maxValueLength: number;
  /** Extra rule for a key or value; returns why it is refused, or null. */
  checkKey?(key: string): string | null;
  checkValue?(value: string): string | null;
}

export interface DestinationDef {
  type: DestinationType;
  /** Connection fields only; the common option fields are added by ./fields.ts. */
  fields: FieldSchema;
  /** Members sealed at rest and shown as asterisks on read. */
  sensitive: readonly string[];
  /** Members that cannot change once the destination exists (reference table 1.4). */
  immutable: readonly string[];
  defaultGranularity: Granularity;
  /** The template the service reports (and uses) when the user sets none, per granularity. */
  defaultTemplate: Record<Granularity, string>;
  nameStyle: NameStyle;
  tags: TagRules | null;
  /**
   * Checks (and may normalise) the complete connection details of a create or an update. Throws
   * an ApiError naming the field; never includes a sensitive value in the message.
   */
  validate(conn: Connection, ctx: ValidationContext): Promise<Connection>;
  /** The read form of the connection details; sensitive members are already obfuscated. */
  view?(conn: Connection): Record<string, unknown>;
  /**
   * PATCH hook: the members the client sent may imply others must be cleared (e.g. switching a
   * repository-host destination from a token to an app).
   */
  afterMerge?(merged: Connection, sent: ReadonlySet<string>): Connection;
}

/** What a sensitive member reads as: a run of asterisks, or "" when it was never set (§1.6). */
export const OBFUSCATED = "*****";

/** A 400 naming the field, in one shape for every destination rule. */
export function invalid(field: string, reason: string): ApiError {
  return badRequest(`${field}: ${reason}`);
}

export function str(conn: Connection, name: string): string {
  const v = conn[name];
  return typeof v === "string" ? v : "";
}

export function list(conn: Connection, name: string): string[] {
  const v = conn[name];
  return Array.isArray(v) ? v : [];
}

export type EndpointVar = EndpointOverrideVar;

/**
 * An operator endpoint variable (CONTRACT.md "Configuration"); blank counts as unset. Only ever
 * set in development: src/core/config.ts refuses to serve with one set in production.
 */
export function envVar(env: Env, name: EndpointVar): string | undefined {
  const v = env[name];
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

/** A string that is safe to place in a URL path segment or header: no control characters. */
export function plainText(field: string, value: string, max: number): void {
  if (value.length > max) throw invalid(field, `must be at most ${max} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw invalid(field, "must not contain control characters");
}
