// The transformer the package runs in C (src/model), in plain JavaScript and
// without a cache: every position computed from scratch, attention in f64
// over all positions up to its own, written to be read rather than fast.
// What the C forward pass must match (tests/js/model.test.mjs), on weights
// given as f32 arrays -- dequantized by tests/gguf/types.mjs, independently
// of the package's kernels.
//
//   const logits = referenceLogits(model, tokens);   // [tokens.length x vocab]
//
// `model`: { config: { architecture, dim, numLayers, numHeads, numKvHeads,
// headDim, hiddenDim, vocabSize, eps, ropeBase }, tensor(name) -> Float32Array
// (row-major [rows x cols], ggml dims [cols, rows]), has(name), and
// optionally input(name, x, rows, cols) -> what a product with weight `name`
// reads of its input x (say, x coded as llama.cpp codes it for that weight's
// type: tests/gguf/activations.mjs) }.

// Per architecture, as llama.cpp computes it: RoPE pairs adjacent channels
// (llama's GGUF layout) or halves (NeoX: qwen2, qwen3), biases on q, k, v
// (qwen2), an RMSNorm of every head of q and k (qwen3).
export const ARCHITECTURES = {
  llama: { rope: 'adjacent', bias: false, qkNorm: false },
  qwen2: { rope: 'halves', bias: true, qkNorm: false },
  qwen3: { rope: 'halves', bias: false, qkNorm: true },
};

/** out[r × outDim] = x[r × inDim] · wᵀ (w [outDim × inDim]), in f64. */
function matmul(x, w, rows, inDim, outDim) {
  const out = new Float32Array(rows * outDim);
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < outDim; o++) {
      let sum = 0;
      for (let i = 0; i < inDim; i++) sum += w[o * inDim + i] * x[r * inDim + i];
      out[r * outDim + o] = sum;
    }
  }
  return out;
}

function rmsnorm(x, weight, rows, dim, eps) {
  const out = new Float32Array(rows * dim);
  for (let r = 0; r < rows; r++) {
    let ss = 0;
    for (let i = 0; i < dim; i++) ss += x[r * dim + i] ** 2;
    const scale = 1 / Math.sqrt(ss / dim + eps);
    for (let i = 0; i < dim; i++) out[r * dim + i] = weight[i] * (scale * x[r * dim + i]);
  }
  return out;
}

/** Rotates every head of row r by position r: pairs (2i, 2i+1) or (i, i + half), angle r · base^(−2i/headDim) / factor_i. */
function rope(x, rows, heads, headDim, base, pairing, factors) {
  const half = headDim / 2;
  for (let r = 0; r < rows; r++) {
    for (let h = 0; h < heads; h++) {
      const at = (r * heads + h) * headDim;
      for (let i = 0; i < half; i++) {
        const angle = (r * base ** (-2 * i / headDim)) / (factors ? factors[i] : 1);
        const [a, b] = pairing === 'adjacent' ? [at + 2 * i, at + 2 * i + 1] : [at + i, at + i + half];
        const [x0, x1] = [x[a], x[b]];
        x[a] = x0 * Math.cos(angle) - x1 * Math.sin(angle);
        x[b] = x0 * Math.sin(angle) + x1 * Math.cos(angle);
      }
    }
  }
}

function addBias(x, bias, rows, dim) {
  for (let r = 0; r < rows; r++) for (let i = 0; i < dim; i++) x[r * dim + i] += bias[i];
}

/** The logits of every position of `tokens`, [m × vocab]. */
export function referenceLogits(model, tokens) {
  const { architecture, dim, numLayers, numHeads, numKvHeads, headDim, hiddenDim, vocabSize, eps, ropeBase } = model.config;
  const arch = ARCHITECTURES[architecture];
  const m = tokens.length;
  const qDim = numHeads * headDim;
  const kvDim = numKvHeads * headDim;
  const group = numHeads / numKvHeads;
  const embedding = model.tensor('token_embd.weight');
  const factors = model.has('rope_freqs.weight') ? model.tensor('rope_freqs.weight') : null;
  // x [m × inDim] times weight `name` [outDim × inDim], transposed.
  const linear = (name, x, inDim, outDim) => matmul(model.input?.(name, x, m, inDim) ?? x, model.tensor(name), m, inDim, outDim);
  const x = new Float32Array(m * dim);
  tokens.forEach((token, i) => x.set(embedding.subarray(token * dim, (token + 1) * dim), i * dim));
  for (let l = 0; l < numLayers; l++) {
    const w = (name) => model.tensor(`blk.${l}.${name}`);
    const project = (name, input, inDim, outDim) => linear(`blk.${l}.${name}`, input, inDim, outDim);
    const xb = rmsnorm(x, w('attn_norm.weight'), m, dim, eps);
    const q = project('attn_q.weight', xb, dim, qDim);
    const k = project('attn_k.weight', xb, dim, kvDim);
    const v = project('attn_v.weight', xb, dim, kvDim);
    if (arch.bias) {
      addBias(q, w('attn_q.bias'), m, qDim);
      addBias(k, w('attn_k.bias'), m, kvDim);
      addBias(v, w('attn_v.bias'), m, kvDim);
    }
    if (arch.qkNorm) {
      q.set(rmsnorm(q, w('attn_q_norm.weight'), m * numHeads, headDim, eps));
      k.set(rmsnorm(k, w('attn_k_norm.weight'), m * numKvHeads, headDim, eps));
    }
    rope(q, m, numHeads, headDim, ropeBase, arch.rope, factors);
    rope(k, m, numKvHeads, headDim, ropeBase, arch.rope, factors);
    const att = new Float32Array(m * qDim);
    for (let i = 0; i < m; i++) {
      for (let h = 0; h < numHeads; h++) {
        const g = Math.floor(h / group);
        const scores = new Float64Array(i + 1);
        for (let p = 0; p <= i; p++) {
          let dot = 0;
          for (let j = 0; j < headDim; j++) dot += q[i * qDim + h * headDim + j] * k[p * kvDim + g * headDim + j];
          scores[p] = dot / Math.sqrt(headDim);
        }
        const max = Math.max(...scores);
        let sum = 0;
        for (let p = 0; p <= i; p++) sum += (scores[p] = Math.exp(scores[p] - max));
        for (let j = 0; j < headDim; j++) {
          let acc = 0;
          for (let p = 0; p <= i; p++) acc += (scores[p] / sum) * v[p * kvDim + g * headDim + j];
          att[i * qDim + h * headDim + j] = acc;
        }
      }
    }
    const projected = project('attn_output.weight', att, qDim, dim);
    for (let i = 0; i < x.length; i++) x[i] += projected[i];
    const xf = rmsnorm(x, w('ffn_norm.weight'), m, dim, eps);
    const gate = project('ffn_gate.weight', xf, dim, hiddenDim);
    const up = project('ffn_up.weight', xf, dim, hiddenDim);
    for (let i = 0; i < gate.length; i++) gate[i] = (gate[i] / (1 + Math.exp(-gate[i]))) * up[i];
    const down = project('ffn_down.weight', gate, hiddenDim, dim);
    for (let i = 0; i < x.length; i++) x[i] += down[i];
  }
  const final = rmsnorm(x, model.tensor('output_norm.weight'), m, dim, eps);
  return linear(model.has('output.weight') ? 'output.weight' : 'token_embd.weight', final, dim, vocabSize);
}
