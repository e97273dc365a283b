// The q8 "2f" scheme in plain JS, bit for bit as the C core computes it
// (src/core/quant.c, src/kernels/quantize-row-scalar.c,
// dequantize-row-scalar.c): a row is int8 codes r and one f32 scale s, read
// back as x[j] = (r[j] * s) * c[j] against the per-channel field c.  And
// q4 (quantize-row-q4-scalar.c, q4-pack.h): 4-bit codes with a shift per 16
// channels, which the library reads as the int8 codes code << shift with
// the scale over 8 -- so here a q4 row is those codes and that scale.
//
// Every f32 step is a double operation rounded with Math.fround: for + - * /
// and sqrt the double result rounded to f32 is the f32 result (double carries
// more than twice f32's bits), and the library is built without FMA
// contraction, so nothing is fused on the C side either.

/** Rows at positions below this stay f32; the field freezes when it is appended. */
export const Q8_WINDOW = 64;

const RATIO_MAX = 2 ** 127; // KVC_Q8_RATIO_MAX
const FIELD_FLOOR = Math.fround(1e-30); // KVC_Q8_FIELD_FLOOR
const FIELD_RANGE_LOG2 = 6; // KVC_Q8_FIELD_RANGE_LOG2
const SCALE_FLOOR = Math.fround(1e-30); // KVC_Q8_SCALE_FLOOR
const CODE_MAX = 127;
const Q4_CODE_MAX = 7;
const Q4_GROUP = 16;
const Q4_MAX_SHIFT = 3;

/**
 * The field of one store: c[j] = RMS of channel j over `rows` (the store's
 * f32 rows, in position order), summed in double, floored at 1e-30 and at
 * 2^-6 of the largest c; all ones when there are no rows.
 */
export function freezeField(rows, d) {
  const field = new Float32Array(d);
  for (let j = 0; j < d; j++) {
    if (rows.length === 0) {
      field[j] = 1;
      continue;
    }
    let sumSq = 0; // double, as in C; x * x of an f32 is exact in double
    for (const row of rows) sumSq += row[j] * row[j];
    let c = Math.fround(Math.sqrt(sumSq / rows.length));
    if (c < FIELD_FLOOR) c = FIELD_FLOOR;
    field[j] = c;
  }
  let maxC = 0;
  for (const c of field) maxC = Math.max(maxC, c);
  const rangeFloor = Math.fround(maxC * 2 ** -FIELD_RANGE_LOG2);
  for (let j = 0; j < d; j++) field[j] = Math.max(field[j], rangeFloor);
  return field;
}

/** x / c in f32, saturated so that a huge x over a tiny c stays finite. */
function channelRatio(x, c) {
  const t = Math.fround(x / c);
  if (t > RATIO_MAX) return RATIO_MAX;
  if (t < -RATIO_MAX) return -RATIO_MAX;
  return t;
}

/** rintf in the default rounding mode: to nearest, ties to even. */
function roundHalfEven(x) {
  const floor = Math.floor(x);
  const rest = x - floor; // exact: x is an f32, floor an integer near it
  if (rest < 0.5) return floor;
  if (rest > 0.5) return floor + 1;
  return floor % 2 === 0 ? floor : floor + 1;
}

/** Quantizes the f32 row x against `field`: { codes: Int8Array, scale }. */
export function quantizeRow(x, field) {
  const d = x.length;
  let maxAbs = 0;
  for (let j = 0; j < d; j++) {
    const t = Math.abs(channelRatio(x[j], field[j]));
    if (maxAbs < t) maxAbs = t;
  }
  let scale = Math.fround(maxAbs / CODE_MAX);
  if (scale < SCALE_FLOOR) scale = SCALE_FLOOR;
  // An Int8Array also turns a -0 code into 0, as the C cast to int8_t does.
  const codes = new Int8Array(d);
  for (let j = 0; j < d; j++) {
    const r = roundHalfEven(Math.fround(channelRatio(x[j], field[j]) / scale));
    codes[j] = Math.min(CODE_MAX, Math.max(-CODE_MAX, r));
  }
  return { codes, scale };
}

/** The f32 row a quantized row reads as: ((float)r[j] * s) * c[j]. */
export function dequantizeRow(codes, scale, field) {
  const x = new Float32Array(codes.length);
  for (let j = 0; j < codes.length; j++) x[j] = Math.fround(Math.fround(codes[j] * scale) * field[j]);
  return x;
}

/** Quantizes x against `field` in 4 bits: { codes: Int8Array (code << shift), scale (over 8) }. */
export function quantizeRowQ4(x, field) {
  const d = x.length;
  const t = Array.from(x, (xj, j) => channelRatio(xj, field[j]));
  let rowMax = 0;
  const groupMax = new Array(Math.ceil(d / Q4_GROUP)).fill(0);
  t.forEach((tj, j) => {
    const a = Math.abs(tj);
    if (rowMax < a) rowMax = a;
    const g = Math.floor(j / Q4_GROUP);
    if (groupMax[g] < a) groupMax[g] = a;
  });
  let scale = Math.fround(rowMax / Q4_CODE_MAX);
  if (scale < SCALE_FLOOR) scale = SCALE_FLOOR;
  // Each group's shift: the smallest whose steps, scale * 2^(shift - 3), still hold it.
  const shifts = groupMax.map((max) => {
    let shift = Q4_MAX_SHIFT;
    while (shift > 0 && max <= Math.fround(rowMax * 2 ** (shift - 1 - Q4_MAX_SHIFT))) shift--;
    return shift;
  });
  const codes = new Int8Array(d);
  for (let j = 0; j < d; j++) {
    const shift = shifts[Math.floor(j / Q4_GROUP)];
    const step = Math.fround(scale * 2 ** (shift - Q4_MAX_SHIFT));
    const r = Math.min(Q4_CODE_MAX, Math.max(-Q4_CODE_MAX, roundHalfEven(Math.fround(t[j] / step))));
    codes[j] = r * 2 ** shift;
  }
  return { codes, scale: Math.fround(scale * 0.125) };
}
