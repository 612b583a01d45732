/**
 * The one interface every connector implements (each provider's connector.ts), the reader that
 * reads an external secret back for drift, and the typed error they turn provider failures
 * into. A connector speaks one provider's wire protocol with fetch and WebCrypto; it never logs
 * or echoes a secret value.
 */
import type { Ownership } from "../external-store";
import type { ProviderLimits } from "../limits/types";
import type { DestinationRecord, RepohostApp } from "../store";
import type { ReadBack } from "./read-back";

/** Everything a connector may use: the destination (credentials unsealed) and the bindings. */
export interface ConnectorContext {
  env: Env;
  dest: DestinationRecord;
  /** Loads a repository-host app of the destination's namespace (repohost with app_name). */
  loadApp(name: string): Promise<RepohostApp | null>;
  /** The provider's rate limits: every call to the destination's API passes its gate (../limits). */
  limits: ProviderLimits;
}

export interface ExternalSecret {
  /** The external name, already rendered and normalised for the type. */
  name: string;
  value: string;
  /**
   * Who made the secret, as recorded by its first write (docs/secrets-sync.md "2. Never delete what Lanyard did not create"); absent before that
   * write. The connector marks only what Lanyard created (`lanyard-managed` tag/label), and
   * where the provider's write does not say whether it created the secret, it looks first when
   * this is absent.
   */
  ownership?: Ownership;
  /**
   * The tags/labels Lanyard sets on the secret are already there: its last write (with this
   * ownership) was made with the destination as it is now (./../engine.ts Ledger.tagsCurrent).
   * A connector that sets them with a call of its own may then skip that call (cloudone-sm's
   * TagResource, a sync is then one write against the provider's cap, not two).
   */
  tagsCurrent?: boolean;
  /**
   * What the name's last write recorded as the provider's version (`PutResult.version`); absent
   * before the first write. The web host keeps there the ids of the variables Lanyard created.
   */
  version?: string;
}

/** What the engine recorded about a name it asks a connector to remove. */
export interface HeldSecret {
  ownership?: Ownership;
  /** `PutResult.version` of the name's last write. */
  version?: string;
}

/** The tag (Key Vault, the AWS-like store) or label (the Google-like store) on what Lanyard created. */
export const MANAGED_TAG = "lanyard-managed";
export const MANAGED_VALUE = "true";

/** What a write did at the provider. */
export interface PutResult {
  /** The write created the secret (it did not exist); false when it overwrote one. */
  created: boolean;
  /** The provider's id of the version written, when it returns one. */
  version?: string;
  /** The provider's updated_at of the write, as the provider renders it, when it returns one. */
  updatedAt?: string;
  /**
   * The name also holds provider objects Lanyard did not create (the web host: variables with
   * the key that it found, on any deployment environment): recorded as `pre_existing` whatever
   * the first write found, so unsync and purge warn about them.
   */
  foreign?: boolean;
}

export interface Connector {
  /** Creates or overwrites one external secret (idempotent) and says which it did. */
  put(ctx: ConnectorContext, secret: ExternalSecret): Promise<PutResult>;
  /** Deletes one external secret; succeeds when it is already gone (idempotent). */
  remove(ctx: ConnectorContext, name: string, held?: HeldSecret): Promise<void>;
  /**
   * The name is several provider objects, each made by someone (the web host's variables, one
   * per set of deployment environments), and `remove` deletes only those the record says Lanyard
   * created: it is then called for a pre-existing name too, which keeps what it found.
   */
  readonly removesOnlyOwnParts?: boolean;
}

/**
 * Reads an external secret back (docs/secrets-sync.md "3. Drift is detected and repaired"): what
 * the provider holds now under a name Lanyard wrote, for reconciliation (../reconcile.ts) to
 * compare with what Lanyard last wrote. Where the provider returns the value (the three cloud
 * stores, the web host's decrypted read) the reader returns it; the repository host never
 * returns a value, so its reader returns the secret's `updated_at`. A reader never logs or
 * echoes the value: it goes straight to the HMAC comparison.
 */
export type Reader = (ctx: ConnectorContext, name: string) => Promise<ReadBack>;

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
