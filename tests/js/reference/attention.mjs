// Attention in f64 over the rows a cache holds, and how far the library's
// f32 result may be from it.
//
// The reference is the definition: z_p = q·k_p / √d, π = softmax(z),
// out = Σ_p π_p v_p, in double over the rows as stored (quantized rows
// dequantized). The library computes the same in f32 (and, for quantized
// keys, with the query q·c held as one vector of 14-bit codes), so it differs
// by rounding and that code's step only. `outTol` and `probsTol` bound that difference, per output
// element and per probability, from the data of the call, with u = 2^-24
// the unit roundoff of f32:
//  - a score: a dot product of d terms in any order errs by at most
//    d·u·S_p, S_p = Σ_j |q_j k_pj|; the division by the f32 √d and, for a
//    quantized row, the f32 steps of the code path (q·c, the i32 dot to
//    f32, the scales) and the dequantized row the reference reads add a few
//    u·S_p more (12 in all is generous); the query's codes are off by half
//    a step, max|q·c| / (2·8191), per channel, times s_p Σ_j |r_pj|, taken
//    as a whole step (the first-order propagation below of an error that
//    coarse fell short once: soak seed 1, q8, by 4%);
//  - softmax: row p's exponent is also off by the rounding of z_p − max,
//    u·|z_p − max|, its exp by 2.5 ulp (5u) and the product by 1/sum by u:
//    a_p in all. Since ln π_p = z_p − log Σ_q e^z_q, ln π_p is then off by
//    a_p + Σ_q π_q a_q − 2 π_p a_p (to first order; the row that takes all
//    the weight has no error of its own), plus the sum's rounding in four
//    lanes and its reciprocal, (n/4 + 4)u, common to all;
//  - out_j = Σ_p π_p v_pj moves by Σ_p π_p a_p |v_pj − out_j| with those
//    errors (the common part of each cancels against Σ_p π_p = 1), by
//    (n/4 + 4)u |out_j| with the common one; its sum, in the library's
//    order (quantized rows Σ (π_p s_p) r_pj, times c_j, then the f32 rows,
//    each added in row order), errs by u times the partial sums and the
//    products; a dequantized row is off by 2u |v_pj|;
//  - quantized values go to the library's integer sums with their weights
//    w_p = π_p s_p as i16 codes, one scale per tile of rows: each weight is
//    off by at most half a step, 2^-16 of the tile's largest weight, at most
//    2^-16 max_p w_p; so out_j by that times c_j Σ_p |r_pj|;
//  - subnormal results err by up to 2^-150 absolutely, whatever their size,
//    and an exp below −87.3 is 0 in the library: a weight below 2^-125 may
//    be lost outright.
// The bounds are doubled (a log error e becomes a factor e^2e − 1) to
// cover the second-order terms they leave out. Where the probability mass
// that may move exceeds 0.05 (scores so large that f32 cannot rank rows
// the way f64 does), first order says nothing: the call is
// `illConditioned`, and the bound is only what any softmax gives,
// probabilities in [0, 1] and out within the values' range.

const U = 2 ** -24;
const QUERY_CODE_MAX = 8191; // KVC_QUERY_CODE_MAX
const TINY = 2 ** -149;
const LOST_PROB = 2 ** -125;
const FIRST_ORDER_LIMIT = 0.05;

/**
 * Single-query attention of q over `rows` (each { key: { read, codes?,
 * scale? }, value: { read, codes?, scale? } }), keyField/valueField the
 * fields of quantized components. Returns { out, probs } (Float64Array),
 * their tolerances { outTol, probsTol }, illConditioned, and valueScale,
 * the largest |v_pj|.
 */
export function referenceAttention(q, rows, d, keyField, valueField) {
  const n = rows.length;
  const out = new Float64Array(d);
  const probs = new Float64Array(n);
  const outTol = new Float64Array(d);
  const probsTol = new Float64Array(n);
  if (n === 0) return { out, probs, outTol, probsTol, illConditioned: false, valueScale: 0 };

  const z = scores(q, rows, d, keyField);
  let zMax = -Infinity;
  for (const { z: zp } of z) zMax = Math.max(zMax, zp);
  let sum = 0;
  for (let p = 0; p < n; p++) sum += (probs[p] = Math.exp(z[p].z - zMax));
  const a = new Float64Array(n); // the error of row p's exponent
  let meanA = 0;
  for (let p = 0; p < n; p++) {
    probs[p] /= sum;
    a[p] = z[p].error + U * Math.abs(z[p].z - zMax) + 6 * U;
    meanA += probs[p] * a[p];
  }
  const common = (n / 4 + 4) * U;
  let movable = 0; // the probability mass that may move
  for (let p = 0; p < n; p++) {
    const logError = a[p] + meanA - 2 * probs[p] * a[p] + common;
    probsTol[p] = (probs[p] && probs[p] * Math.expm1(2 * logError)) + LOST_PROB;
    movable += probsTol[p];
  }
  const illConditioned = !(movable <= FIRST_ORDER_LIMIT);
  if (illConditioned) probsTol.fill(1);
  const cMax = valueField ? valueField.reduce((m, x) => Math.max(m, x), 0) : 1;
  const subnormal = (3 * n + d) * TINY * Math.max(1, 127 * cMax);
  let valueScale = 0;
  for (const row of rows) for (const x of row.value.read) valueScale = Math.max(valueScale, Math.abs(x));
  const coded = valueCodingBound(rows, probs, d, valueField);

  for (let j = 0; j < d; j++) {
    let outJ = 0;
    let lost = 0;
    for (let p = 0; p < n; p++) {
      outJ += probs[p] * rows[p].value.read[j];
      lost += LOST_PROB * Math.abs(rows[p].value.read[j]);
    }
    out[j] = outJ;
    if (illConditioned) {
      let spread = 0;
      for (const row of rows) spread = Math.max(spread, Math.abs(row.value.read[j] - outJ));
      outTol[j] = spread * (1 + 1e-6) + lost + subnormal + coded[j];
      continue;
    }
    let moved = common * Math.abs(outJ);
    let dequantized = 0;
    for (let p = 0; p < n; p++) {
      const vpj = rows[p].value.read[j];
      moved += (probs[p] && probs[p] * Math.expm1(a[p])) * Math.abs(vpj - outJ);
      if (rows[p].value.codes) dequantized += 2 * U * probs[p] * Math.abs(vpj);
    }
    const summed = sumRoundingBound(rows, probs, j, valueField);
    outTol[j] = 2 * (moved + summed + dequantized) + lost + subnormal + coded[j];
  }
  return { out, probs, outTol, probsTol, illConditioned, valueScale };
}

// Each score and the bound on its f32 error.
function scores(q, rows, d, keyField) {
  const sqrtD = Math.sqrt(d);
  let maxQc = 0;
  if (keyField) for (let j = 0; j < d; j++) maxQc = Math.max(maxQc, Math.abs(q[j] * keyField[j]));
  return rows.map(({ key }) => {
    let dot = 0;
    let absDot = 0;
    for (let j = 0; j < d; j++) {
      dot += q[j] * key.read[j];
      absDot += Math.abs(q[j] * key.read[j]);
    }
    let error = (d + 12) * U * absDot + d * TINY;
    if (key.codes) {
      let codeSum = 0;
      for (const r of key.codes) codeSum += Math.abs(r);
      error += (maxQc / QUERY_CODE_MAX) * key.scale * codeSum;
    }
    return { z: dot / sqrtD, error: error / sqrtD };
  });
}

// What the i16 coding of the quantized values' weights may cost out_j:
// 2^-16 of the largest weight π_p s_p (every tile's step is at most that),
// times c_j Σ_p |r_pj|, doubled for the weights' own f32 rounding.
function valueCodingBound(rows, probs, d, valueField) {
  const bound = new Float64Array(d);
  let largest = 0;
  for (let p = 0; p < rows.length; p++) {
    if (rows[p].value.codes) largest = Math.max(largest, probs[p] * rows[p].value.scale);
  }
  if (largest === 0) return bound;
  for (let j = 0; j < d; j++) {
    let codes = 0;
    for (const { value } of rows) if (value.codes) codes += Math.abs(value.codes[j]);
    bound[j] = 2 * 2 ** -16 * largest * valueField[j] * codes;
  }
  return bound;
}

// u times what the library's f32 sum of out_j adds up, in its order: the
// quantized rows' (π_p s_p) r_pj from 0 (two products and a partial sum
// each), the product by c_j, then the f32 rows' π_p v_pj (a product and a
// partial sum each).
function sumRoundingBound(rows, probs, j, valueField) {
  let partial = 0;
  let bound = 0;
  for (let p = 0; p < rows.length; p++) {
    const { value } = rows[p];
    if (!value.codes) continue;
    const term = probs[p] * value.scale * value.codes[j];
    partial += term;
    bound += Math.abs(partial) + 2 * Math.abs(term);
  }
  if (valueField) {
    bound *= valueField[j];
    partial *= valueField[j];
    bound += Math.abs(partial);
  }
  for (let p = 0; p < rows.length; p++) {
    const { value } = rows[p];
    if (value.codes) continue;
    const term = probs[p] * value.read[j];
    partial += term;
    bound += Math.abs(partial) + Math.abs(term);
  }
  return U * bound;
}
