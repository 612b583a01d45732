/**
 * The one interface every connector implements (DESIGN.md "Connectors"), and the typed error
 * they turn provider failures into. A connector speaks one provider's wire protocol with fetch
 * and WebCrypto; it never logs or echoes a secret value.
 */
import type { RepohostApp } from "../store";
import type { DestinationRecord } from "../store";

/** Everything a connector may use: the destination (credentials unsealed) and the bindings. */
export interface ConnectorContext {
  env: Env;
  dest: DestinationRecord;
  /** Loads a repository-host app of the destination's namespace (repohost with app_name). */
  loadApp(name: string): Promise<RepohostApp | null>;
}

export interface ExternalSecret {
  /** The external name, already rendered and normalised for the type. */
  name: string;
  value: string;
}

export interface Connector {
  /** Creates or overwrites one external secret (idempotent). */
  put(ctx: ConnectorContext, secret: ExternalSecret): Promise<void>;
  /** Deletes one external secret; succeeds when it is already gone (idempotent). */
  remove(ctx: ConnectorContext, name: string): Promise<void>;
}

/**
 * A provider failure. `client` failures are the caller's (credentials, permissions, validation):
 * not retried. `external` ones are the provider's (5xx, 429, timeouts): retried with backoff.
 * The message names the provider's error code and never contains a secret value.
 */
export class ConnectorError extends Error {
  readonly kind: "client" | "external";
  readonly code: string;
  /** Seconds the provider asked to wait (Retry-After), when it did. */
  readonly retryAfter: number | undefined;

  constructor(kind: "client" | "external", code: string, message: string, retryAfter?: number) {
    super(message);
    this.kind = kind;
    this.code = code;
    this.retryAfter = retryAfter;
  }

  get retryable(): boolean {
    return this.kind === "external";
  }
}
