import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { Worker } from "node:worker_threads";
import { threadCpuSeconds } from "./thread-cpu.ts";

const linux = process.platform === "linux";
const fromFile = () => Number(readFileSync("/proc/thread-self/schedstat", "latin1").split(" ", 1)[0]) / 1e9;

describe("threadCpuSeconds()", { skip: !linux && "Linux only (/proc/thread-self/schedstat)" }, () => {
  it("on the main thread (its file kept open and read again) is the thread's own time, and grows with work", () => {
    for (let k = 0; k < 3; k++) {
      const before = fromFile();
      const got = threadCpuSeconds();
      const after = fromFile();
      assert.ok(before <= got && got <= after, `${before} ≤ ${got} ≤ ${after}`);
      // Work until the file says this thread ran 20 ms more (wall time means little on a loaded machine).
      let x = 0;
      while (fromFile() - after < 0.02) for (let i = 0; i < 10_000; i++) x += Math.sqrt(x + i);
      assert.ok(threadCpuSeconds() - after >= 0.02, "20 ms of work on this thread is counted");
    }
  });

  it("in a worker is that worker's time, not the main thread's", async () => {
    const mainBefore = threadCpuSeconds();
    const w = new Worker(
      `const { parentPort } = require("node:worker_threads");
       const { readFileSync } = require("node:fs");
       const f = () => Number(readFileSync("/proc/thread-self/schedstat", "latin1").split(" ", 1)[0]) / 1e9;
       parentPort.postMessage(f());`,
      { eval: true },
    );
    const workerTime = await new Promise<number>((resolve, reject) => {
      w.once("message", resolve);
      w.once("error", reject);
    });
    await w.terminate();
    assert.ok(
      workerTime < mainBefore,
      `a new worker's ${workerTime} s is below the main thread's ${mainBefore} s`,
    );
  });
});
