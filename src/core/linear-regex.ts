/**
 * Regular expressions that run in time linear in the input, for patterns an operator writes
 * (Vault's audit `filter` option: `path matches "…"`) and inputs a client chooses (request
 * paths). JavaScript's RegExp backtracks: `(a*)*b` against 30 `a`s already takes seconds. This
 * engine never backtracks: the pattern (a safe subset of RE2's syntax, src/core/linear-regex-parse.ts)
 * is compiled to a Thompson NFA and run by simulating every thread at once, the technique of
 * RE2 (https://swtch.com/~rsc/regexp/regexp1.html, https://swtch.com/~rsc/regexp/regexp2.html).
 * The sets of NFA states met are cached as the states of a DFA built on demand (as RE2's DFA
 * does), so a repeated character costs one array lookup; the cache is bounded, and a pattern
 * whose DFA would be larger pays the NFA's O(program size) per character instead. Either way:
 * O(input length × program size), program size ≤ MAX_PROGRAM.
 *
 * `test` answers whether the pattern matches anywhere in the input (RE2's and Go's
 * `MatchString`: unanchored search; use `^…$` for a whole-string match). Captures are not kept.
 */
import { MAX_PROGRAM, parseRegex, type RegexNode } from "./linear-regex-parse";

export { MAX_GROUP_DEPTH, MAX_PROGRAM, MAX_REPEAT, RegexSyntaxError } from "./linear-regex-parse";

const CHAR = 0;
const SPLIT = 1;
const JMP = 2;
const BEGIN = 3;
const END = 4;
const MATCH = 5;

/** Cached DFA states per pattern; past it the cache is dropped and rebuilt as needed (RE2 does the same). */
const MAX_DFA_STATES = 256;

interface Program {
  op: number[];
  /** CHAR, JMP, BEGIN, END: next; SPLIT: first branch. */
  x: number[];
  /** SPLIT: second branch. */
  y: number[];
  /** CHAR: the ranges [lo, hi, …]. */
  sets: (Int32Array | null)[];
  start: number;
}

function compile(root: RegexNode): Program {
  const p: Program = { op: [], x: [], y: [], sets: [], start: 0 };
  const emit = (op: number, set: number[] | null = null): number => {
    p.op.push(op);
    p.x.push(-1);
    p.y.push(-1);
    p.sets.push(set ? Int32Array.from(set) : null);
    return p.op.length - 1;
  };
  // Each node is emitted so that control falls through to the next instruction when it matches;
  // forward jumps are patched once their target is known.
  const gen = (node: RegexNode): void => {
    switch (node.t) {
      case "empty":
        return;
      case "set": {
        const i = emit(CHAR, node.ranges);
        p.x[i] = i + 1;
        return;
      }
      case "begin":
      case "end": {
        const i = emit(node.t === "begin" ? BEGIN : END);
        p.x[i] = i + 1;
        return;
      }
      case "cat":
        for (const item of node.items) gen(item);
        return;
      case "alt": {
        const jumps: number[] = [];
        node.items.forEach((item, k) => {
          if (k === node.items.length - 1) return gen(item);
          const split = emit(SPLIT);
          p.x[split] = split + 1;
          gen(item);
          jumps.push(emit(JMP));
          p.y[split] = p.op.length;
        });
        for (const j of jumps) p.x[j] = p.op.length;
        return;
      }
      case "rep":
        return genRepeat(node.item, node.min, node.max);
    }
  };
  const genRepeat = (item: RegexNode, min: number, max: number): void => {
    for (let k = 0; k < min; k++) gen(item);
    if (max < 0) {
      const split = emit(SPLIT);
      p.x[split] = split + 1;
      gen(item);
      const jmp = emit(JMP);
      p.x[jmp] = split;
      p.y[split] = p.op.length;
      return;
    }
    const splits: number[] = [];
    for (let k = min; k < max; k++) {
      const split = emit(SPLIT);
      p.x[split] = split + 1;
      splits.push(split);
      gen(item);
    }
    for (const s of splits) p.y[s] = p.op.length;
  };
  gen(root);
  emit(MATCH);
  return p;
}

function inSet(set: Int32Array, c: number): boolean {
  let lo = 0;
  let hi = (set.length >> 1) - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >> 1;
    if (c < (set[2 * mid] ?? 0)) hi = mid - 1;
    else if (c > (set[2 * mid + 1] ?? 0)) lo = mid + 1;
    else return true;
  }
  return false;
}

/**
 * The character classes of a program: code points that every CHAR instruction treats alike
 * (RE2's "byte classes"). Transitions are kept per class, so a DFA state needs a handful of
 * slots, not one per character.
 */
class CharClasses {
  /** Sorted code points where a class begins (class k starts at cuts[k - 1], class 0 at 0). */
  private readonly cuts: number[];
  private readonly ascii = new Uint16Array(128);

  constructor(sets: readonly (Int32Array | null)[]) {
    const points = new Set<number>();
    for (const set of sets) {
      if (!set) continue;
      for (let k = 0; k < set.length; k += 2) {
        points.add(set[k] as number);
        points.add((set[k + 1] as number) + 1);
      }
    }
    points.delete(0);
    this.cuts = [...points].sort((a, b) => a - b);
    for (let c = 0; c < 128; c++) this.ascii[c] = this.search(c);
  }

  get count(): number {
    return this.cuts.length + 1;
  }

  /** A code point of class `k`. */
  representative(k: number): number {
    return k === 0 ? 0 : (this.cuts[k - 1] as number);
  }

  of(c: number): number {
    return c < 128 ? (this.ascii[c] as number) : this.search(c);
  }

  /** How many cuts are ≤ c. */
  private search(c: number): number {
    let lo = 0;
    let hi = this.cuts.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if ((this.cuts[mid] as number) <= c) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }
}

interface DState {
  /** The NFA states the DFA state stands for, before following empty transitions (sorted). */
  kernel: number[];
  /** CHAR instructions reachable from the kernel. */
  chars: number[];
  /** MATCH reachable before the end of the input. */
  match: boolean;
  /** MATCH reachable at the end of the input (computed on first use). */
  endMatch: boolean | undefined;
  /** The next state by character class, filled in as met. */
  next: (DState | undefined)[];
}

export class LinearRegex {
  private readonly prog: Program;
  private readonly op: Uint8Array;
  private readonly x: Int32Array;
  private readonly y: Int32Array;
  private readonly classes: CharClasses;
  /** Per class: 1 at each CHAR instruction that accepts it (filled in as met). */
  private readonly accepts: (Uint8Array | undefined)[];
  private readonly mark: Uint32Array;
  private generation = 0;
  /** How many times the DFA cache was dropped. */
  private resets = 0;
  private cache = new Map<string, DState>();
  private initial: DState;

  private constructor(
    readonly source: string,
    node: RegexNode,
  ) {
    this.prog = compile(node);
    if (this.prog.op.length > MAX_PROGRAM) throw new Error("linear-regex: program over its size check");
    this.op = Uint8Array.from(this.prog.op);
    this.x = Int32Array.from(this.prog.x);
    this.y = Int32Array.from(this.prog.y);
    this.classes = new CharClasses(this.prog.sets);
    this.accepts = new Array<Uint8Array | undefined>(this.classes.count).fill(undefined);
    this.mark = new Uint32Array(this.prog.op.length);
    this.initial = this.state([this.prog.start], true);
  }

  /** Parses and compiles `pattern`; throws RegexSyntaxError for what the subset refuses. */
  static compile(pattern: string): LinearRegex {
    return new LinearRegex(pattern, parseRegex(pattern));
  }

  /** Instructions in the program: the worst-case work per input character. */
  get size(): number {
    return this.prog.op.length;
  }

  /** Whether the pattern matches anywhere in `input`. */
  test(input: string): boolean {
    let s = this.initial;
    const resets = this.resets;
    for (let i = 0; i < input.length; ) {
      if (s.match) return true;
      // No thread can take a character (say, `^a` past its first character): every later
      // state is the start thread's, and only the end can still match (`$` alone).
      if (s.chars.length === 0 && s !== this.initial) return this.closure([this.prog.start], false, true).match;
      // A DFA that keeps overflowing its cache costs more per character than the NFA itself.
      if (this.resets - resets > 1) return this.simulate(input, i, s.kernel);
      const c = input.codePointAt(i) ?? 0;
      i += c > 0xffff ? 2 : 1;
      const k = this.classes.of(c);
      s = s.next[k] ?? this.step(s, k);
    }
    if (s.endMatch === undefined) s.endMatch = this.closure(s.kernel, s === this.initial, true).match;
    return s.endMatch;
  }

  /** For character class `k`: 1 at each CHAR instruction that accepts it. */
  private acceptTable(k: number): Uint8Array {
    const cached = this.accepts[k];
    if (cached) return cached;
    const c = this.classes.representative(k);
    const table = new Uint8Array(this.op.length);
    this.prog.sets.forEach((set, pc) => {
      if (set && inSet(set, c)) table[pc] = 1;
    });
    this.accepts[k] = table;
    return table;
  }

  /**
   * The NFA simulation without the DFA cache, from offset `i` > 0 with the threads `kernel`:
   * each position follows the empty transitions of the current threads once (each instruction
   * is visited at most once) and moves the threads whose CHAR accepts the character (a CHAR's
   * next instruction is always the one after it).
   */
  private simulate(input: string, i: number, kernel: readonly number[]): boolean {
    const n = this.op.length;
    let cur = new Int32Array(n + 1);
    cur.set(kernel);
    let curLen = kernel.length;
    let next = new Int32Array(n + 1);
    const chars = new Int32Array(n);
    for (;;) {
      const atEnd = i >= input.length;
      const found = this.follow(cur, curLen, false, atEnd, chars);
      if (found < 0) return true;
      if (atEnd) return false;
      const c = input.codePointAt(i) ?? 0;
      i += c > 0xffff ? 2 : 1;
      const nextLen = this.advance(chars, found, this.acceptTable(this.classes.of(c)), next);
      [cur, next] = [next, cur];
      curLen = nextLen;
    }
  }

  /**
   * Follows empty transitions from the first `len` instructions of `from` (BEGIN passes only at
   * the start, END only at the end) and writes the CHAR instructions reached to `chars`.
   * Returns how many, or -1 as soon as MATCH is reached.
   */
  private follow(from: Int32Array, len: number, atStart: boolean, atEnd: boolean, chars: Int32Array): number {
    const { op, x, y, mark } = this;
    const gen = this.nextGeneration();
    const stack = this.stack;
    let top = 0;
    let count = 0;
    for (let k = 0; k < len; k++) stack[top++] = from[k] as number;
    while (top > 0) {
      let pc = stack[--top] as number;
      // First branches are followed in place; second branches wait on the stack.
      while (mark[pc] !== gen) {
        mark[pc] = gen;
        const o = op[pc];
        if (o === CHAR) {
          chars[count++] = pc;
          break;
        }
        if (o === MATCH) return -1;
        if (o === SPLIT) stack[top++] = y[pc] as number;
        else if (o !== JMP && !(o === BEGIN && atStart) && !(o === END && atEnd)) break;
        pc = x[pc] as number;
      }
    }
    return count;
  }

  /** The threads after a character: the start thread and each accepting CHAR's next instruction. */
  private advance(chars: Int32Array, count: number, accepts: Uint8Array, out: Int32Array): number {
    const mark = this.mark;
    const gen = this.nextGeneration();
    const start = this.prog.start;
    let len = 0;
    mark[start] = gen;
    out[len++] = start;
    for (let k = 0; k < count; k++) {
      const pc = chars[k] as number;
      if (accepts[pc] === 1 && mark[pc + 1] !== gen) {
        mark[pc + 1] = gen;
        out[len++] = pc + 1;
      }
    }
    return len;
  }

  /** Scratch space of `follow`: each SPLIT pushes once, plus the starting threads. */
  private get stack(): Int32Array {
    if (!this.scratch) this.scratch = new Int32Array(2 * this.op.length + 2);
    return this.scratch;
  }
  private scratch: Int32Array | undefined;

  private closure(kernel: readonly number[], atStart: boolean, atEnd: boolean): { chars: number[]; match: boolean } {
    const chars = new Int32Array(this.op.length);
    const count = this.follow(Int32Array.from(kernel), kernel.length, atStart, atEnd, chars);
    return count < 0 ? { chars: [], match: true } : { chars: Array.from(chars.subarray(0, count)), match: false };
  }

  private nextGeneration(): number {
    if (this.generation === 0xffffffff) {
      this.mark.fill(0);
      this.generation = 0;
    }
    return ++this.generation;
  }

  private state(kernel: number[], atStart: boolean): DState {
    const { chars, match } = this.closure(kernel, atStart, false);
    return { kernel, chars, match, endMatch: undefined, next: new Array<DState | undefined>(this.classes.count).fill(undefined) };
  }

  /** The DFA state after reading a character of class `k` in `s`, created (and cached) on first use. */
  private step(s: DState, k: number): DState {
    const chars = Int32Array.from(s.chars);
    const out = new Int32Array(this.op.length + 1);
    const len = this.advance(chars, chars.length, this.acceptTable(k), out);
    const kernel = Array.from(out.subarray(0, len)).sort((a, b) => a - b);
    const key = kernel.join(",");
    let t = this.cache.get(key);
    if (!t) {
      if (this.cache.size >= MAX_DFA_STATES) {
        // Drop every cached state, the start state's transitions included, so that nothing
        // keeps the dropped ones alive.
        this.cache = new Map();
        this.resets++;
        this.initial = this.state([this.prog.start], true);
      }
      t = this.state(kernel, false);
      this.cache.set(key, t);
    }
    s.next[k] = t;
    return t;
  }
}
