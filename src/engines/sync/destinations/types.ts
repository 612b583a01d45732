/**
 * What a destination type is made of (Vault API: /v1/sys/sync/destinations/:type/:name, the
 * fields of each type): its connection fields, which of them are sensitive (sealed at rest,
 * obfuscated on read) or immutable after creation, its defaults, its tag rules and its
 * validation. Each provider's destination.ts (../providers/<type>/) is one `DestinationDef`,
 * and its provider value (../providers/types.ts SyncProvider) adds the rest.
 */
import { badRequest, type ApiError } from "../../../core/errors";
import type { FieldSchema } from "../../../core/fields";

/**
 * A destination type's name: one registered provider's `type` (../providers/registry.ts). Names
 * from outside (paths, bodies, queue messages) are checked there (findProvider) before use.
 */
export type DestinationType = string;

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

/** Provider limits for custom tags (each provider's tag or label limits); null for types without tags (repohost, webhost-project). */
export interface TagRules {
  /** Custom tags allowed: the provider's maximum minus the one ownership tag the sync adds (Vault adds `hashicorp:vault`). */
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
  /** Members that cannot change once the destination exists (as in Vault: region, vault URI, project, repository…). */
  immutable: readonly string[];
  defaultGranularity: Granularity;
  /** The template the service reports (and uses) when the user sets none, per granularity. */
  defaultTemplate: Record<Granularity, string>;
  /**
   * Adapts a rendered name to the provider's character set (Vault API: the secret-name template
   * "casing and delimiters are adapted to each destination's character set"; upstream does not
   * publish its algorithm, so each provider's rule is its own, documented in docs/secrets-sync.md).
   */
  normalizeName(name: string): string;
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

/** What a sensitive member reads as: a run of asterisks, or "" when it was never set (as Vault answers a read). */
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

/** A provider's endpoint variable: `<NAME>_ENDPOINT` (refused in production by src/core/config.ts). */
export type EndpointVar = `${string}_ENDPOINT`;

/**
 * An operator endpoint variable (docs/configuration.md); blank counts as unset. Only ever
 * set in development: src/core/config.ts refuses to serve with one set in production.
 */
export function envVar(env: Env, name: EndpointVar): string | undefined {
  const v = (env as unknown as Record<string, unknown>)[name];
  return typeof v === "string" && v.trim() !== "" ? v.trim() : undefined;
}

/**
 * The default name templates of the types whose names are environment-variable names
 * (repository-host secrets, web-host variables): Vault's default for GitHub and Vercel
 * destinations (Vault API: /sys/sync/destinations/gh/:name and /vercel-project/:name,
 * `secret_name_template`), upper-cased.
 */
export const UPPER_SNAKE_TEMPLATE = {
  "secret-path": "VAULT_{{ .MountAccessor | uppercase }}_{{ .SecretPath | uppercase }}",
  "secret-key": "VAULT_{{ .MountAccessor | uppercase }}_{{ .SecretPath | uppercase }}_{{ .SecretKey | uppercase }}",
} as const;

/** Repository-host secrets and web-host variables: [A-Z0-9_], not starting with a digit. */
export function upperSnakeName(name: string): string {
  const s = name.toUpperCase().replace(/[^A-Z0-9_]/g, "_");
  return /^[0-9]/.test(s) ? `_${s}` : s;
}

/** A string that is safe to place in a URL path segment or header: no control characters. */
export function plainText(field: string, value: string, max: number): void {
  if (value.length > max) throw invalid(field, `must be at most ${max} characters`);
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(value)) throw invalid(field, "must not contain control characters");
}
