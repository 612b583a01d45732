/**
 * The tokens of an audit filter expression (src/audit/filter.ts), after go-bexpr's grammar
 * (github.com/hashicorp/go-bexpr, grammar.peg): whitespace is space, tab, CR and LF; words are
 * `[A-Za-z][A-Za-z0-9_]*` with `.name` segments (selectors, keywords and bare values); numbers
 * `-?(0|[1-9][0-9]*)(.[0-9]+)?`; strings are Go string literals, decoded as strconv.Unquote does
 * (https://go.dev/ref/spec#String_literals): "double-quoted" with escapes, `raw` with none (and
 * carriage returns dropped).
 */

export interface Token {
  kind: "(" | ")" | "op" | "word" | "string" | "number" | "eof";
  /** The source text of the token. */
  text: string;
  /** Strings: the decoded value; otherwise the text. */
  value: string;
  /** Offset of the token's first character (UTF-16 code units, from 0). */
  pos: number;
}

const WORD = /[A-Za-z][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*/y;
const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?/y;
const SIMPLE_ESCAPES: Record<string, string> = { a: "\x07", b: "\b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v", "\\": "\\", '"': '"' };

function sticky(re: RegExp, text: string, at: number): string | null {
  re.lastIndex = at;
  return re.exec(text)?.[0] ?? null;
}

/** Decodes the double-quoted string starting at `start`; returns its value and end offset. */
function doubleQuoted(text: string, start: number, fail: (m: string) => Error): { value: string; end: number } {
  let value = "";
  let i = start + 1;
  for (;;) {
    const c = text[i];
    if (c === undefined) throw fail(`unterminated string starting at ${start}`);
    if (c === '"') return { value, end: i + 1 };
    if (c === "\n") throw fail(`newline in the string starting at ${start} (use \\n)`);
    if (c !== "\\") {
      value += c;
      i++;
      continue;
    }
    const e = text[i + 1] ?? "";
    const simple = SIMPLE_ESCAPES[e];
    if (simple !== undefined) {
      value += simple;
      i += 2;
      continue;
    }
    // \xHH and \ooo are bytes in Go; only their ASCII values are the same character here.
    const digits = e === "x" ? 2 : e === "u" ? 4 : e === "U" ? 8 : e >= "0" && e <= "7" ? 3 : 0;
    const body = e >= "0" && e <= "7" ? text.slice(i + 1, i + 4) : text.slice(i + 2, i + 2 + digits);
    const radix = e >= "0" && e <= "7" ? 8 : 16;
    const valid = digits > 0 && body.length === digits && (radix === 8 ? /^[0-7]+$/ : /^[0-9A-Fa-f]+$/).test(body);
    const code = valid ? parseInt(body, radix) : -1;
    const limit = e === "u" || e === "U" ? 0x10ffff : 0x7f;
    if (code < 0 || code > limit || (code >= 0xd800 && code <= 0xdfff)) {
      throw fail(`invalid escape ${JSON.stringify(text.slice(i, i + 2 + digits))} at ${i} (write \\\\ for a backslash, or use a \`raw string\`)`);
    }
    value += String.fromCodePoint(code);
    i += radix === 8 ? 4 : 2 + digits;
  }
}

/** The tokens of `text`, ending with an "eof" token; `fail` builds the error for a bad one. */
export function tokenize(text: string, fail: (message: string) => Error): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] ?? "";
    if (c === " " || c === "\t" || c === "\r" || c === "\n") {
      i++;
      continue;
    }
    const pos = i;
    const push = (kind: Token["kind"], tokenText: string, value = tokenText) => {
      tokens.push({ kind, text: tokenText, value, pos });
      i = pos + tokenText.length;
    };
    if (c === "(" || c === ")") push(c, c);
    else if (text.startsWith("==", i) || text.startsWith("!=", i)) push("op", text.slice(i, i + 2));
    else if (c === '"') {
      const { value, end } = doubleQuoted(text, i, fail);
      push("string", text.slice(i, end), value);
    } else if (c === "`") {
      const end = text.indexOf("`", i + 1);
      if (end < 0) throw fail(`unterminated string starting at ${i}`);
      push("string", text.slice(i, end + 1), text.slice(i + 1, end).replaceAll("\r", ""));
    } else {
      const word = sticky(WORD, text, i);
      const number = word === null ? sticky(NUMBER, text, i) : null;
      if (word !== null) push("word", word);
      else if (number !== null) {
        if (/[A-Za-z0-9_.]/.test(text[i + number.length] ?? "")) throw fail(`invalid number at ${pos}`);
        push("number", number);
      } else {
        const ch = String.fromCodePoint(text.codePointAt(i) ?? 0);
        throw fail(`unexpected character ${JSON.stringify(ch)} at ${pos}`);
      }
    }
  }
  tokens.push({ kind: "eof", text: "", value: "", pos: text.length });
  return tokens;
}
