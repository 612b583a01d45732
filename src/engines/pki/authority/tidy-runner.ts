/**
 * The tidy job inside the mount's Authority Durable Object (Vault API /pki/tidy; docs/pki-tidy.md): start, status,
 * cancel, the auto-tidy check, and the alarm that runs the job one step at a time
 * (src/engines/pki/tidy/tidy-job.ts). State lives in the DO's storage under "tidy:*" keys.
 *
 * Invariants:
 * - One tidy at a time per mount. `start` reads the job and writes the new one with no other
 *   I/O in between, so the DO's input gate makes check-and-start atomic; while a job is Running
 *   (or Cancelling) every other start answers "already in progress".
 * - Only the alarm writes a Running job after its start, and only between steps. A step awaits
 *   D1, which lets other calls in (issuance's serial reservation, status, cancel): nothing here
 *   holds a lock across a step, so issuance is never blocked by a tidy.
 * - Cancel only sets "tidy:cancel" (and brings a pending pause's alarm forward to now); it never
 *   touches the job record, so it cannot race the step's write. The alarm checks the flag before
 *   each step (the checkpoint): the job ends as Cancelled there. Work of the step in flight when cancel arrived is kept (deletes are final).
 * - A restart mid-step loses nothing: the job record still says where the last completed step
 *   ended, and the alarm (durable; retried by the runtime when a handler fails) runs the step
 *   again. Steps are idempotent (tidy-job.ts). A status read re-arms a missing alarm of a
 *   Running job, as a safety net.
 * - Disabling the mount wipes the storage (Authority.purge): a step that finishes afterwards sees
 *   its job gone and writes nothing back.
 * - "tidy:last" is the last tidy end (or manual start), as upstream's lastTidy: auto-tidy runs
 *   when now > last + interval; before any tidy the mount's creation counts as the last end.
 */
import type { MountRow } from "../../../core/mount-store";
import { tidyStep } from "../tidy/tidy-job";
import { autoTidyDue, newJob, paramsFromAutoTidy, type AutoTidyConfig, type TidyJob, type TidyParams } from "../tidy/tidy";

const JOB = "tidy:job";
const MOUNT = "tidy:mount";
const CANCEL = "tidy:cancel";
const LAST = "tidy:last";

/**
 * The latest alarm a Durable Object accepts (setAlarm throws "This API doesn't support dates
 * after 2189"); a longer pause_duration (Go allows up to ~292 years) waits until then instead of
 * failing the step.
 */
const LATEST_ALARM_MS = Date.UTC(2189, 0, 1);

/** What tidy-status needs from the Authority. */
export interface TidySnapshot {
  job: TidyJob | null;
  cancelling: boolean;
  lastTidy: number | null;
}

export class TidyRunner {
  constructor(
    private readonly storage: DurableObjectStorage,
    private readonly env: Env,
  ) {}

  private async snapshot(): Promise<TidySnapshot> {
    const [job, cancel, last] = await Promise.all([
      this.storage.get<TidyJob>(JOB),
      this.storage.get<boolean>(CANCEL),
      this.storage.get<number>(LAST),
    ]);
    return { job: job ?? null, cancelling: job?.state === "Running" && cancel === true, lastTidy: last ?? null };
  }

  /** Starts a tidy unless one is running; false when one is. */
  async start(mount: MountRow, params: TidyParams, auto: boolean, now = Date.now()): Promise<boolean> {
    const current = await this.storage.get<TidyJob>(JOB);
    if (current?.state === "Running") return false;
    await this.storage.put({ [JOB]: newJob(params, now, auto), [MOUNT]: mount, [CANCEL]: false, [LAST]: now });
    await this.storage.setAlarm(now);
    return true;
  }

  async status(): Promise<TidySnapshot> {
    const snap = await this.snapshot();
    if (snap.job?.state === "Running" && (await this.storage.getAlarm()) === null) await this.storage.setAlarm(Date.now());
    return snap;
  }

  /** Asks a running tidy to stop at its next checkpoint; `running` false when none runs. */
  async cancel(): Promise<{ running: boolean; snapshot: TidySnapshot }> {
    const job = await this.storage.get<TidyJob>(JOB);
    if (job?.state !== "Running") return { running: false, snapshot: await this.snapshot() };
    await this.storage.put(CANCEL, true);
    // The checkpoint is the next alarm: bring a pause_duration wait forward, or a job pausing
    // for hours would stay Cancelling (and block every new tidy) until the pause ended.
    const alarm = await this.storage.getAlarm();
    const now = Date.now();
    if (alarm !== null && alarm > now) await this.storage.setAlarm(now);
    return { running: true, snapshot: await this.snapshot() };
  }

  /** The cron's check (upstream periodicFunc): starts an auto-tidy when one is due. */
  async autoTick(mount: MountRow, config: AutoTidyConfig, now = Date.now()): Promise<boolean> {
    const last = (await this.storage.get<number>(LAST)) ?? mount.createdAt;
    if (!autoTidyDue(config, last, now)) return false;
    return this.start(mount, paramsFromAutoTidy(config), true, now);
  }

  /** One step per alarm; schedules the next one or ends the job. */
  async onAlarm(): Promise<void> {
    const [job, mount, cancel] = await Promise.all([
      this.storage.get<TidyJob>(JOB),
      this.storage.get<MountRow>(MOUNT),
      this.storage.get<boolean>(CANCEL),
    ]);
    if (!job || !mount || job.state !== "Running") return;
    if (cancel === true) {
      await this.storage.put({ [JOB]: { ...job, state: "Cancelled", timeFinished: Date.now() }, [CANCEL]: false });
      console.log(`tidy on mount ${mount.accessor}: cancelled`);
      return;
    }
    let next: TidyJob;
    try {
      next = await tidyStep(this.env, mount, job, Date.now());
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      console.error(`tidy on mount ${mount.accessor} failed: ${message}`);
      next = { ...job, state: "Error", error: message, timeFinished: Date.now() };
    }
    // The mount may have been disabled (storage wiped) while the step awaited D1.
    if ((await this.storage.get<TidyJob>(JOB)) === undefined) return;
    if (next.state === "Running") {
      await this.storage.put(JOB, next);
      // A cancel that arrived during the step skips the pause: the next alarm is its checkpoint.
      const cancelled = (await this.storage.get<boolean>(CANCEL)) === true;
      await this.storage.setAlarm(Math.min(Date.now() + (cancelled ? 0 : next.params.pause_ms), LATEST_ALARM_MS));
      return;
    }
    const done: Record<string, unknown> = { [JOB]: next, [CANCEL]: false };
    // Only a successful run moves the auto-tidy clock (upstream tidyStatusStop + lastTidy).
    if (next.state === "Finished") done[LAST] = next.timeFinished ?? Date.now();
    await this.storage.put(done);
    const c = next.counters;
    console.log(
      `${next.auto ? "auto-tidy" : "tidy"} on mount ${mount.accessor}: ${next.state}; cert_store_deleted_count=${c.certStoreDeleted} revoked_cert_deleted_count=${c.revokedDeleted} missing_issuer_cert_count=${c.missingIssuer}`,
    );
  }
}
