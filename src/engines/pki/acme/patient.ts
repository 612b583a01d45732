/**
 * Patient validation (RFC 8555 §8.2; docs/pki-acme.md "Patient validation"): a challenge is
 * tried up to 6 times before its authorization turns invalid, so a DNS record that
 * propagates late, or a responder that starts late, still validates.
 *
 * - Attempt 1 runs within the challenge POST (most validations pass at once, and the answer then
 *   already shows `valid`). A failure keeps the challenge `processing` with the failure in
 *   `error`, and queues the next attempt on the ACME validation queue with a delay
 *   (RETRY_DELAYS_S: attempts at 0, 3, 9, 21, 45 and 90 s). The last failure makes the challenge
 *   and its authorization `invalid`.
 * - Invariants: a message carries ids and its attempt number only; the consumer reloads the
 *   challenge and acts only while it is `processing` with exactly `attempt − 1` attempts
 *   recorded, and records its failure conditionally on that count (storage/acme-store.ts
 *   recordFailedAttempt), so a message delivered twice schedules one next attempt, and a late
 *   message cannot touch a challenge that already ended. An attempt that cannot be queued ends
 *   the challenge `invalid` at once rather than leaving it processing for ever.
 * - The consumer never sleeps: waiting is the queue's (message `delaySeconds`).
 */
import { openDb } from "../../../core/db/client";
import type { Db } from "../../../core/db/client";
import { accountByIdQuery, acmeConfigQuery, finishChallenge, getAuthzWithChallenges, recordFailedAttempt } from "../storage/acme-store";
import { decodeAcmeConfig } from "./config";
import { problemBody } from "./problem";
import { validateChallenge, type AcmeProblem } from "./validate";

/** The queue wrangler.toml's [[queues.consumers]] names for validation retries. */
export const ACME_QUEUE_NAME = "lanyard-acme-validation";

/** Delay before attempt n + 2 (index n): 6 attempts over 90 s (Vault makes 5). */
export const RETRY_DELAYS_S: readonly number[] = [3, 6, 12, 24, 45];

/**
 * The schedule in force: RETRY_DELAYS_S, or in development (`ENVIRONMENT=development`) the
 * `ACME_RETRY_DELAYS_S` variable (e.g. "1,1,2"), so tests need not wait 90 s for a failure. A
 * malformed value, or one set elsewhere, is ignored.
 */
export function retryDelays(env: Env): readonly number[] {
  const raw = (env.ACME_RETRY_DELAYS_S ?? "").trim();
  if (raw === "" || env.ENVIRONMENT !== "development") return RETRY_DELAYS_S;
  const out = raw.split(",").map((x) => Number(x.trim()));
  return out.length <= 10 && out.every((n) => Number.isInteger(n) && n >= 0 && n <= 900) ? out : RETRY_DELAYS_S;
}

export interface ValidationMessage {
  mountId: string;
  authzId: string;
  type: string;
  /** The attempt this message runs (2…MAX_ATTEMPTS). */
  attempt: number;
}

export interface Attempt {
  db: Db;
  env: Env;
  mountId: string;
  authzId: string;
  type: string;
  /** 1 for the POST's own attempt. */
  attempt: number;
}

type Outcome = { ok: true } | { ok: false; problem: AcmeProblem };

/** Validates, never throws (a validator that does anyway is a failed attempt). */
export async function tryValidation(env: Env, dnsResolver: string, type: string, identifier: string, token: string, keyAuthorization: string): Promise<Outcome> {
  try {
    return await validateChallenge(env, { dnsResolver }, type as "http-01" | "dns-01", identifier, token, keyAuthorization);
  } catch (e) {
    return { ok: false, problem: problemBody("serverInternal", `${type}: validation failed: ${e instanceof Error ? e.message : String(e)}`) };
  }
}

/**
 * Records the outcome of attempt `a.attempt`: valid, or a failure that is retried (queued with
 * its delay) or final. Returns the challenge's status afterwards.
 */
export async function settleAttempt(a: Attempt, outcome: Outcome): Promise<"valid" | "invalid" | "processing"> {
  if (outcome.ok) {
    await finishChallenge(a.db, a.mountId, a.authzId, a.type, { valid: true, at: Date.now(), attempt: a.attempt });
    return "valid";
  }
  const error = { ...outcome.problem };
  const delay = retryDelays(a.env)[a.attempt - 1];
  if (delay !== undefined && (await recordFailedAttempt(a.db, a.mountId, a.authzId, a.type, a.attempt, error))) {
    const next: ValidationMessage = { mountId: a.mountId, authzId: a.authzId, type: a.type, attempt: a.attempt + 1 };
    try {
      await a.env.ACME_QUEUE.send(next, { delaySeconds: delay });
      return "processing";
    } catch (e) {
      console.error(`acme validation: attempt ${next.attempt} of ${a.authzId}/${a.type} could not be queued:`, e);
    }
  } else if (delay !== undefined) {
    // Another delivery of this attempt recorded it first and scheduled the next one.
    return "processing";
  }
  await finishChallenge(a.db, a.mountId, a.authzId, a.type, { valid: false, error, attempt: a.attempt });
  return "invalid";
}

function parseMessage(body: unknown): ValidationMessage | null {
  if (typeof body !== "object" || body === null) return null;
  const m = body as Record<string, unknown>;
  if (typeof m.mountId !== "string" || typeof m.authzId !== "string" || typeof m.type !== "string" || typeof m.attempt !== "number") return null;
  return { mountId: m.mountId, authzId: m.authzId, type: m.type, attempt: m.attempt };
}

/** One queued attempt: reload, check it is still due, validate, settle. */
async function runQueued(db: Db, env: Env, m: ValidationMessage): Promise<void> {
  const found = await getAuthzWithChallenges(db, m.mountId, m.authzId);
  const challenge = found?.challenges.find((c) => c.type === m.type);
  if (!found || !challenge || challenge.status !== "processing" || challenge.attempts !== m.attempt - 1 || found.authz.status !== "pending") return;
  const [accounts, configs] = await db.batch([accountByIdQuery(db, m.mountId, found.authz.accountId), acmeConfigQuery(db, m.mountId)]);
  const account = accounts[0];
  const attempt: Attempt = { db, env, mountId: m.mountId, authzId: m.authzId, type: m.type, attempt: m.attempt };
  if (!account || account.status !== "valid") {
    await finishChallenge(db, m.mountId, m.authzId, m.type, { valid: false, error: problemBody("unauthorized", "the account is no longer valid"), attempt: m.attempt });
    return;
  }
  const cfg = decodeAcmeConfig(configs[0]?.value);
  const outcome = await tryValidation(env, cfg.dns_resolver, m.type, found.authz.identifierValue, challenge.token, `${challenge.token}.${account.thumbprint}`);
  await settleAttempt(attempt, outcome);
}

/** The queue consumer: each message on its own, acked once handled; a store failure retries it. */
export async function handleAcmeValidationBatch(batch: MessageBatch<unknown>, env: Env): Promise<void> {
  const db = openDb(env.DB);
  await Promise.all(
    batch.messages.map(async (msg) => {
      const m = parseMessage(msg.body);
      if (!m) {
        console.error(`acme validation: dropping malformed message ${msg.id}`);
        msg.ack();
        return;
      }
      try {
        await runQueued(db, env, m);
        msg.ack();
      } catch (e) {
        console.error(`acme validation: attempt ${m.attempt} of ${m.authzId}/${m.type} failed:`, e);
        msg.retry({ delaySeconds: 5 });
      }
    }),
  );
}
