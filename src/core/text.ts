/**
 * Linear-time string helpers for user input.
 *
 * `s.replace(/\/+$/, "")` looks harmless but is quadratic in V8's backtracking engine: the
 * unanchored search tries every start position, and from each one inside a long run of `/` it
 * consumes the run, fails `$` on the next character, and gives the run back one character at a
 * time. 100,000 slashes followed by one other character took 15 s of CPU in V8. These helpers do
 * the same trims with one scan.
 */

/** `s` without any trailing occurrences of the single character `ch`. */
export function trimEndChar(s: string, ch: string): string {
  let end = s.length;
  while (end > 0 && s[end - 1] === ch) end--;
  return end === s.length ? s : s.slice(0, end);
}

/** `s` without any leading occurrences of the single character `ch`. */
export function trimStartChar(s: string, ch: string): string {
  let start = 0;
  while (start < s.length && s[start] === ch) start++;
  return start === 0 ? s : s.slice(start);
}

/** `s` without leading or trailing occurrences of `ch` (`/^c+|c+$/g` in one pass each way). */
export function trimChar(s: string, ch: string): string {
  return trimEndChar(trimStartChar(s, ch), ch);
}

const NON_ASCII = /[^\x00-\x7f]/;

/**
 * The UTF-8 length of `s` in bytes, without encoding it. Length limits are stated in bytes (as
 * RFC 1035 and RFC 5280 state theirs), and a caller can skip this when `s.length` (UTF-16 code
 * units, each at least one byte) already exceeds the limit.
 */
export function utf8Length(s: string): number {
  // ASCII (audit entries, JSON of ASCII values): one byte a code unit, found by the native regex
  // engine several times faster than the loop below.
  if (!NON_ASCII.test(s)) return s.length;
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length && (s.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
      // A surrogate pair is one code point of four bytes.
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}

/** `s` without any trailing characters that occur in `chars` (`/[…]+$/` in one scan). */
export function trimEndChars(s: string, chars: string): string {
  let end = s.length;
  while (end > 0 && chars.includes(s[end - 1] ?? "")) end--;
  return end === s.length ? s : s.slice(0, end);
}

/**
 * Whether `s` holds a `{{…}}` placeholder: `/\{\{[^}]*\}\}/.test(s)` without its quadratic cost.
 * That regex, on a long run of "{", starts a match at every "{{" and scans to the end of the run
 * each time. Here: some "{{" whose first following "}" begins "}}". When the first "}" after an
 * opening is not doubled, no opening before that "}" can match either, so the search resumes
 * after it and every character is looked at a bounded number of times.
 */
export function hasPlaceholder(s: string): boolean {
  let open = s.indexOf("{{");
  while (open >= 0) {
    const close = s.indexOf("}", open + 2);
    if (close < 0) return false;
    if (s[close + 1] === "}") return true;
    open = s.indexOf("{{", close + 1);
  }
  return false;
}
