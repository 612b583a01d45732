/**
 * The fenced blocks of a Markdown document, each with the marker comment just above it, for the
 * e2e tests that run a document's commands as written (README.md in ./readme.test.ts,
 * docs/operations.md in ./docs-operations-snapshot.test.ts). A marker reads
 * `<!-- <tag>: <kind>: <why or name> -->`, e.g. `<!-- readme-e2e: skip: needs an account -->`,
 * `<!-- readme-e2e: needs vault: … -->`, `<!-- ops-e2e: run: snapshot-save -->`.
 */

export interface Block {
  line: number;
  lang: string;
  body: string;
  /** From the comment above it: its kind ("skip", "needs <tool>", "run") and the rest. */
  marker?: { kind: string; why: string };
}

/** Every fenced block of `text`, with the `tag` marker in the text just above it. */
export function fencedBlocks(text: string, tag: string): Block[] {
  const out: Block[] = [];
  const fence = /^```(\w*)\n([\s\S]*?)^```$/gm;
  const marker = new RegExp(String.raw`<!--\s*${tag}:\s*(skip|run|needs \w+):\s*([^>]*?)\s*-->\s*(<!--[^>]*-->\s*)*$`);
  let last = 0;
  for (let m = fence.exec(text); m; m = fence.exec(text)) {
    const above = text.slice(last, m.index);
    const mark = marker.exec(above);
    out.push({ line: text.slice(0, m.index).split("\n").length, lang: m[1] ?? "", body: m[2] ?? "", marker: mark ? { kind: mark[1] ?? "", why: mark[2] ?? "" } : undefined });
    last = m.index + m[0].length;
  }
  return out;
}
