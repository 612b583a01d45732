/**
 * JSON from untrusted text, with a nesting limit. V8's JSON.parse copes with any
 * depth, but much of what follows does not: merge patches, subkeys and the policy parser
 * recurse, and JSON.stringify recurses too, so 4,000 levels overflowed the stack (a 500). Depth
 * is checked without recursion, so the check itself cannot overflow.
 *
 * The outcome says only what is wrong, never a piece of the text: a parser's message quotes
 * the input (`Unexpected token 'S', "SECRETMARKER9" is not valid JSON`), and the input may be a
 * secret.
 */

/**
 * How deeply objects and arrays may nest in any JSON this service accepts: the body itself is
 * level 1, so a KV write's `data` may nest 99 levels. Upstream's listener default is 500; 100
 * leaves every recursive walk far from the stack limit and no real secret or policy nests
 * anywhere near it. Documented in docs/security.md.
 */
export const MAX_JSON_DEPTH = 100;

export type JsonParse = { ok: true; value: unknown } | { ok: false; reason: "malformed" | "too-deep" };

/** Parses `text`; refuses malformed JSON and JSON nested deeper than `maxDepth`. */
export function parseJsonLimited(text: string, maxDepth = MAX_JSON_DEPTH): JsonParse {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: "malformed" };
  }
  return textDepthExceeds(text, maxDepth) ? { ok: false, reason: "too-deep" } : { ok: true, value };
}

/**
 * Whether valid JSON text nests objects and arrays deeper than `limit`: one pass over the text,
 * counting brackets outside strings.
 */
export function textDepthExceeds(text: string, limit: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > limit) return true;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return false;
}

/**
 * Whether a parsed value nests objects and arrays deeper than `limit` (the value itself, if an
 * object or array, is level 1). Walks with an explicit stack, for values that were not parsed
 * here (e.g. stored before the limit existed).
 */
export function valueDepthExceeds(value: unknown, limit: number): boolean {
  const stack: { v: unknown; depth: number }[] = [{ v: value, depth: 1 }];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { v, depth } = item;
    if (typeof v !== "object" || v === null) continue;
    if (depth > limit) return true;
    for (const child of Object.values(v)) {
      if (typeof child === "object" && child !== null) stack.push({ v: child, depth: depth + 1 });
    }
  }
  return false;
}
