/**
 * ACME authorizations and challenges (RFC 8555 §7.5, §8): authorization/:id (read, deactivate)
 * and challenge/:authz/:type. A POST with a payload (`{}`) to a pending challenge starts its
 * validation: the challenge moves pending → processing once (a conditional UPDATE, so two
 * concurrent POSTs validate once), then validate.ts's validateChallenge (owned beside this
 * module) checks http-01 or dns-01 with the key authorization `<token>.<thumbprint>` (§8.1), and
 * the challenge and its authorization become valid or invalid together. The first attempt runs
 * within the request (bounded by the validator's 10 s deadline); a failure is retried in the
 * background (patient.ts, RFC 8555 §8.2) while the challenge stays processing with the last
 * failure in `error`, and the authorization turns invalid only when the attempts are spent.
 */
import { deactivateAuthz, getAuthzWithChallenges, claimChallenge, type AcmeAuthzRow, type AcmeChallengeRow } from "../storage/acme-store";
import { accountThumbprint, type AcmeReply, type AcmeRequest, type SignedRequest } from "./context";
import { acmeError } from "./problem";
import { retryDelays, settleAttempt, tryValidation } from "./patient";

const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, "Z");

function authzStatus(z: AcmeAuthzRow, now: number): string {
  return z.status === "pending" && z.expiresAt <= now ? "expired" : z.status;
}

function challengeJson(a: AcmeRequest, c: AcmeChallengeRow): Record<string, unknown> {
  return {
    type: c.type,
    url: a.url(`challenge/${c.authzId}/${c.type}`),
    token: c.token,
    status: c.status,
    ...(c.validatedAt ? { validated: rfc3339(c.validatedAt) } : {}),
    ...(c.error ? { error: c.error } : {}),
  };
}

function authzJson(a: AcmeRequest, z: AcmeAuthzRow, challenges: AcmeChallengeRow[]): Record<string, unknown> {
  return {
    identifier: { type: z.identifierType, value: z.identifierValue },
    status: authzStatus(z, a.now),
    expires: rfc3339(z.expiresAt),
    challenges: challenges.map((c) => challengeJson(a, c)),
    ...(z.wildcard ? { wildcard: true } : {}),
  };
}

async function ownAuthz(s: SignedRequest, id: string): Promise<{ authz: AcmeAuthzRow; challenges: AcmeChallengeRow[] }> {
  const found = await getAuthzWithChallenges(s.ctx.db, s.ctx.mount.id, id);
  if (!found || found.authz.accountId !== s.account?.id) throw acmeError("malformed", "no such authorization for this account", 404);
  return found;
}

export async function authorization(s: SignedRequest): Promise<AcmeReply> {
  const id = s.req.params.id ?? "";
  let found = await ownAuthz(s, id);
  const p = s.payload;
  if (p && p.status !== undefined) {
    // RFC 8555 §7.5.2: the client may deactivate an authorization, and nothing else.
    if (p.status !== "deactivated") throw acmeError("malformed", "an authorization's 'status' may only be set to \"deactivated\"");
    if (found.authz.status !== "pending" && found.authz.status !== "valid") throw acmeError("malformed", `the authorization is ${found.authz.status}`);
    await deactivateAuthz(s.ctx.db, s.ctx.mount.id, id);
    found = { ...found, authz: { ...found.authz, status: "deactivated" } };
  }
  const processing = found.challenges.some((c) => c.status === "processing");
  return { json: authzJson(s, found.authz, found.challenges), headers: processing ? { "retry-after": "2" } : {} };
}

export async function challenge(s: SignedRequest): Promise<AcmeReply> {
  const authzId = s.req.params.authz ?? "";
  const type = s.req.params.type ?? "";
  const found = await ownAuthz(s, authzId);
  const current = found.challenges.find((c) => c.type === type);
  if (!current) throw acmeError("malformed", `the authorization offers no ${type} challenge`, 404);
  const up = { link: `<${s.url(`authorization/${authzId}`)}>;rel="up"` };

  // POST-as-GET reads the challenge; a payload (RFC 8555 §7.5.1: `{}`) asks for validation.
  const startable = s.payload !== null && authzStatus(found.authz, s.now) === "pending" && current.status === "pending";
  if (!startable || !(await claimChallenge(s.ctx.db, s.ctx.mount.id, authzId, type))) {
    return { json: challengeJson(s, current), headers: current.status === "processing" ? { ...up, "retry-after": "2" } : up };
  }

  // Attempt 1 within the request; the later ones from the queue (patient.ts).
  const keyAuthorization = `${current.token}.${await accountThumbprint(s)}`;
  const outcome = await tryValidation(s.ctx.env, s.cfg.dns_resolver, type, found.authz.identifierValue, current.token, keyAuthorization);
  const status = await settleAttempt({ db: s.ctx.db, env: s.ctx.env, mountId: s.ctx.mount.id, authzId, type, attempt: 1 }, outcome);
  const done: AcmeChallengeRow = {
    ...current,
    status,
    attempts: 1,
    ...(outcome.ok ? { validatedAt: Date.now(), error: null } : { error: { ...outcome.problem } }),
  };
  return { json: challengeJson(s, done), headers: status === "processing" ? { ...up, "retry-after": String(retryDelays(s.ctx.env)[0] ?? 1) } : up };
}
