// Image projector files (llama.cpp's mtmd "mmproj" GGUFs, general.architecture
// clip) with random weights, and the language models they feed: the keys and
// tensors llama.cpp's converter (convert_hf_to_gguf.py's mmproj classes)
// writes and its clip.cpp loader reads, for the projector types the runner
// reads -- idefics3 (SmolVLM2), lfm2 (LFM2-VL), gemma3 (Gemma 3), gemma4v
// (Gemma 4) and qwen3vl_merger (Qwen3-VL, Qwen3.5). Written to a temporary
// folder when used, never committed.
//
//   const g = PROJECTOR_GEOMETRIES['tiny-lfm2'];
//   writeGgufFile(projectorPath, randomProjector(g, { mix: 'Q8_0', seed: 1 }));
//   writeGgufFile(modelPath, pairedLanguageModel(g, { mix: 'F32', seed: 1 }));
//
// A geometry is the encoder's size (width, layers, heads, FFN) and its
// preprocessing (image size, patch, merge) beside the projector type. The
// tiny gemma4v and qwen3vl keep their real model's preprocessing, so
// llama.cpp gives them the real image token counts; the tiny idefics3, lfm2
// and gemma3 scale it down so that an image encodes in well under a second
// (PROJECTOR_GEOMETRIES says how); narrowed(g) gives any real geometry's
// counts at the tiny width.
//
// A mix is the converter's --outtype: 'F32', 'F16' or 'Q8_0'. Vectors (norms,
// biases, scales) stay F32; the patch embedding is F16 in an F16 file and
// F32 otherwise (MmprojModel.tensor_force_quant), F32 always for idefics3 and
// gemma3 (their `.embeddings.` rule); position embeddings are F32 (the
// converter's always-F32 list, and gemma4v's rule); Gemma 3's
// mm.input_projection is F16 whatever the mix (Gemma3VisionModel); a Q8_0
// matrix whose rows 32 does not divide falls back to F16 as the converter's
// quantizer does.
//
// Weights are drawn so that activations stay near RMS 1 through the layers
// (each matrix's values of RMS 1/sqrt(its fan-in), norms 1 +- 0.1, biases of
// RMS 0.1), so that the language model's next token after an image is
// neither certain nor uniform.
import { rng } from '../../support/synthetic.mjs';
import { GEOMETRIES, randomLlama } from './models.mjs';
import { ggmlType, GGML_TYPES } from './types.mjs';
import { gguf } from './writer.mjs';

const grid = (prefix, rows, cols, suffix) =>
  Array.from({ length: rows * cols }, (_, i) => `${prefix}${Math.floor(i / cols) + 1}_col_${(i % cols) + 1}${suffix}`);

/**
 * The projector types, a row each: the converter's class, its keys beyond
 * MmprojModel's, the tensors its graph reads, the image's normalisation,
 * the markers mtmd tokenizes or looks up in the language model's vocabulary
 * (tools/mtmd/mtmd.cpp's init_vision), and what the language model is.
 *
 * `encoder`: 'siglip' (LayerNorm blocks with biases, learned positions, a
 * patch bias), 'gemma4' (RMSNorm blocks without biases, q/k norms, post
 * norms, a gated FFN, a layer scale, two position tables), 'qwen3vl' (fused
 * qkv, two patch kernels, learned positions interpolated).
 */
export const PROJECTOR_TYPES = {
  // SmolVLMModel: SigLIP, pixel shuffle by scale_factor, one linear (mm.model.fc); embeddings F32.
  idefics3: {
    encoder: 'siglip', postNorm: true, embeddingsF32: true, mean: 0.5, std: 0.5,
    keys: (g) => [
      ['clip.projector_type', 'idefics3'],
      ['clip.vision.attention.layer_norm_epsilon', gguf.f32(g.eps)],
      ['clip.vision.projector.scale_factor', gguf.u32(g.merge)],
      ['clip.use_gelu', true],
      ['clip.vision.preproc_image_size', gguf.u32(g.longestEdge)],
    ],
    head: (g) => [matrix('mm.model.fc.weight', [g.width * g.merge * g.merge, g.outputDim])],
    // The overview's "\n\n<fake_token_around_image><global-img>", rows ended by "\n" (the byte token), tiles' "<row_R_col_C>".
    markers: ['<fake_token_around_image>', '<global-img>', '<image>', '<end_of_utterance>', '\n\n', ...grid('<row_', 6, 6, '>')],
  },
  // LFM2VLModel: SigLIP2 NaFlex (a linear patch embedding, as a conv; 16x16 positions interpolated),
  // pixel unshuffle, LayerNorm, a GELU MLP (mm.1, mm.2).
  lfm2: {
    encoder: 'siglip', postNorm: true, embeddingsF32: false, mean: 0.5, std: 0.5,
    keys: (g) => [
      ['clip.projector_type', 'lfm2'],
      ['clip.vision.attention.layer_norm_epsilon', gguf.f32(g.eps)],
      ['clip.vision.projector.scale_factor', gguf.u32(g.merge)],
      ['clip.use_gelu', true],
    ],
    head: (g) => {
      const merged = g.width * g.merge * g.merge;
      return [
        norm('mm.input_norm.weight', merged), bias('mm.input_norm.bias', merged),
        matrix('mm.1.weight', [merged, g.projectorHidden]), bias('mm.1.bias', g.projectorHidden),
        matrix('mm.2.weight', [g.projectorHidden, g.outputDim]), bias('mm.2.bias', g.outputDim),
      ];
    },
    markers: ['<|image_start|>', '<|image_end|>', '<|img_thumbnail|>', '<image>', ...grid('<|img_row_', 10, 10, '|>')],
  },
  // Gemma3VisionModel: SigLIP at a fixed size, 4x4 average pool (n_merge, its key written only when
  // not 4), RMSNorm (soft_emb_norm, stored +1), a projection stored [text, vision] (F16 always).
  gemma3: {
    encoder: 'siglip', postNorm: true, embeddingsF32: true, mean: 0.5, std: 0.5,
    keys: (g) => [
      ['clip.projector_type', 'gemma3'],
      ['clip.vision.attention.layer_norm_epsilon', gguf.f32(g.eps)],
      ['clip.use_gelu', true],
      ...(g.merge !== 4 ? [['clip.vision.projector.scale_factor', gguf.u32(g.merge)]] : []),
    ],
    head: (g) => [
      norm('mm.soft_emb_norm.weight', g.width),
      { ...matrix('mm.input_projection.weight', [g.outputDim, g.width], g.width), type: 'F16' },
    ],
    markers: ['<start_of_image>', '<end_of_image>', '<image_soft_token>'],
  },
  // Gemma4VisionAudioModel (vision only here): its projector type under clip.vision.projector_type,
  // patches without a bias, position tables for x and y (F32), RMSNorm blocks, pooled by 3x3 and
  // projected by mm.input_projection ([vision, text]). No clip.use_gelu: the converter writes none.
  gemma4v: {
    encoder: 'gemma4', postNorm: false, embeddingsF32: false, mean: 0, std: 1,
    keys: (g) => [
      ['clip.vision.projector_type', 'gemma4v'],
      ['clip.vision.attention.layer_norm_epsilon', gguf.f32(g.eps)],
    ],
    head: (g) => [matrix('mm.input_projection.weight', [g.width, g.outputDim])],
    markers: ['<|image>', '<image|>', '<|image|>'],
  },
  // Qwen3VLVisionModel (Qwen3-VL, Qwen3.5): the Conv3D patch kernel split in two (patch_embd.weight
  // and .weight.1), fused qkv, 2x2 merge, merger norm (post_ln) and MLP (mm.0, mm.2); no deepstack
  // layer here (Qwen3.5 has none), so is_deepstack_layers is all false.
  qwen3vl_merger: {
    encoder: 'qwen3vl', postNorm: true, embeddingsF32: false, mean: 0.5, std: 0.5,
    keys: (g) => [
      ['clip.projector_type', 'qwen3vl_merger'],
      ['clip.use_gelu', true],
      ['clip.vision.spatial_merge_size', gguf.u32(g.merge)],
      ['clip.vision.attention.layer_norm_epsilon', gguf.f32(g.eps)],
      ['clip.vision.is_deepstack_layers', gguf.array('bool', Array(g.layers).fill(false))],
    ],
    head: (g) => {
      const merged = g.width * g.merge * g.merge;
      return [
        matrix('mm.0.weight', [merged, merged]), bias('mm.0.bias', merged),
        matrix('mm.2.weight', [merged, g.outputDim]), bias('mm.2.bias', g.outputDim),
      ];
    },
    markers: ['<|vision_start|>', '<|vision_end|>', '<|image_pad|>', '<|im_start|>', '<|im_end|>'],
  },
};

// The tiny encoder: 2 layers of width 64, 4 heads, an FFN of 128 (lfm2's projector's too), an
// output of 256 (the tiny language models' width).
const TINY = { width: 64, layers: 2, heads: 4, ffn: 128, projectorHidden: 128, outputDim: 256, eps: 1e-6 };

// Each type's real preprocessing (clip.vision.image_size, patch_size, merge per side, idefics3's
// longest edge): what llama.cpp counts an image's tokens by.
const PREPROCESSING = {
  idefics3: { imageSize: 512, patchSize: 16, merge: 4, longestEdge: 2048 },
  lfm2: { imageSize: 256, patchSize: 16, merge: 2 },
  gemma3: { imageSize: 896, patchSize: 14, merge: 4 },
  gemma4v: { imageSize: 224, patchSize: 16, merge: 3, positions: 10240 },
  qwen3vl_merger: { imageSize: 768, patchSize: 16, merge: 2 },
};

/**
 * Projector geometries: the real models' (their vision tower and projector
 * as their config.json has them) and tiny ones for the tests (2 layers of
 * width 64, an output of 256, the tiny language models' width), whose
 * preprocessing is scaled down where the real one would make an encode slow
 * (idefics3's tiles of 128 in patches of 8 up to a longest edge of 512,
 * lfm2's patches of 32 -- its tiles are 512 whatever the file says --,
 * gemma3's 224). `language`: the geometry (models.mjs) of the language model
 * it feeds. narrowed(g) keeps g's preprocessing at the tiny width.
 */
export const PROJECTOR_GEOMETRIES = {
  'smolvlm2-256m': { name: 'smolvlm2-256m', type: 'idefics3', ...PREPROCESSING.idefics3, width: 768, layers: 12, heads: 12, ffn: 3072, outputDim: 576, eps: 1e-6, language: 'smollm2-135m' },
  'lfm2-vl-450m': { name: 'lfm2-vl-450m', type: 'lfm2', ...PREPROCESSING.lfm2, width: 768, layers: 12, heads: 12, ffn: 3072, projectorHidden: 2560, outputDim: 1024, eps: 1e-6, language: 'lfm2-350m' },
  'gemma-3-4b': { name: 'gemma-3-4b', type: 'gemma3', ...PREPROCESSING.gemma3, width: 1152, layers: 27, heads: 16, ffn: 4304, outputDim: 2560, eps: 1e-6, language: 'gemma-3-4b' },
  'gemma-4-e2b': { name: 'gemma-4-e2b', type: 'gemma4v', ...PREPROCESSING.gemma4v, width: 768, layers: 16, heads: 12, ffn: 3072, outputDim: 1536, eps: 1e-6, language: 'gemma-4-e2b' },
  'qwen3.5-0.8b': { name: 'qwen3.5-0.8b', type: 'qwen3vl_merger', ...PREPROCESSING.qwen3vl_merger, width: 768, layers: 12, heads: 12, ffn: 3072, outputDim: 1024, eps: 1e-6, language: 'qwen3.5-0.8b' },
  'tiny-idefics3': { name: 'tiny-idefics3', type: 'idefics3', imageSize: 128, patchSize: 8, merge: 4, longestEdge: 512, ...TINY, language: 'tiny' },
  // 8x8 positions (256 in patches of 32), interpolated to the patches as the real 16x16 are.
  'tiny-lfm2': { name: 'tiny-lfm2', type: 'lfm2', ...PREPROCESSING.lfm2, patchSize: 32, ...TINY, language: 'tiny-lfm2' },
  'tiny-gemma3': { name: 'tiny-gemma3', type: 'gemma3', ...PREPROCESSING.gemma3, imageSize: 224, ...TINY, language: 'tiny-gemma3' },
  // 1024 positions a table: room for a 1:4 image's 100 patches a side, not the real 10240.
  'tiny-gemma4v': { name: 'tiny-gemma4v', type: 'gemma4v', ...PREPROCESSING.gemma4v, positions: 1024, ...TINY, language: 'tiny-gemma4' },
  // 16x16 learned positions (the real 48x48 are interpolated all the same).
  'tiny-qwen3vl': { name: 'tiny-qwen3vl', type: 'qwen3vl_merger', ...PREPROCESSING.qwen3vl_merger, imageSize: 256, ...TINY, language: 'tiny-qwen35' },
};

/**
 * Geometry g's preprocessing (so its image token counts) with the tiny
 * encoder and the tiny language model of its type: what the token counts of
 * a real model are checked on without a file of its size.
 */
export function narrowed(g) {
  return { ...g, ...TINY, language: TINY_PROJECTORS[g.type].language, name: `${g.name}-narrowed` };
}

/** The tiny geometry of each projector type, by type. */
export const TINY_PROJECTORS = Object.fromEntries(
  Object.values(PROJECTOR_GEOMETRIES).filter((g) => g.name.startsWith('tiny-')).map((g) => [g.type, g]));

// Tensor descriptions: name, ggml dims, and how its values are drawn.
function matrix(name, dims, fanIn = dims[0]) {
  return { name, dims, kind: 'matrix', rms: 1 / Math.sqrt(fanIn) };
}
function norm(name, count, scale = 1) {
  return { name, dims: [count], kind: 'norm', scale };
}
function bias(name, count) {
  return { name, dims: [count], kind: 'bias', rms: 0.1 };
}

/** The encoder's tensors (patches, positions, blocks, final norm) in the converter's names. */
function encoderTensors(g) {
  const { encoder, postNorm } = PROJECTOR_TYPES[g.type];
  const w = g.width, p = g.patchSize;
  const patch = (name) => ({ ...matrix(name, [p, p, 3, w], 3 * p * p), role: 'patch' });
  const list = [patch('v.patch_embd.weight')];
  if (encoder === 'qwen3vl') list.push(patch('v.patch_embd.weight.1'));
  if (encoder !== 'gemma4') list.push(bias('v.patch_embd.bias', w));
  const side = g.imageSize / p;
  const positionDims = encoder === 'gemma4' ? [w, g.positions, 2] : [w, side * side];
  list.push({ name: 'v.position_embd.weight', dims: positionDims, kind: 'matrix', rms: 0.5, role: 'position' });
  const headDim = w / g.heads;
  for (let l = 0; l < g.layers; l++) {
    const b = `v.blk.${l}.`;
    if (encoder === 'gemma4') {
      // q.k is not divided by sqrt(head) (kq_scale 1): q and k norms of head^-1/4 give scores of RMS 1.
      list.push(
        norm(`${b}ln1.weight`, w),
        matrix(`${b}attn_q.weight`, [w, w]), matrix(`${b}attn_k.weight`, [w, w]), matrix(`${b}attn_v.weight`, [w, w]),
        norm(`${b}attn_q_norm.weight`, headDim, headDim ** -0.25), norm(`${b}attn_k_norm.weight`, headDim, headDim ** -0.25),
        matrix(`${b}attn_out.weight`, [w, w]),
        norm(`${b}attn_post_norm.weight`, w),
        norm(`${b}ln2.weight`, w),
        matrix(`${b}ffn_gate.weight`, [w, g.ffn]), matrix(`${b}ffn_up.weight`, [w, g.ffn]), matrix(`${b}ffn_down.weight`, [g.ffn, w]),
        norm(`${b}ffn_post_norm.weight`, w),
        norm(`${b}out_scale.weight`, 1),
      );
      continue;
    }
    const attention = encoder === 'qwen3vl'
      ? [matrix(`${b}attn_qkv.weight`, [w, 3 * w]), bias(`${b}attn_qkv.bias`, 3 * w)]
      : ['q', 'k', 'v'].flatMap((x) => [matrix(`${b}attn_${x}.weight`, [w, w]), bias(`${b}attn_${x}.bias`, w)]);
    list.push(
      norm(`${b}ln1.weight`, w), bias(`${b}ln1.bias`, w),
      ...attention,
      matrix(`${b}attn_out.weight`, [w, w]), bias(`${b}attn_out.bias`, w),
      norm(`${b}ln2.weight`, w), bias(`${b}ln2.bias`, w),
      matrix(`${b}ffn_up.weight`, [w, g.ffn]), bias(`${b}ffn_up.bias`, g.ffn),
      matrix(`${b}ffn_down.weight`, [g.ffn, w]), bias(`${b}ffn_down.bias`, w),
    );
  }
  if (postNorm) list.push(norm('v.post_ln.weight', w), bias('v.post_ln.bias', w));
  return list;
}

// The converter's general.file_type of each mix.
const FILE_TYPES = { F32: 0, F16: 1, Q8_0: 7 };

/** The type a tensor takes in `mix`, by the converter's rules (the header's). */
function projectorTensorType(t, mix, { embeddingsF32 }) {
  if (t.type) return t.type;
  if (t.dims.length === 1) return 'F32';
  if (t.role === 'position') return 'F32';
  if (t.role === 'patch') return embeddingsF32 || mix !== 'F16' ? 'F32' : 'F16';
  if (mix === 'Q8_0' && t.dims[0] % GGML_TYPES.Q8_0.blockSize !== 0) return 'F16';
  return mix;
}

/**
 * A projector file of geometry `g` with random weights in `mix` ('F32',
 * 'F16', 'Q8_0'), as the converter writes it: a spec for writer.mjs, with
 * `geometry` beside it. Each tensor's data is drawn from its own seed.
 */
export function randomProjector(g, { mix = 'F32', seed = 1, name = `random-${g.name}-mmproj-${mix}` } = {}) {
  if (!(mix in FILE_TYPES)) throw new RangeError(`no projector mix ${mix} (known: ${Object.keys(FILE_TYPES).join(', ')})`);
  const type = PROJECTOR_TYPES[g.type];
  if (!type) throw new RangeError(`no projector type ${g.type} (known: ${Object.keys(PROJECTOR_TYPES).join(', ')})`);
  const metadata = [
    ['general.architecture', 'clip'],
    ['general.type', 'mmproj'],
    ['general.name', name],
    ['general.file_type', gguf.u32(FILE_TYPES[mix])],
    ['general.quantization_version', gguf.u32(2)],
    ['general.alignment', gguf.u32(32)],
    ['clip.has_vision_encoder', true],
    ['clip.vision.projection_dim', gguf.u32(g.outputDim)],
    ['clip.vision.image_size', gguf.u32(g.imageSize)],
    ['clip.vision.patch_size', gguf.u32(g.patchSize)],
    ['clip.vision.embedding_length', gguf.u32(g.width)],
    ['clip.vision.feed_forward_length', gguf.u32(g.ffn)],
    ['clip.vision.block_count', gguf.u32(g.layers)],
    ['clip.vision.attention.head_count', gguf.u32(g.heads)],
    ['clip.vision.image_mean', gguf.array('f32', Array(3).fill(type.mean))],
    ['clip.vision.image_std', gguf.array('f32', Array(3).fill(type.std))],
    ...type.keys(g),
  ];
  const tensors = [...encoderTensors(g), ...type.head(g)].map((t, i) => {
    const typeName = projectorTensorType(t, mix, type);
    const count = t.dims.reduce((a, b) => a * b, 1);
    const random = () => rng((seed * 1000003 + i * 7919) >>> 0);
    let data;
    if (t.kind === 'matrix') data = () => ggmlType(typeName).random(count, random(), t.rms);
    else if (t.kind === 'norm') data = () => vector(count, random(), (r) => t.scale * (1 + 0.2 * (r.unit() - 0.5)));
    else data = () => vector(count, random(), (r) => t.rms * r.normal());
    return { name: t.name, dims: t.dims, type: typeName, data };
  });
  return { version: 3, metadata, tensors, geometry: g };
}

function vector(count, random, draw) {
  return GGML_TYPES.F32.encode(Float32Array.from({ length: count }, () => draw(random)));
}

/**
 * The language model projector geometry `g` feeds (models.mjs's
 * GEOMETRIES[g.language], random weights in `mix`), its synthetic
 * vocabulary ending in the markers mtmd looks up or tokenizes for the
 * projector type, as control tokens, and no piece that reads as another
 * (distinctPieces: llama.cpp reports a next token's probability by its
 * text, mtmd-native.mjs maps the text back to the id). Its width is the
 * projector's output. Its output matrix is its own (output.weight, which
 * llama.cpp reads for every one of these architectures): a tied model's
 * next token is mostly its last token again, and Gemma's scaling of its
 * embeddings by sqrt(width) makes that all but certain (p 0.96 after an
 * image and a question), which would leave the image nothing to move.
 * `shallow`: the tiny language model of g's type made as wide as g's output
 * instead (a real projector's file then loads beside a small one).
 */
export function pairedLanguageModel(g, { mix = 'F32', seed = 1, shallow = false } = {}) {
  const language = shallow
    // A context a real model's images fit in (SmolVLM2's 1088 tokens, Qwen3.5's up to 4096).
    ? { ...GEOMETRIES[TINY_PROJECTORS[g.type].language], name: `${TINY_PROJECTORS[g.type].language}-${g.outputDim}`, dim: g.outputDim, tied: false, contextLength: 8192 }
    : { ...GEOMETRIES[g.language], tied: false };
  if (language.dim !== g.outputDim) throw new RangeError(`${g.name} gives rows of ${g.outputDim}, ${language.name} reads ${language.dim}`);
  return randomLlama(language, {
    mix, seed, control: PROJECTOR_TYPES[g.type].markers, distinctPieces: true, name: `random-${language.name}-for-${g.name}-${mix}`,
  });
}
