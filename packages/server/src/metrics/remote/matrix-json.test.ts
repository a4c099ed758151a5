import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { seededRandom } from "../../../testing/seeded-random.ts";
import { matrixSeries } from "./api-client.ts";
import { parseMatrixAnswer } from "./matrix-json.ts";

/** The reference: JSON.parse, then the conversion the client used before the byte reader. */
function viaJson(body: string) {
  return JSON.parse(body).data.result.map(matrixSeries);
}

const bits = (a: Float64Array) => [...new Uint32Array(a.buffer, a.byteOffset, a.length * 2)];

function assertSame(body: string) {
  const fast = parseMatrixAnswer(Buffer.from(body));
  assert.ok(fast, `fast path refused ${body.slice(0, 200)}`);
  const ref = viaJson(body);
  assert.equal(fast.length, ref.length);
  fast.forEach((s, i) => {
    assert.deepEqual(s.metric, ref[i].metric);
    assert.deepEqual(bits(s.timestamps), bits(ref[i].timestamps), body.slice(0, 300));
    assert.deepEqual(bits(s.values), bits(ref[i].values), body.slice(0, 300));
  });
}

const wrap = (result: string) => `{"status":"success","data":{"resultType":"matrix","result":[${result}]}}`;

describe("parseMatrixAnswer()", () => {
  it("reads what JSON.parse reads, bit for bit, over the value shapes engines write", () => {
    const values = [
      "0",
      "-0",
      "1",
      "1.5",
      "-2.25",
      "1000000",
      "0.1",
      "0.30000000000000004",
      "0.0000000015000000000000002",
      "123456789012345",
      "1234567890123456",
      "12345678901234567890",
      "9007199254740993",
      "1e+06",
      "1.5e-07",
      "NaN",
      "+Inf",
      "-Inf",
      "3.141592653589793",
      "00012",
      "1.",
      ".5",
    ];
    const points = values.map((v, i) => `[${1795762522 + i * 30},"${v}"]`).join(",");
    assertSame(wrap(`{"metric":{"__name__":"up","job":"a","x":"q\\"}","e":""},"values":[${points}]}`));
  });

  it("reads random series with millisecond times and decimal values as JSON.parse does", () => {
    const r = seededRandom(7);
    for (let round = 0; round < 200; round++) {
      const series: string[] = [];
      for (let s = 0; s < 1 + Math.floor(r() * 4); s++) {
        const pts: string[] = [];
        for (let k = 0; k < Math.floor(r() * 50); k++) {
          const t = (
            1.7e9 +
            Math.floor(r() * 1e8) +
            (r() < 0.5 ? Math.floor(r() * 1000) / 1000 : 0)
          ).toString();
          const v =
            r() < 0.3
              ? String(Math.floor(r() * 1e9))
              : r() < 0.6
                ? `${r() < 0.5 ? "-" : ""}${Math.floor(r() * 1e9)}.${String(Math.floor(r() * 1e6)).padStart(6, "0")}`
                : r() < 0.8
                  ? `0.${"0".repeat(Math.floor(r() * 8))}${Math.floor(r() * 1e14)}`
                  : String((r() - 0.5) * 10 ** Math.floor(r() * 30 - 10));
          pts.push(`[${t},"${v}"]`);
        }
        series.push(
          `{"metric":{"vm":"projects/p/vms/${s}","svc_request":"${s}"},"values":[${pts.join(",")}]}`,
        );
      }
      assertSame(wrap(series.join(",")));
    }
  });

  it("reads an empty result", () => {
    assert.deepEqual(parseMatrixAnswer(Buffer.from(wrap(""))), []);
  });

  it("leaves everything else to JSON.parse", () => {
    for (const body of [
      '{"status":"error","errorType":"422","error":"bad"}',
      `${wrap('{"metric":{},"values":[[1,"1"]]}').slice(0, -1)},"warnings":["w"]}`,
      wrap('{"metric":{},"values":[[1.0001,"1"]]}'),
      wrap('{"metric":{"a":{"b":"c"}},"values":[]}'),
      wrap('{"metric":{},"values":[[1,"1"]]'),
      '{"status":"success","data":{"resultType":"vector","result":[]}}',
    ])
      assert.equal(parseMatrixAnswer(Buffer.from(body)), undefined, body);
  });
});
