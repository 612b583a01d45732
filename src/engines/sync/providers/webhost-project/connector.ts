/**
 * `webhost-project` connector (Vercel REST API, project environment variables): project environment variables, written as
 * `encrypted` variables on the destination's deployment environments (targets).
 *
 * A key may have several variables, one per set of targets, each made by someone: Lanyard's
 * for this destination, another destination's, or one made in the dashboard. So a write lists
 * the variables with the key and works by id, never by key (docs/secrets-sync.md "Ownership"):
 * - a variable Lanyard did not create that is on one of the destination's targets gets the
 *   value (Vault's rule for what it finds: last write wins) and keeps its own targets and type;
 * - the targets left are Lanyard's own variable's: edited (`PATCH /v9/…/env/{id}`) when it has
 *   one, else created (`POST /v10/…/env`, no upsert, so a create never lands on someone else's
 *   variable; `failed` is checked even on 201); one it no longer needs is deleted;
 * - the write's `version` records the ids of the variables Lanyard created ("ids:…"), and
 *   `foreign` says the key also has variables it did not create (on any target): the name is
 *   then `pre_existing`, and unsync and purge warn about it.
 * A remove deletes exactly the recorded ids (404 counts as done) and leaves every other variable
 * with the key, whatever the destination's targets are now; so widening
 * `deployment_environments` onto someone else's variable never makes it Lanyard's.
 */
import { ConnectorError, type Connector, type ConnectorContext, type PutResult } from "../../connectors/types";
import { errorOf, projectPath, request } from "./client";
import { ownedIds, recordIds, targetsOf, variablesOf, wantedTargets, type EnvVar } from "./variables";

type Written = { id?: unknown; updatedAt?: unknown } | null;

async function deleteVar(ctx: ConnectorContext, id: string): Promise<void> {
  try {
    await request(ctx, "DELETE", projectPath(ctx, "v9", `/${encodeURIComponent(id)}`));
  } catch (e) {
    if (!(e instanceof ConnectorError && e.code === "not_found")) throw e;
  }
}

const editVar = (ctx: ConnectorContext, id: string, body: Record<string, unknown>): Promise<Written> =>
  request(ctx, "PATCH", projectPath(ctx, "v9", `/${encodeURIComponent(id)}`), body) as Promise<Written>;

async function createVar(ctx: ConnectorContext, key: string, value: string, target: string[]): Promise<Written> {
  type Answer = { created?: Written | Written[]; failed?: { error?: unknown }[] } | null;
  const res = (await request(ctx, "POST", projectPath(ctx, "v10"), { key, value, type: "encrypted", target })) as Answer;
  const failed = res?.failed?.[0];
  if (failed) throw errorOf(400, failed, new Headers(), "create env");
  const made = Array.isArray(res?.created) ? res?.created[0] : res?.created;
  if (typeof made?.id !== "string") throw new ConnectorError("external", "MalformedResponse", "web host: unexpected create answer");
  return made;
}

/** Lanyard's variable for `need` (edited, created, or deleted when nothing is needed); its id, if it keeps one. */
async function writeOwn(ctx: ConnectorContext, mine: EnvVar[], key: string, value: string, need: string[]): Promise<{ id?: string; updatedAt?: unknown }> {
  const [keep, ...extra] = need.length > 0 ? mine : [];
  for (const e of need.length > 0 ? extra : mine) await deleteVar(ctx, e.id);
  if (need.length === 0) return {};
  const w = keep ? await editVar(ctx, keep.id, { value, type: "encrypted", target: need }) : await createVar(ctx, key, value, need);
  return { id: typeof w?.id === "string" ? w.id : keep?.id, updatedAt: w?.updatedAt };
}

export const webhostConnector: Connector = {
  removesOnlyOwnParts: true,
  async put(ctx, secret): Promise<PutResult> {
    const targets = wantedTargets(ctx);
    const ids = new Set(ownedIds(secret.ownership, secret.version) ?? []);
    const vars = await variablesOf(ctx, secret.name);
    const mine = vars.filter((e) => ids.has(e.id));
    const theirs = vars.filter((e) => !ids.has(e.id));
    const found = theirs.filter((e) => targetsOf(e).some((t) => targets.includes(t)));
    let updatedAt: unknown;
    for (const e of found) updatedAt = (await editVar(ctx, e.id, { value: secret.value }))?.updatedAt;
    const covered = new Set(found.flatMap(targetsOf));
    const own = await writeOwn(ctx, mine, secret.name, secret.value, targets.filter((t) => !covered.has(t)));
    updatedAt = own.updatedAt ?? updatedAt;
    return {
      created: theirs.length === 0,
      foreign: theirs.length > 0,
      version: recordIds(own.id === undefined ? [] : [own.id]),
      updatedAt: typeof updatedAt === "number" ? String(updatedAt) : undefined,
    };
  },
  async remove(ctx, _name, held) {
    // Only the variables Lanyard recorded as its own; without a record, nothing (the safe side).
    for (const id of ownedIds(held?.ownership, held?.version) ?? []) await deleteVar(ctx, id);
  },
};
