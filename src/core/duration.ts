/**
 * Durations the Vault way (OpenBao sdk/framework/field_data.go): an integer number of seconds, a numeric string,
 * a Go duration string ("72h", "1h30m", "1.5h", "90s", "500ms") or whole days ("30d").
 */

const UNIT_SECONDS: Record<string, number> = {
  ns: 1e-9,
  us: 1e-6,
  "µs": 1e-6,
  ms: 1e-3,
  s: 1,
  m: 60,
  h: 3600,
};

/** Go's longest time.Duration (2^63-1 ns, about 292 years), in whole seconds. */
export const MAX_DURATION_SECONDS = 9223372036;
const MAX_EXACT_SECONDS = 9223372036.854775807;

/**
 * Parses a duration to whole seconds (fractions are truncated, as Go's time.Duration.Seconds()).
 * Anything longer than Go's time.Duration can hold is refused, as upstream's parser does, so no
 * field can store a value that later overflows a date (a CRL nextUpdate, an alarm time).
 */
export function parseDurationSeconds(input: unknown): number {
  return Math.trunc(parseBounded(input) + 1e-9);
}

/**
 * The same durations in whole milliseconds, for the few fields where "250ms" must keep its
 * meaning (tidy's pause_duration). A bare number is still seconds.
 */
export function parseDurationMs(input: unknown): number {
  return Math.floor(parseBounded(input) * 1000 + 1e-6);
}

function parseBounded(input: unknown): number {
  const seconds = parseUnbounded(input);
  if (seconds > MAX_EXACT_SECONDS) throw new Error(`time: invalid duration "${String(input)}"`);
  return seconds;
}

/** Exact (fractional) seconds of a duration; callers round. */
function parseUnbounded(input: unknown): number {
  if (typeof input === "number") {
    if (!Number.isFinite(input)) throw new Error("not a finite number");
    if (input < 0) throw new Error("cannot provide negative value");
    return input;
  }
  if (typeof input !== "string") throw new Error(`cannot parse ${typeof input} as a duration`);
  const text = input.trim();
  if (text === "") return 0;
  if (/^-?\d+$/.test(text)) {
    const n = Number(text);
    if (n < 0) throw new Error("cannot provide negative value");
    return n;
  }
  const days = /^(-?\d+)d$/.exec(text);
  if (days) {
    const n = Number(days[1]);
    if (n < 0) throw new Error("cannot provide negative value");
    return n * 86400;
  }
  if (text.startsWith("-")) throw new Error("cannot provide negative value");
  const body = text.startsWith("+") ? text.slice(1) : text;
  const part = /(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/y;
  let total = 0;
  let pos = 0;
  while (pos < body.length) {
    part.lastIndex = pos;
    const m = part.exec(body);
    if (!m) throw new Error(`time: invalid duration "${input}"`);
    const unit = UNIT_SECONDS[m[2] as string];
    if (unit === undefined) throw new Error(`time: unknown unit in duration "${input}"`);
    total += Number(m[1]) * unit;
    pos = part.lastIndex;
  }
  if (pos === 0) throw new Error(`time: invalid duration "${input}"`);
  return total;
}

/** Formats seconds like Go's time.Duration.String(): "0s", "90s" → "1m30s", "768h0m0s". */
export function formatGoDuration(seconds: number): string {
  if (seconds === 0) return "0s";
  const sign = seconds < 0 ? "-" : "";
  let s = Math.abs(Math.trunc(seconds));
  const h = Math.floor(s / 3600);
  s -= h * 3600;
  const m = Math.floor(s / 60);
  s -= m * 60;
  if (h > 0) return `${sign}${h}h${m}m${s}s`;
  if (m > 0) return `${sign}${m}m${s}s`;
  return `${sign}${s}s`;
}
