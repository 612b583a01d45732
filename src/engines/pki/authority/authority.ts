/**
 * The Authority Durable Object: one instance per PKI mount, named by the mount accessor
 * (docs/architecture.md). It is the single writer for what must be serialized
 * across every isolate serving the mount.
 *
 * Invariants:
 * - A serial returned by `reserveSerials` has never been returned before for this mount, and
 *   never will be again: it is inserted in the DO's own SQLite table (primary key) before it is
 *   handed out, in the same synchronous block that checks for it, so concurrent callers cannot
 *   interleave (a DO runs one synchronous block at a time).
 * - Serials are random positive integers below 2^159 (as upstream's, 20 bytes at most; RFC 5280 §4.1.2.2
 *   limits serials to 20 octets and requires them to be positive), encoded as their minimal
 *   big-endian bytes in lowercase hex; the caller renders them colon-separated.
 * - A reserved serial that the caller never uses is simply a gap; nothing ever reuses it.
 * - The D1 unique index on (mount, serial) in pki_certs stays as a second guard.
 *
 * - CRL rebuilds run here, one at a time and coalesced; a request is answered by a build that
 *   started after it arrived, and CRL numbers only grow (invariants in ./crl-coordinator.ts).
 * - Once purged (the mount is disabled) the object is retired: it keeps only that mark and
 *   refuses serials, CRL builds and tidies, so a call that raced the disable cannot leave new
 *   state behind (src/core/lifecycle.ts). An accessor is never reused by another mount, so the
 *   mark is lifted only when D1 holds the mount's row alive again (active, same accessor): that
 *   happens after a restore of D1 to before the disable, and never during one (the row is
 *   "disabling" from the disable's first step until it is deleted). D1 stays the source of truth:
 *   everything kept here is a guard, derived, or transient (docs/operations.md "Backup").
 */
import { DurableObject } from "cloudflare:workers";
import { openDb } from "../../../core/db/client";
import { benchEnv } from "../../../core/db/bench-d1";
import { bytesToHex } from "../../../core/encoding";
import { autoRebuildDue, type CrlBuildReport, type CrlBuildRequest } from "../revocation/crl-rebuild";
import type { CrlConfig } from "../storage/store";
import type { TidyParams, AutoTidyConfig } from "../tidy/tidy";
import { MOUNT_DISABLING } from "../../../core/lifecycle";
import { mountAliveByAccessor, type MountRow } from "../../../core/mount-store";
import { CrlCoordinator, type CrlBuildRecord } from "./crl-coordinator";
import { TidyRunner, type TidySnapshot } from "./tidy-runner";

/** The most serials one call may reserve; callers batch below it. */
export const MAX_SERIALS_PER_CALL = 1000;

/** A random positive integer below 2^159 as minimal big-endian hex (no leading zero byte). */
export function randomSerialHex(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(20));
  // Clearing the top bit keeps the value below 2^159, so the DER INTEGER is positive in 20 octets.
  bytes[0] = (bytes[0] ?? 0) & 0x7f;
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  return bytesToHex(bytes.subarray(start));
}

export class Authority extends DurableObject<Env> {
  /** Lives as long as this instance: it holds the build queue (see ./crl-coordinator.ts). */
  private readonly crl: CrlCoordinator;

  /** Set by purge, and read back from storage when the object restarts. */
  private retired: boolean;

  constructor(ctx: DurableObjectState, env: Env) {
    // Benchmarks only (development only): this object's D1 round trips delayed and counted like
    // the Worker's (src/core/db/bench-d1.ts); the env itself otherwise.
    super(ctx, benchEnv(env));
    this.createTables();
    this.retired = ctx.storage.sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'retired'").toArray().length > 0;
    this.crl = new CrlCoordinator(ctx.storage, this.env);
  }

  private createTables(): void {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS serials (serial TEXT PRIMARY KEY, reserved_at INTEGER NOT NULL)");
  }

  /**
   * Thrown to a caller that raced the disable; the message makes the request a 409. A retired
   * object whose mount is alive in D1 again (a restore) returns to service instead.
   */
  private async refuseIfRetired(accessor: string): Promise<void> {
    if (!(await this.inService(accessor))) throw new Error(MOUNT_DISABLING);
  }

  /** False while retired; lifts the mark once the mount's row is alive in D1 again. */
  private async inService(accessor: string): Promise<boolean> {
    if (!this.retired) return true;
    // ctx.id.name is this object's name (the accessor) when the runtime provides it; a caller
    // naming another mount's accessor must not revive this one.
    const own = this.ctx.id.name;
    if ((own !== undefined && own !== accessor) || !(await mountAliveByAccessor(openDb(this.env.DB), accessor))) return false;
    this.ctx.storage.sql.exec("DROP TABLE IF EXISTS retired");
    this.retired = false;
    return true;
  }

  /** Reserves `count` fresh serials (hex, minimal encoding) for the mount with this accessor. */
  async reserveSerials(accessor: string, count = 1): Promise<string[]> {
    await this.refuseIfRetired(accessor);
    const n = Math.max(1, Math.min(MAX_SERIALS_PER_CALL, Math.trunc(count)));
    const out: string[] = [];
    const now = Date.now();
    // A collision is astronomically unlikely at 159 bits; the attempt cap only guards against a
    // broken random source turning this into an endless loop.
    for (let attempts = 0; out.length < n; attempts++) {
      if (attempts > n * 4 + 16) throw new Error("serial reservation failed: too many collisions");
      const serial = randomSerialHex();
      // ON CONFLICT DO NOTHING returns no row for a serial that was already reserved.
      const rows = this.ctx.storage.sql
        .exec<{ serial: string }>("INSERT INTO serials (serial, reserved_at) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING serial", serial, now)
        .toArray();
      if (rows.length === 1) out.push(serial);
    }
    return out;
  }

  /** How many serials this mount has reserved (tests and diagnostics). */
  reservedCount(): number {
    return this.ctx.storage.sql.exec<{ n: number }>("SELECT COUNT(*) AS n FROM serials").one().n;
  }

  /** Forgets everything: the mount is being disabled. Only the retirement mark stays. */
  async purge(): Promise<void> {
    this.retired = true;
    await this.ctx.storage.deleteAlarm();
    await this.ctx.storage.deleteAll();
    this.createTables();
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS retired (at INTEGER NOT NULL)");
  }

  /** Whether the mount's disable has purged this object (tests and diagnostics). */
  isRetired(): boolean {
    return this.retired;
  }

  // -- CRLs (RFC 5280 §5; invariants in ./crl-coordinator.ts) -----------------------------------

  /** Rebuilds the mount's CRLs; resolves once a build that started after this call finished. */
  async crlRebuild(mount: MountRow, req: CrlBuildRequest): Promise<CrlBuildReport> {
    await this.refuseIfRetired(mount.accessor);
    return this.crl.request(mount, req);
  }

  /** Called by the auto_rebuild cron job; builds what the schedule says is due. */
  async crlAutoTick(mount: MountRow, config: CrlConfig): Promise<CrlBuildReport | null> {
    if (!(await this.inService(mount.accessor))) return null;
    const due = await autoRebuildDue(openDb(this.env.DB), mount, config);
    return due ? this.crl.request(mount, { kind: due, force: false }) : null;
  }

  /** The builds this instance ran, oldest first (tests and diagnostics). */
  crlBuildHistory(): CrlBuildRecord[] {
    return this.crl.history;
  }

  // -- tidy (Vault API /pki/tidy; invariants in ./tidy-runner.ts) ------------------------------

  private tidyRunner(): TidyRunner {
    return new TidyRunner(this.ctx.storage, this.env);
  }

  /** Starts a tidy of this mount; false when one is already running. */
  async tidyStart(mount: MountRow, params: TidyParams): Promise<boolean> {
    await this.refuseIfRetired(mount.accessor);
    return this.tidyRunner().start(mount, params, false);
  }

  tidyStatus(): Promise<TidySnapshot> {
    return this.tidyRunner().status();
  }

  tidyCancel(): Promise<{ running: boolean; snapshot: TidySnapshot }> {
    return this.tidyRunner().cancel();
  }

  /** Called by the auto-tidy cron job; starts a tidy when one is due. */
  async tidyAutoTick(mount: MountRow, config: AutoTidyConfig): Promise<boolean> {
    if (!(await this.inService(mount.accessor))) return false;
    return this.tidyRunner().autoTick(mount, config);
  }

  /** The DO's single alarm drives the tidy job, one step per invocation. */
  override async alarm(): Promise<void> {
    await this.tidyRunner().onAlarm();
  }
}
