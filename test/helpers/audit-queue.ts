/**
 * Audit Queue messages in the tests: the text the batcher queued (src/audit/message.ts: a header
 * line, then the entries as NDJSON lines) with, for the assertions, its device and entries read
 * by the consumer's own decoder and each line parsed as JSON. The tests hand `text` to the
 * Worker's `queue` handler, as the Queue carries it.
 */
import { decodeMessage, type MessageDevice } from "../../src/audit/message";
import type { AuditEntry } from "../../src/audit/types";

export interface Queued {
  text: string;
  device: MessageDevice;
  entries: AuditEntry[];
}

/** A queued message text, decoded; throws when the consumer could not read it. */
export function asQueued(text: string): Queued {
  const m = decodeMessage(text);
  if (!m) throw new Error(`not an audit message: ${text.slice(0, 80)}`);
  return { text, device: m.device, entries: m.lines.map((l) => JSON.parse(l.line) as AuditEntry) };
}
