import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { create, toBinary, toJsonString } from "@bufbuild/protobuf";
import type { ConnectRouter } from "@connectrpc/connect";
import { AutomationService, ExchangeCITokenResponseSchema } from "@svc/sdk/gen/svc/iam/v1/automation_pb";
import {
  type QueryVMMonitoringResponse,
  QueryVMMonitoringResponseSchema,
} from "@svc/sdk/gen/svc/monitoring/v1/monitoring_pb";
import pino from "pino";
import { Registry } from "prom-client";
import type { Db } from "../db/database.ts";
import { withSizeBound } from "./response-size.ts";
import { buildServer } from "./server.ts";
import { queryResponseBound } from "./services/monitoring.ts";

/** svc's Connect JSON options (server.ts). */
const jsonOptions = { alwaysEmitImplicit: true, ignoreUnknownFields: false } as const;

function assertBounded(m: QueryVMMonitoringResponse, what: string): void {
  const bound = queryResponseBound(m);
  const json = Buffer.byteLength(toJsonString(QueryVMMonitoringResponseSchema, m, jsonOptions));
  const binary = toBinary(QueryVMMonitoringResponseSchema, m).byteLength;
  assert.ok(json <= bound, `${what}: JSON ${json} bytes over the bound ${bound}`);
  assert.ok(binary <= bound, `${what}: binary ${binary} bytes over the bound ${bound}`);
}

/** Strings whose JSON is longest per UTF-16 unit: control characters, quotes, lone surrogates. */
const WIDE = ["", '\u0001\u001f"\\', "\ud800", "\udfff x", "é€😀", "\u2028\u2029", "a".repeat(300)];
const EXTREME_DOUBLES = [
  -2.2250738585072014e-308,
  -1.7976931348623157e308,
  5e-324,
  -0,
  0,
  Number.NaN,
  Number.NEGATIVE_INFINITY,
  Number.POSITIVE_INFINITY,
  -1.2345678901234567e-100,
];
const EXTREME_INT64 = [-(2n ** 63n), 2n ** 63n - 1n, 0n, -1n];

function response(seed: () => number): QueryVMMonitoringResponse {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(seed() * xs.length)];
  const str = () =>
    seed() < 0.5
      ? pick(WIDE)
      : String.fromCharCode(...Array.from({ length: seed() * 40 }, () => seed() * 0xffff));
  const i64 = () => (seed() < 0.5 ? pick(EXTREME_INT64) : BigInt(Math.floor((seed() - 0.5) * 2 ** 53)));
  const labels = () => Object.fromEntries(Array.from({ length: seed() * 5 }, () => [str(), str()]));
  const n = (max: number) => Math.floor(seed() * max);
  return create(QueryVMMonitoringResponseSchema, {
    startTimeUnix: i64(),
    endTimeUnix: i64(),
    stepSeconds: seed() < 0.5 ? -(2 ** 31) : n(2 ** 31),
    series: Array.from({ length: n(6) }, () => ({
      metricId: str(),
      unit: str(),
      labels: labels(),
      source: str(),
      points: Array.from({ length: n(400) }, () => ({
        timeUnix: i64(),
        value: seed() < 0.3 ? pick(EXTREME_DOUBLES) : (seed() - 0.5) * 10 ** n(300),
      })),
    })),
    quality: {
      lastObservedUnix: i64(),
      stale: seed() < 0.5,
      partial: seed() < 0.5,
      series: Array.from({ length: n(6) }, () => ({
        metricId: str(),
        labels: labels(),
        source: str(),
        expectedPoints: -(2 ** 31),
        presentPoints: 2 ** 31 - 1,
        lastObservedUnix: i64(),
        stale: true,
        gaps: Array.from({ length: n(20) }, () => ({ startTimeUnix: i64(), endTimeUnix: i64() })),
      })),
      errors: Array.from({ length: n(3) }, () => ({
        metricId: str(),
        code: str(),
        message: str(),
        reason: str(),
      })),
    },
  });
}

/** A small deterministic generator (mulberry32), so a failure reproduces. */
function mulberry32(a: number): () => number {
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe("QueryVMMonitoring's declared size bound", () => {
  it("covers the JSON and binary encodings of an empty answer and of edge values", () => {
    assertBounded(create(QueryVMMonitoringResponseSchema, {}), "empty answer");
    assertBounded(
      create(QueryVMMonitoringResponseSchema, { series: [{}], quality: { series: [{}] } }),
      "empty series",
    );
    const points = EXTREME_INT64.flatMap((timeUnix) => EXTREME_DOUBLES.map((value) => ({ timeUnix, value })));
    assertBounded(
      create(QueryVMMonitoringResponseSchema, {
        startTimeUnix: -(2n ** 63n),
        endTimeUnix: 2n ** 63n - 1n,
        stepSeconds: -(2 ** 31),
        series: WIDE.map((s) => ({
          metricId: s,
          unit: s,
          source: s,
          labels: { [s]: s, [`${s}k`]: s },
          points,
        })),
        quality: {
          lastObservedUnix: -(2n ** 63n),
          series: WIDE.map((s) => ({
            metricId: s,
            source: s,
            labels: { [s]: s },
            expectedPoints: -(2 ** 31),
            presentPoints: -(2 ** 31),
            lastObservedUnix: -(2n ** 63n),
            gaps: [{ startTimeUnix: -(2n ** 63n), endTimeUnix: -(2n ** 63n) }],
          })),
          errors: WIDE.map((s) => ({ metricId: s, code: s, message: s, reason: s })),
        },
      }),
      "edge values",
    );
    // Points dominate a real answer: 10,000 of the longest point, where nothing else adds slack.
    const longest = { timeUnix: -(2n ** 63n), value: -2.2250738585072014e-308 };
    assertBounded(
      create(QueryVMMonitoringResponseSchema, { series: [{ points: Array(10_000).fill(longest) }] }),
      "longest points",
    );
  });

  it("covers both encodings of 300 random answers", () => {
    const seed = mulberry32(31);
    for (let i = 0; i < 300; i++) assertBounded(response(seed), `random answer ${i}`);
  });
});

describe("response limit with a declared bound", () => {
  /** A server whose one method answers `length` bytes of token, declaring `bound` when given. */
  async function serverWith(maxResponseBytes: number, bound?: (length: number) => number) {
    const routes = (router: ConnectRouter) =>
      router.service(AutomationService, {
        exchangeCIToken: async (req) => {
          const length = Number(req.trustName);
          const m = create(ExchangeCITokenResponseSchema, {
            accessToken: "x".repeat(length),
            projectName: "p",
          });
          return bound ? withSizeBound(m, bound(length)) : m;
        },
      });
    return buildServer({
      db: {} as Db,
      log: pino({ level: "silent" }),
      registry: new Registry(),
      operatorToken: "operator-token-for-tests",
      maxRequestBytes: 1024 * 1024,
      maxResponseBytes,
      now: Date.now,
      routes,
      consoleKey: Buffer.alloc(32, 1),
    });
  }
  const post = (app: Awaited<ReturnType<typeof serverWith>>, length: number) =>
    app.inject({
      method: "POST",
      url: "/svc.iam.v1.AutomationService/ExchangeCIToken",
      headers: { "content-type": "application/json", "connect-protocol-version": "1" },
      payload: JSON.stringify({ trustName: String(length), assertion: "a" }),
    });

  it("measures an answer whose bound is over the limit, and refuses it only when it is", async () => {
    const app = await serverWith(1000, (length) => 10 * length);
    try {
      assert.equal((await post(app, 900)).statusCode, 200);
      const res = await post(app, 1000);
      assert.equal(res.statusCode, 400);
      assert.match(res.payload, /RESPONSE_TOO_LARGE/);
      assert.match(res.payload, /the answer of 10\d\d bytes/);
    } finally {
      await app.close();
    }
  });

  it("takes a bound within the limit as the answer's size, without encoding it to measure", async () => {
    // A bound is trusted (handlers declare only bounds tested like the one above): this one is false
    // on purpose, and the answer goes out, which shows the measuring encode did not run.
    const app = await serverWith(1000, () => 1000);
    try {
      assert.equal((await post(app, 5000)).statusCode, 200);
    } finally {
      await app.close();
    }
  });
});
