import { describe, expect, it } from "vitest";
import { formatGoDuration, parseDurationMs, parseDurationSeconds } from "../../src/core/duration";

describe("parseDurationSeconds", () => {
  it.each([
    [3600, 3600],
    ["3600", 3600],
    ["72h", 259200],
    ["1h30m", 5400],
    ["1.5h", 5400],
    ["90s", 90],
    ["30d", 2592000],
    ["500ms", 0],
    ["", 0],
    [" 10m ", 600],
  ])("parses %j as %d seconds", (input, want) => {
    expect(parseDurationSeconds(input)).toBe(want);
  });

  it.each(["-1", -5, "-3h", "1d12h", "soon", "10x", "h", true])("refuses %j", (input) => {
    expect(() => parseDurationSeconds(input)).toThrow();
  });

  it("refuses what Go's time.Duration cannot hold (about 292 years), in every form", () => {
    expect(parseDurationSeconds(9223372036)).toBe(9223372036);
    for (const input of [1e30, 9223372037, "9223372037", "99999999h", "106751992d"]) {
      expect(() => parseDurationSeconds(input)).toThrow("time: invalid duration");
    }
  });

  it("gives the same durations in milliseconds, with the same bound", () => {
    expect(parseDurationMs("250ms")).toBe(250);
    expect(parseDurationMs("1500us")).toBe(1);
    expect(parseDurationMs(2)).toBe(2000);
    expect(parseDurationMs("9223372036.854s")).toBe(9223372036854);
    expect(() => parseDurationMs("9223372037s")).toThrow("time: invalid duration");
    expect(() => parseDurationMs("-1s")).toThrow("negative");
  });

  it("says negative values are not allowed", () => {
    expect(() => parseDurationSeconds("-10")).toThrow("cannot provide negative value");
  });
});

describe("formatGoDuration", () => {
  it.each([
    [0, "0s"],
    [45, "45s"],
    [90, "1m30s"],
    [3600, "1h0m0s"],
    [768 * 3600, "768h0m0s"],
  ])("formats %d as %s", (s, want) => {
    expect(formatGoDuration(s)).toBe(want);
  });
});
