/**
 * The devices' `filter` option at request time (the language: filter.ts; docs/audit.md
 * "Filters"). A device's filter is parsed once per isolate, cached by device id and expression;
 * the request path asks which devices write a request's entries (`devicesFor`: one verdict per
 * request and device, shared by its request and response entries), and layer 0
 * (src/core/public-answers.ts) asks whether a public read it holds would be written by no device
 * at all (`unauditedRead`).
 */
import { BoundedCache } from "../core/bounded-cache";
import { constantFor, evaluate, parseFilterOption, type AuditFilter, type AuditFilterFields } from "./filter";
import type { AuditDevice } from "./types";

const parsed = new BoundedCache<AuditFilter | null>("audit.filters", 256);

/**
 * The device's parsed filter, or null when it has none. A stored expression this version cannot
 * parse (checked at enable, so only after a change of the language) filters nothing: an entry
 * too many beats an entry lost.
 */
export function filterOf(device: Pick<AuditDevice, "id" | "options">): AuditFilter | null {
  const source = device.options.filter;
  if (typeof source !== "string" || source.trim() === "") return null;
  const key = `${device.id}\u0000${source}`;
  let f = parsed.get(key);
  if (f === undefined) {
    try {
      f = parseFilterOption(source);
    } catch {
      f = null;
    }
    parsed.set(key, f);
  }
  return f;
}

/** The devices that write a request with these fields (a device without a filter writes all). */
export function devicesFor(devices: readonly AuditDevice[], fields: AuditFilterFields): AuditDevice[] {
  return devices.filter((d) => {
    const f = filterOf(d);
    return f === null || evaluate(f, fields);
  });
}

/**
 * Verdicts already given, by device list and fields object. Layer 0 asks with the same list (the
 * isolate's copy, replaced when it is re-read: src/audit/audit-store.ts) and the same kept fields
 * for every request it answers from one kept answer, so a public read with devices enabled costs
 * two lookups, not a filter evaluation. Weak: a list or answer dropped takes its verdicts along.
 */
const readVerdicts = new WeakMap<readonly AuditDevice[], WeakMap<object, boolean>>();
const filteredLists = new WeakMap<readonly AuditDevice[], boolean>();

/**
 * Whether no device writes a read with these fields: every device has a filter that is false for
 * them (constantFor: false only when the fields left out cannot change the answer). Layer 0
 * (src/core/public-answers.ts) asks with the fields the pipeline resolved when it kept the answer.
 */
export function unauditedRead(devices: readonly AuditDevice[], fields: Readonly<Partial<AuditFilterFields>>): boolean {
  let known = readVerdicts.get(devices);
  if (!known) readVerdicts.set(devices, (known = new WeakMap()));
  let verdict = known.get(fields);
  if (verdict === undefined) {
    verdict = devices.every((d) => {
      const f = filterOf(d);
      return f !== null && constantFor(f, { ...fields, operation: "read" }) === false;
    });
    known.set(fields, verdict);
  }
  return verdict;
}

/** Whether every device has a filter (else every read is audited by some device). */
export function allFiltered(devices: readonly AuditDevice[]): boolean {
  let all = filteredLists.get(devices);
  if (all === undefined) filteredLists.set(devices, (all = devices.every((d) => filterOf(d) !== null)));
  return all;
}
