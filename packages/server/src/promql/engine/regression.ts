import { kahanInc } from "./kahan.ts";

/**
 * The least-squares line of `deriv` and `predict_linear` (Prometheus' linearRegression), the one copy of
 * that arithmetic: alert forecasts (alerts/forecast.ts) call it too, so a forecast rule predicts exactly
 * what `predict_linear` answers over the same samples.
 */

const tmp = new Float64Array(2);
const reg = new Float64Array(2);

/**
 * Fit over samples [a, b) of (t ms, v) with x in seconds relative to `interceptMs`, Kahan-compensated sums;
 * a constant series is its own line (slope 0), an infinite constant one none (NaN). Returns
 * [slope per second, intercept at interceptMs] in `out` (by default an array reused by every call).
 */
export function linearRegression(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  a: number,
  b: number,
  interceptMs: number,
  out: Float64Array = reg,
): Float64Array {
  let n = 0;
  let sumX = 0;
  let cX = 0;
  let sumY = 0;
  let cY = 0;
  let sumXY = 0;
  let cXY = 0;
  let sumX2 = 0;
  let cX2 = 0;
  const initY = v[a];
  let constY = true;
  for (let j = a; j < b; j++) {
    const y = v[j];
    if (constY && j > a && y !== initY) constY = false;
    n++;
    const x = (t[j] - interceptMs) / 1000;
    kahanInc(x, sumX, cX, tmp);
    sumX = tmp[0];
    cX = tmp[1];
    kahanInc(y, sumY, cY, tmp);
    sumY = tmp[0];
    cY = tmp[1];
    kahanInc(x * y, sumXY, cXY, tmp);
    sumXY = tmp[0];
    cXY = tmp[1];
    kahanInc(x * x, sumX2, cX2, tmp);
    sumX2 = tmp[0];
    cX2 = tmp[1];
  }
  if (constY) {
    if (!Number.isFinite(initY) && !Number.isNaN(initY)) {
      out[0] = Number.NaN;
      out[1] = Number.NaN;
    } else {
      out[0] = 0;
      out[1] = initY;
    }
    return out;
  }
  sumX += cX;
  sumY += cY;
  sumXY += cXY;
  sumX2 += cX2;
  const covXY = sumXY - (sumX * sumY) / n;
  const varX = sumX2 - (sumX * sumX) / n;
  const slope = covXY / varX;
  out[0] = slope;
  out[1] = sumY / n - (slope * sumX) / n;
  return out;
}

/** predict_linear over samples [a, b): the line's value `horizonS` seconds after atMs; undefined below two samples. */
export function predictLinear(
  t: ArrayLike<number>,
  v: ArrayLike<number>,
  a: number,
  b: number,
  atMs: number,
  horizonS: number,
): number | undefined {
  if (b - a < 2) return undefined;
  const line = linearRegression(t, v, a, b, atMs);
  return line[0] * horizonS + line[1];
}
