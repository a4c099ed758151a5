/** Latencies and statuses per request class, as bench:load's processes record them. */

/** One class's figures: latencies (ms) of the answers that were not 5xx or 429, and every status. */
export interface ClassRecord {
  readonly latencies: number[];
  readonly statuses: Record<string, number>;
}

export class Recorder {
  readonly classes: Record<string, ClassRecord> = {};

  record(cls: string, ms: number, status: number): void {
    const c = this.classes[cls] ?? { latencies: [], statuses: {} };
    this.classes[cls] = c;
    if (status < 500 && status !== 429) c.latencies.push(ms);
    c.statuses[status] = (c.statuses[status] ?? 0) + 1;
  }

  /** Times a request to the end of its body; a failed connection counts as 599, with the 5xx. */
  async timed(cls: string, f: () => Promise<Response>): Promise<void> {
    const t0 = performance.now();
    let status = 0;
    try {
      const r = await f();
      status = r.status;
      await r.arrayBuffer();
    } catch {
      status = 599;
    }
    this.record(cls, performance.now() - t0, status);
  }
}
