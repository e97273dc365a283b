// Synthetic K/V with the statistics of real attention layers, shared by the
// tests, the benchmarks and the demo (not part of the package): no model needed.

/** A small deterministic generator (mulberry32) with a normal sampler. */
export function rng(seed) {
  let a = seed >>> 0;
  const unit = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const normal = () => {
    const u = 1 - unit();
    return Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * unit());
  };
  return { unit, normal, int: (n) => Math.floor(unit() * n) };
}

export function normals(r, n) {
  return Float32Array.from({ length: n }, r.normal);
}

/**
 * Keys for `rows` positions [rows × H × d] with the statistics of real keys:
 * normal entries, three large outlier channels per head, and a RoPE-like
 * rotation of channel pairs by position.
 */
export function outlierKeys(r, rows, firstPosition, H, d) {
  const k = new Float32Array(rows * H * d);
  for (let row = 0; row < rows; row++) {
    const position = firstPosition + row;
    for (let h = 0; h < H; h++) {
      const x = k.subarray((row * H + h) * d, (row * H + h + 1) * d);
      for (let j = 0; j < d; j++) x[j] = r.normal();
      for (let o = 0; o < 3 && o < d; o++) x[(h * 7 + o * 13 + 5) % d] = 10 * (o + 1) + 2 * r.normal();
      for (let i = 0; 2 * i + 1 < d; i++) {
        const angle = position * 10000 ** (-2 * i / d);
        const [a, b] = [x[2 * i], x[2 * i + 1]];
        x[2 * i] = a * Math.cos(angle) - b * Math.sin(angle);
        x[2 * i + 1] = a * Math.sin(angle) + b * Math.cos(angle);
      }
    }
  }
  return k;
}
