/**
 * The console's certificate search (console/js/inventory.js) against a server that answers
 * substring-filtered pages as docs/pki-inventory.md "Substring search" defines them: at most a
 * window of rows read per request, short pages with `next_after` that are not the end. The
 * search follows the cursors until a page of 50 is full or the end is reached, merges the
 * common_name and san lists in order with every certificate once, and a stopped search shows
 * only rows known to come first and continues from there. The server here is a fake at the
 * HTTP boundary (fetch); the real server's side of the contract is test/integration/pki-inventory-window.test.ts.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";

interface Row {
  serial: string;
  cn: string;
  san: string;
  notAfter: number;
}
interface Shown {
  serial: string;
}
interface Ctl {
  stopped: boolean;
  requests: number;
  progress: () => void;
}
interface ConsoleInventory {
  PAGE_SIZE: number;
  streamsFor(v: { q: string; state: string }): unknown[];
  nextPage(mount: string, streams: unknown[], ctl: Ctl): Promise<{ page: Shown[]; more: boolean }>;
}

const WINDOW = 40;
const spec = "../../console/js/inventory.js";
const iso = (s: number) => new Date(s * 1000).toISOString().replace(".000Z", "Z");

/** 600 rows; "needle" in the CN of every 7th, in a SAN of every 11th (both for every 77th). */
const rows: Row[] = Array.from({ length: 600 }, (_, i) => ({
  serial: `00:${(i * 37 % 600).toString(16).padStart(4, "0")}`,
  cn: i % 7 === 0 ? `needle${i}.example.com` : `host${i}.example.com`,
  san: i % 11 === 0 ? `needle-alt${i}.example.net` : `alt${i}.example.net`,
  // Groups of three share a not_after: the serial breaks the tie.
  notAfter: 1_800_000_000 + Math.floor(i / 3) * 60,
})).sort((a, b) => a.notAfter - b.notAfter || (a.serial < b.serial ? -1 : a.serial > b.serial ? 1 : 0));

let requests = 0;

/** A windowed certs/detailed: the rows after `after`, at most WINDOW of them read, `limit` matches at most. */
function answer(url: URL): unknown {
  const q = url.searchParams;
  const cn = q.get("common_name");
  const san = q.get("san");
  const limit = Number(q.get("limit"));
  const after = q.get("after");
  let start = after ? rows.findIndex((r) => r.serial === after) + 1 : 0;
  const keys: string[] = [];
  let read = 0;
  for (; start < rows.length && keys.length < limit && (read < WINDOW || !(cn || san)); start++, read++) {
    const r = rows[start] as Row;
    if ((cn === null || r.cn.includes(cn)) && (san === null || r.san.includes(san))) keys.push(r.serial);
  }
  const key_info = Object.fromEntries(keys.map((k) => {
    const r = rows.find((x) => x.serial === k) as Row;
    return [k, { common_name: r.cn, alt_names: [r.san], not_after: iso(r.notAfter), state: "valid" }];
  }));
  if (!(cn || san)) return { data: { keys, key_info } };
  const full = keys.length === limit;
  const more = start < rows.length;
  const next = full ? keys.at(-1) : more ? rows[start - 1]?.serial : undefined;
  return { data: { keys, key_info, ...(next ? { next_after: next } : {}), scan_incomplete: !full && more } };
}

let mod: ConsoleInventory;
const realFetch = globalThis.fetch;

beforeEach(async () => {
  requests = 0;
  const store = new Map<string, string>();
  Object.assign(globalThis, {
    sessionStorage: { getItem: (k: string) => store.get(k) ?? null, setItem: (k: string, v: string) => store.set(k, v), removeItem: (k: string) => store.delete(k) },
  });
  globalThis.fetch = async (input: string | URL | Request) => {
    requests += 1;
    const url = new URL(String(input), "https://console.test");
    expect(url.pathname).toBe("/v1/pki/certs/detailed");
    return new Response(JSON.stringify(answer(url)), { status: 200, headers: { "content-type": "application/json" } });
  };
  mod = (await import(spec)) as ConsoleInventory;
});

afterEach(() => {
  globalThis.fetch = realFetch;
});

const ctl = (): Ctl => ({ stopped: false, requests: 0, progress: () => {} });
const expected = rows.filter((r) => r.cn.includes("needle") || r.san.includes("needle")).map((r) => r.serial);

describe("console search over windowed pages", () => {
  it("follows next_after until each page is full, every match once and in order", async () => {
    const streams = mod.streamsFor({ q: "needle", state: "" });
    const seen: string[] = [];
    let pages = 0;
    for (;;) {
      const { page, more } = await mod.nextPage("pki", streams, ctl());
      pages += 1;
      if (more) expect(page.length).toBe(mod.PAGE_SIZE);
      seen.push(...page.map((r) => r.serial));
      if (!more) break;
      expect(pages).toBeLessThan(20);
    }
    expect(seen).toEqual(expected);
    // 600 rows, a window of 40, two lists: the cursors were followed well past one request a page.
    expect(requests).toBeGreaterThanOrEqual(2 * (600 / WINDOW));
  });

  it("finds a rare match many windows in, and ends", async () => {
    const last = rows.at(-1) as Row;
    const { page, more } = await mod.nextPage("pki", mod.streamsFor({ q: last.cn, state: "" }), ctl());
    expect(page.map((r) => r.serial)).toEqual([last.serial]);
    expect(more).toBe(false);
  });

  it("a stopped search shows only rows known to come first, and Next continues it", async () => {
    const streams = mod.streamsFor({ q: "needle", state: "" });
    const c = ctl();
    c.progress = () => {
      if (c.requests >= 5) c.stopped = true;
    };
    const first = await mod.nextPage("pki", streams, c);
    expect(first.more).toBe(true);
    expect(first.page.length).toBeLessThan(mod.PAGE_SIZE);
    const seen = first.page.map((r) => r.serial);
    expect(seen).toEqual(expected.slice(0, seen.length));
    for (let more = true; more; ) {
      const next = await mod.nextPage("pki", streams, ctl());
      seen.push(...next.page.map((r) => r.serial));
      more = next.more;
    }
    expect(seen).toEqual(expected);
  });

  it("unfiltered pages are OpenBao's: a short page is the end", async () => {
    const streams = mod.streamsFor({ q: "", state: "" });
    const seen: string[] = [];
    for (let more = true; more; ) {
      const next = await mod.nextPage("pki", streams, ctl());
      seen.push(...next.page.map((r) => r.serial));
      more = next.more;
    }
    expect(seen).toEqual(rows.map((r) => r.serial));
  });
});
