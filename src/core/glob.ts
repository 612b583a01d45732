/**
 * The one glob matcher: role globs (allowed_domains with allow_glob_domains,
 * allowed_uri_sans, allowed_other_sans values, allowed_serial_numbers, allowed_user_ids) all go
 * through here.
 *
 * Semantics are upstream Vault's, github.com/ryanuber/go-glob `Glob(pattern, subj)`: only `*` is
 * special and matches any run of characters, empty and dots included; everything else is
 * literal and case-sensitive; the whole subject must match; the empty pattern matches only the
 * empty subject.
 *
 * Why not a RegExp: `*` compiled to `.*` backtracks, O(n^k) for k stars on a non-matching
 * subject (a two-star URI glob against a 750 KB uri_sans took 91 s of CPU). Like go-glob, this
 * splits the pattern at the stars and matches the pieces left to right without ever going
 * back: the first piece is a prefix, each middle piece is found at its leftmost position after
 * the previous one (leftmost is always safe, since every later match leaves less subject for the rest),
 * and the last piece is a suffix of what remains. Each piece is searched once from where the
 * previous one ended, so the work is one pass over the subject per piece at worst: O(n·m) with a
 * naive substring search, and about O(n + m) with the engine's indexOf (Boyer–Moore based).
 */
export function globMatch(pattern: string, subject: string): boolean {
  if (pattern === "") return subject === "";
  if (pattern === "*") return true;
  const parts = pattern.split("*");
  if (parts.length === 1) return subject === pattern;
  const first = parts[0] ?? "";
  const last = parts[parts.length - 1] ?? "";
  if (!subject.startsWith(first)) return false;
  let pos = first.length;
  for (let i = 1; i < parts.length - 1; i++) {
    const piece = parts[i] ?? "";
    if (piece === "") continue;
    const at = subject.indexOf(piece, pos);
    if (at < 0) return false;
    pos = at + piece.length;
  }
  // The suffix must lie wholly after what the earlier pieces consumed.
  return subject.length - pos >= last.length && subject.endsWith(last);
}
