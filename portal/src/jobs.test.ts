import { describe, expect, it } from "vitest";
import type { Job } from "./api/client";
import { eta } from "./jobs";

function job(status: string, done: number, total: number, rate: number | null): Job {
  return {
    status,
    progress: { bytes_done: done, bytes_total: total, rate_bytes_per_second: rate, throughput_bytes_per_second: null },
  } as unknown as Job;
}

describe("eta", () => {
  it("is what is left at the current rate", () => {
    expect(eta(job("running", 10, 110, 20))).toBe(5);
  });
  it("cannot be told without a rate, a total, or once the job ended", () => {
    expect(eta(job("running", 10, 110, null))).toBeNull();
    expect(eta(job("running", 0, 0, 20))).toBeNull();
    expect(eta(job("succeeded", 110, 110, 20))).toBeNull();
  });
});
