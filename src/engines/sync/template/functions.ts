/**
 * The functions a template may call: the deterministic ones of Vault's template helper
 * (uppercase, lowercase, replace, truncate, truncate_sha256, sha256, base64) plus Go's print and
 * printf, each a pure string operation whose result is capped. Non-deterministic helpers and
 * control structures are named here so the parser can refuse them with a clear message.
 */
import { bytesToBase64, bytesToHex, sha256Hex } from "../../../core/encoding";
import { capped, show, TemplateError, type FuncName, type Value } from "./types";

interface FuncDef {
  /** Number of arguments, counting the piped value. */
  arity: number | "variadic";
  call(args: Value[]): Value | Promise<Value>;
}

function str(fn: string, v: Value | undefined): string {
  if (typeof v !== "string") throw new TemplateError(`${fn}: wrong type for value; expected string; got ${typeof v}`);
  return v;
}

function int(fn: string, v: Value | undefined): number {
  if (typeof v !== "number") throw new TemplateError(`${fn}: wrong type for value; expected int; got ${typeof v}`);
  return v;
}

/** Go's fmt.Sprint: operands joined, with a space between two operands that are both non-strings. */
function sprint(args: Value[]): string {
  let out = "";
  args.forEach((a, i) => {
    const prev = args[i - 1];
    if (i > 0 && typeof a !== "string" && prev !== undefined && typeof prev !== "string") out += " ";
    out += show(a);
  });
  return out;
}

/** A small fmt.Sprintf: verbs %s %v %d %q %x %X and %%, no flags or widths. */
function sprintf(format: string, args: Value[]): string {
  let out = "";
  let next = 0;
  for (let i = 0; i < format.length; i++) {
    const c = format[i];
    if (c !== "%") {
      out += c;
      continue;
    }
    const verb = format[++i];
    if (verb === "%") {
      out += "%";
      continue;
    }
    if (verb === undefined || !"svdqxX".includes(verb)) {
      throw new TemplateError(`printf: unsupported verb %${verb ?? ""} (supported: %s %v %d %q %x %X %%)`);
    }
    const arg = args[next++];
    if (arg === undefined) {
      out += `%!${verb}(MISSING)`;
      continue;
    }
    switch (verb) {
      case "s":
      case "v":
        out += show(arg);
        break;
      case "d":
        out += typeof arg === "number" ? String(arg) : `%!d(${typeof arg}=${show(arg)})`;
        break;
      case "q":
        out += typeof arg === "string" ? JSON.stringify(arg) : `%!q(${typeof arg}=${show(arg)})`;
        break;
      default: {
        const hex =
          typeof arg === "number" ? arg.toString(16) : bytesToHex(new TextEncoder().encode(show(arg)));
        out += verb === "X" ? hex.toUpperCase() : hex;
      }
    }
    capped(out);
  }
  if (next < args.length) out += `%!(EXTRA ${args.slice(next).map(show).join(", ")})`;
  return out;
}

export const FUNCS = {
  uppercase: { arity: 1, call: ([s]: Value[]) => str("uppercase", s).toUpperCase() },
  lowercase: { arity: 1, call: ([s]: Value[]) => str("lowercase", s).toLowerCase() },
  // Vault's helper takes (find, replacement, input): the piped value comes last.
  replace: {
    arity: 3,
    call: ([find, repl, s]: Value[]) => capped(str("replace", s).replaceAll(str("replace", find), str("replace", repl))),
  },
  truncate: {
    arity: 2,
    call: ([n, s]: Value[]) => {
      const max = int("truncate", n);
      if (max <= 0) throw new TemplateError("truncate: max length must be > 0");
      const chars = Array.from(str("truncate", s));
      return chars.length > max ? chars.slice(0, max).join("") : chars.join("");
    },
  },
  // Keeps max-8 characters and appends the first 8 hex digits of the SHA-256 of the cut tail.
  truncate_sha256: {
    arity: 2,
    call: async ([n, s]: Value[]) => {
      const max = int("truncate_sha256", n);
      if (max <= 8) throw new TemplateError("truncate_sha256: max length must be > 8");
      const chars = Array.from(str("truncate_sha256", s));
      if (chars.length <= max) return chars.join("");
      const cut = max - 8;
      return chars.slice(0, cut).join("") + (await sha256Hex(chars.slice(cut).join(""))).slice(0, 8);
    },
  },
  sha256: { arity: 1, call: ([s]: Value[]) => sha256Hex(str("sha256", s)) },
  base64: { arity: 1, call: ([s]: Value[]) => capped(bytesToBase64(new TextEncoder().encode(str("base64", s)))) },
  print: { arity: "variadic", call: (args: Value[]) => capped(sprint(args)) },
  printf: {
    arity: "variadic",
    call: ([format, ...rest]: Value[]) => sprintf(str("printf", format), rest),
  },
} satisfies Record<FuncName, FuncDef>;

export const NON_DETERMINISTIC = new Set(["random", "uuid", "unix_time", "unix_time_millis", "timestamp"]);
export const CONTROL = new Set(["if", "else", "end", "range", "with", "define", "template", "block", "break", "continue"]);

export function isFunc(name: string): name is FuncName {
  return Object.hasOwn(FUNCS, name);
}
