// GGUF models for the tests and the benchmarks: random weights at a given
// geometry and type mix -- llama (with or without Llama 3's RoPE scaling),
// qwen2, qwen3, gemma3, smollm3, phi3, the hybrids lfm2 and qwen35, the Mamba-2 hybrids granitehybrid,
// nemotron_h and falcon-h1, and the embedding and reranking
// models (qwen3 with last-token or rank pooling, gemma-embedding, the encoders bert and nomic-bert
// with their WordPiece vocabulary, a BERT cross-encoder), the files llama.cpp's converter
// (convert_hf_to_gguf.py) writes for them -- the real models of ../shared/data re-encoded in another
// type, and probes that show one tensor's dequantization through an engine's
// hidden state. Written to a temporary folder when used, never committed.
//
//   const spec = randomLlama(GEOMETRIES.tiny, { mix: 'Q4_K_M', seed: 1 });
//   const qwen = randomLlama(GEOMETRIES['qwen3-0.6b'], { mix: 'Q8_0' });
//   writeGgufFile(path, spec);                      // or encodeGguf(spec)
//   const w = tensorValues(spec, 'output.weight');  // dequantized, f32
//   const kjv = reencodeLlama(readGguf(bytes), { mix: 'Q8_0' });
//
// A mix is one type for every matrix ('F32', 'F16', 'BF16', 'Q8_0', 'Q4_0',
// 'Q4_1', 'Q5_0', 'Q5_1', 'Q4_K', 'Q5_K', 'Q6_K', 'Q2_K', 'Q3_K', 'IQ4_NL',
// 'IQ4_XS'; norms stay F32, as llama.cpp keeps them), 'Q4_K_M' or 'Q3_K_M',
// llama.cpp's mixes of those names, or 'IQ4_XS_MIX', the file llama.cpp's
// quantizer makes for IQ4_XS (without an importance matrix). A matrix whose
// rows no block of its type divides falls back as llama.cpp's quantizer does
// (Q2_K and Q3_K to Q4_0, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, IQ4_XS to
// IQ4_NL), and to F16 when that does not fit either (as its quantizer does
// for a 32-block type, IQ4_NL included).
import { existsSync, renameSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { generate } from '../../js/llama.js';
import { rng } from '../../support/synthetic.mjs';
import { ggmlType, GGML_TYPES } from './types.mjs';
import { gguf, writeGgufFile } from './writer.mjs';

/** nemotron_h's layers as config.json's hybrid_override_pattern spells them (M Mamba-2, * attention, - MLP). */
export function hybridPattern(pattern) {
  return { numLayers: pattern.length, pattern };
}

// Llama 3.x's rope_scaling (config.json's rope_type llama3), as Llama 3.2 has it.
const LLAMA3_ROPE_SCALING = { type: 'llama3', factor: 32, lowFreqFactor: 1, highFreqFactor: 4, originalContextLength: 8192 };

/**
 * Geometries: tiny ones for tests (one per architecture, the llama3 one
 * with Llama 3's RoPE scaling) and today's small models. `architecture`
 * defaults to llama; `headDim`, when given, is config.json's head_dim, which
 * the converter writes as attention.key_length and value_length (else a
 * head is dim / numHeads and no key says so); `ropeScaling` is a
 * rope_scaling of type llama3, which the converter turns into
 * rope_freqs.weight; `tied` drops output.weight (tie_word_embeddings).
 * phi3's: `ropeDims`, the channels of a head RoPE turns (partial_rotary_factor
 * x the head; all of it when absent), and LongRoPE's
 * `originalContextLength` (original_max_position_embeddings), which the
 * converter writes beside the long and short factors.
 * Embedding and reranking models: `pooling`, llama.cpp's pooling of the
 * hidden states (POOLING_TYPES: the sentence-transformers Pooling module's
 * mode, or rank for a reranker, whose cls.output the converter makes of the
 * LM head's "yes" and "no" rows); `dense`, the width between the two
 * sentence-transformers Dense modules (dense_2, dense_3) that follow the
 * pooling; `localRopeBase`, the window layers' RoPE base
 * (rope_local_base_freq); `addBos` and `addEos`, the tokenizer's (true and
 * false when absent); `labels`, a BERT cross-encoder's classifier labels
 * (config.json's id2label, one score per label: cls.output).
 * The hybrids': `attentionLayers`, the attention layers of lfm2 and
 * granitehybrid (the rest recurrent); nemotron_h's `pattern`, its
 * hybrid_override_pattern (hybridPattern); `ssm`, the ssm.* keys
 * (qwen35's delta rules; a Mamba-2 mixer's taps, state size, groups, heads
 * (timeStepRank) and inner size, `norm` false where it has no grouped
 * RMSNorm); granitehybrid's `multipliers`, config.json's
 * embedding_multiplier, residual_multiplier, attention_multiplier and
 * logits_scaling.
 */
export const GEOMETRIES = {
  tiny: { name: 'tiny', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 10000, eps: 1e-5, tied: false },
  'tiny-llama3': { name: 'tiny-llama3', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 500000, eps: 1e-5, tied: true, ropeScaling: LLAMA3_ROPE_SCALING },
  'tiny-qwen2': { name: 'tiny-qwen2', architecture: 'qwen2', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: true },
  'tiny-qwen3': { name: 'tiny-qwen3', architecture: 'qwen3', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 128, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: false },
  // Gemma 3's block with a window of 16 (crossed many times by a test's 128 tokens) and 8 layers (a global one at 5).
  'tiny-gemma3': { name: 'tiny-gemma3', architecture: 'gemma3', dim: 256, numLayers: 8, numHeads: 4, numKvHeads: 1, headDim: 64, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 16 },
  'tiny-smollm3': { name: 'tiny-smollm3', architecture: 'smollm3', dim: 256, numLayers: 4, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 5000000, eps: 1e-6, tied: true },
  // Phi-4-mini's block: RoPE on 48 channels of 64; a context past the original one (128, under
  // the 256 llama.cpp's test context holds), so that both sides turn by the long factors; a
  // window of 16, which llama.cpp ignores for phi3 (so must the runner).
  'tiny-phi3': { name: 'tiny-phi3', architecture: 'phi3', dim: 256, numLayers: 4, numHeads: 4, numKvHeads: 2, ropeDims: 48, hiddenDim: 512, vocabSize: 1024, contextLength: 4096, originalContextLength: 128, ropeBase: 10000, eps: 1e-5, tied: true, slidingWindow: 16 },
  // LFM2's block: short convolutions (3 taps) with attention at layers 2 and 5 of 6.
  'tiny-lfm2': { name: 'tiny-lfm2', architecture: 'lfm2', dim: 256, numLayers: 6, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-5, tied: true, attentionLayers: [2, 5], convTaps: 3 },
  // Qwen3.5's block: gated delta rules (2 key heads, 4 value heads of 32, 4 taps) and gated
  // attention every fourth layer, RoPE on 16 channels of 64.
  'tiny-qwen35': { name: 'tiny-qwen35', architecture: 'qwen35', dim: 256, numLayers: 8, numHeads: 4, numKvHeads: 2, headDim: 64, ropeDims: 16, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 10000000, eps: 1e-6, tied: true, ssm: { convKernel: 4, stateSize: 32, groupCount: 2, timeStepRank: 4 } },
  // Gemma 4's block at E2B's proportions: window layers (head 64, window 16) and global ones
  // (head 128, RoPE on a quarter of it) in E2B's pattern of four to one, the last 5 of 10 blocks
  // sharing the keys and values of the last window and global blocks before them (and twice as
  // wide an FFN), per-layer embeddings of 64 a block, logits capped at 30.
  'tiny-gemma4': { name: 'tiny-gemma4', architecture: 'gemma4', dim: 256, numLayers: 10, numHeads: 4, numKvHeads: 1, headDim: 64, globalHeadDim: 128, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 16, windowPeriod: 5, sharedKvLayers: 5, doubleWideMlp: true, perLayerDim: 64, softcap: 30 },
  // Gemma 4's larger block (31B's): no shared layers nor per-layer embeddings, fewer KV heads in
  // the global layers (head_count_kv a list), whose V is K's projection (no attn_v); period 6.
  'tiny-gemma4-kv': { name: 'tiny-gemma4-kv', architecture: 'gemma4', dim: 256, numLayers: 6, numHeads: 4, numKvHeads: 2, globalKvHeads: 1, headDim: 64, globalHeadDim: 128, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 16, windowPeriod: 6, sharedKvLayers: 0, kEqV: true, perLayerDim: 0, softcap: 30 },
  'gemma-4-e2b': { name: 'gemma-4-e2b', architecture: 'gemma4', dim: 1536, numLayers: 35, numHeads: 8, numKvHeads: 1, headDim: 256, globalHeadDim: 512, hiddenDim: 6144, vocabSize: 262144, contextLength: 131072, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 512, windowPeriod: 5, sharedKvLayers: 20, doubleWideMlp: true, perLayerDim: 256, softcap: 30 },
  'gemma-4-e4b': { name: 'gemma-4-e4b', architecture: 'gemma4', dim: 2560, numLayers: 42, numHeads: 8, numKvHeads: 2, headDim: 256, globalHeadDim: 512, hiddenDim: 10240, vocabSize: 262144, contextLength: 131072, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 512, windowPeriod: 6, sharedKvLayers: 18, perLayerDim: 256, softcap: 30 },
  // Ministral 3's block (llama's) with its YaRN (factor 16, betas 32 and 1, mscale 1) and Llama 4's
  // attention temperature (beta 0.1) over an original context of 32, so that 128 tokens step the
  // temperature three times and YaRN turns its slow pairs as it would past 16k.
  'tiny-mistral3': { name: 'tiny-mistral3', architecture: 'mistral3', dim: 256, numLayers: 4, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-5, tied: true, yarn: { factor: 16, originalContextLength: 32, betaFast: 32, betaSlow: 1, logMultiplier: 1 }, temperatureScale: 0.1 },
  'ministral-3-3b': { name: 'ministral-3-3b', architecture: 'mistral3', dim: 3072, numLayers: 26, numHeads: 32, numKvHeads: 8, headDim: 128, hiddenDim: 9216, vocabSize: 131072, contextLength: 262144, ropeBase: 1000000, eps: 1e-5, tied: true, yarn: { factor: 16, originalContextLength: 16384, betaFast: 32, betaSlow: 1, logMultiplier: 1 }, temperatureScale: 0.1 },
  'lfm2-350m': { name: 'lfm2-350m', architecture: 'lfm2', dim: 1024, numLayers: 16, numHeads: 16, numKvHeads: 8, hiddenDim: 4608, vocabSize: 65536, contextLength: 128000, ropeBase: 1000000, eps: 1e-5, tied: true, attentionLayers: [2, 5, 8, 10, 12, 14], convTaps: 3 },
  'lfm2-1.2b': { name: 'lfm2-1.2b', architecture: 'lfm2', dim: 2048, numLayers: 16, numHeads: 32, numKvHeads: 8, hiddenDim: 8192, vocabSize: 65536, contextLength: 128000, ropeBase: 1000000, eps: 1e-5, tied: true, attentionLayers: [2, 5, 8, 10, 12, 14], convTaps: 3 },
  // Granite 4.0-H's block: Mamba-2 layers (8 heads of 64 in 2 groups, states of 32, 4 taps) and
  // attention without RoPE at layers 2 and 5 of 6, an FFN after each; Granite's four multipliers,
  // attention's 1/head and logits' 3 as granite-4.0-h-350m has them, the embedding's 2 and the
  // residual's 0.5 in place of its 12 and 0.246: with random weights those leave the blocks' share
  // of the residual stream so small that llama.cpp's logits hardly see a block (D zeroed: mean KL
  // 1e-3, attention.scale dropped 3e-5; with these 0.25 and 5e-3).
  'tiny-granitehybrid': { name: 'tiny-granitehybrid', architecture: 'granitehybrid', dim: 256, numLayers: 6, numHeads: 4, numKvHeads: 2, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 10000, eps: 1e-5, tied: true, attentionLayers: [2, 5], ssm: { convKernel: 4, stateSize: 32, groupCount: 2, timeStepRank: 8, innerSize: 512 }, multipliers: { embedding: 2, residual: 0.5, attention: 1 / 64, logits: 3 } },
  // Nemotron-H's block: Mamba-2 (6 heads of 64 in 2 groups), attention without RoPE (heads of 96,
  // wider than the model) and MLP-only layers (squared ReLU), one kind a layer as the pattern says.
  'tiny-nemotron-h': { name: 'tiny-nemotron-h', architecture: 'nemotron_h', dim: 256, ...hybridPattern('M-M*-M'), numHeads: 4, numKvHeads: 2, headDim: 96, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 10000, eps: 1e-5, tied: false, ssm: { convKernel: 4, stateSize: 32, groupCount: 2, timeStepRank: 6, innerSize: 384 } },
  // Falcon-H1's block: attention (NeoX RoPE) and Mamba-2 (6 heads of 64 in 2 groups, its grouped
  // norm) side by side in each of 6 layers, then an FFN.
  'tiny-falcon-h1': { name: 'tiny-falcon-h1', architecture: 'falcon-h1', dim: 256, numLayers: 6, numHeads: 4, numKvHeads: 2, headDim: 64, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-5, tied: false, ssm: { convKernel: 4, stateSize: 32, groupCount: 2, timeStepRank: 6, innerSize: 384, norm: true } },
  'granite-4.0-h-350m': { name: 'granite-4.0-h-350m', architecture: 'granitehybrid', dim: 768, numLayers: 32, numHeads: 12, numKvHeads: 4, hiddenDim: 2048, vocabSize: 100352, contextLength: 32768, ropeBase: 10000, eps: 1e-5, tied: true, attentionLayers: [10, 13, 17, 27], ssm: { convKernel: 4, stateSize: 128, groupCount: 1, timeStepRank: 48, innerSize: 1536 }, multipliers: { embedding: 12, residual: 0.246, attention: 1 / 64, logits: 3 } },
  // Its multipliers are the 350M's with its attention's 1/head: the 1B's config.json was not at hand.
  'granite-4.0-h-1b': { name: 'granite-4.0-h-1b', architecture: 'granitehybrid', dim: 1536, numLayers: 40, numHeads: 12, numKvHeads: 4, hiddenDim: 4096, vocabSize: 100352, contextLength: 131072, ropeBase: 10000, eps: 1e-5, tied: true, attentionLayers: [5, 15, 25, 35], ssm: { convKernel: 4, stateSize: 128, groupCount: 1, timeStepRank: 48, innerSize: 3072 }, multipliers: { embedding: 12, residual: 0.246, attention: 1 / 128, logits: 3 } },
  // NVIDIA-Nemotron-3-Nano-4B's: 21 Mamba-2, 4 attention and 17 MLP blocks.
  'nemotron-3-nano-4b': { name: 'nemotron-3-nano-4b', architecture: 'nemotron_h', dim: 3136, ...hybridPattern('M-M-M-MM-M-M*-M-M*-M-M-M*-M-M-MM*-MMM-M-M-'), numHeads: 40, numKvHeads: 8, headDim: 128, hiddenDim: 12544, vocabSize: 131072, contextLength: 262144, ropeBase: 10000, eps: 1e-5, tied: false, ssm: { convKernel: 4, stateSize: 128, groupCount: 8, timeStepRank: 96, innerSize: 7680 } },
  // Falcon-H1-0.5B's, without the grouped norm (mamba_rms_norm false).
  'falcon-h1-0.5b': { name: 'falcon-h1-0.5b', architecture: 'falcon-h1', dim: 1024, numLayers: 36, numHeads: 8, numKvHeads: 2, headDim: 64, hiddenDim: 2048, vocabSize: 32784, contextLength: 16384, ropeBase: 1e11, eps: 1e-5, tied: false, ssm: { convKernel: 4, stateSize: 128, groupCount: 1, timeStepRank: 24, innerSize: 1536, norm: false } },
  'qwen3.5-0.8b': { name: 'qwen3.5-0.8b', architecture: 'qwen35', dim: 1024, numLayers: 24, numHeads: 8, numKvHeads: 2, headDim: 256, ropeDims: 64, hiddenDim: 3584, vocabSize: 248320, contextLength: 262144, ropeBase: 10000000, eps: 1e-6, tied: true, ssm: { convKernel: 4, stateSize: 128, groupCount: 16, timeStepRank: 16 } },
  'qwen3.5-4b': { name: 'qwen3.5-4b', architecture: 'qwen35', dim: 2560, numLayers: 32, numHeads: 16, numKvHeads: 4, headDim: 256, ropeDims: 64, hiddenDim: 9216, vocabSize: 248320, contextLength: 262144, ropeBase: 10000000, eps: 1e-6, tied: true, ssm: { convKernel: 4, stateSize: 128, groupCount: 16, timeStepRank: 32 } },
  // Gemma 3 4B's language model, the one its SigLIP projector (vision.mjs's gemma-3-4b) feeds.
  'gemma-3-4b': { name: 'gemma-3-4b', architecture: 'gemma3', dim: 2560, numLayers: 34, numHeads: 8, numKvHeads: 4, headDim: 256, hiddenDim: 10240, vocabSize: 262208, contextLength: 131072, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 1024 },
  'gemma-3-270m': { name: 'gemma-3-270m', architecture: 'gemma3', dim: 640, numLayers: 18, numHeads: 4, numKvHeads: 1, headDim: 256, hiddenDim: 2048, vocabSize: 262144, contextLength: 32768, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 512 },
  'gemma-3-1b': { name: 'gemma-3-1b', architecture: 'gemma3', dim: 1152, numLayers: 26, numHeads: 4, numKvHeads: 1, headDim: 256, hiddenDim: 6912, vocabSize: 262144, contextLength: 32768, ropeBase: 1000000, eps: 1e-6, tied: true, slidingWindow: 512 },
  'smollm3-3b': { name: 'smollm3-3b', architecture: 'smollm3', dim: 2048, numLayers: 36, numHeads: 16, numKvHeads: 4, hiddenDim: 11008, vocabSize: 128256, contextLength: 65536, ropeBase: 5000000, eps: 1e-6, tied: true },
  'smollm2-135m': { name: 'smollm2-135m', dim: 576, numLayers: 30, numHeads: 9, numKvHeads: 3, hiddenDim: 1536, vocabSize: 49152, contextLength: 8192, ropeBase: 100000, eps: 1e-5, tied: true },
  'llama-3.2-1b': { name: 'llama-3.2-1b', dim: 2048, numLayers: 16, numHeads: 32, numKvHeads: 8, headDim: 64, hiddenDim: 8192, vocabSize: 128256, contextLength: 131072, ropeBase: 500000, eps: 1e-5, tied: true, ropeScaling: LLAMA3_ROPE_SCALING },
  'qwen2.5-0.5b': { name: 'qwen2.5-0.5b', architecture: 'qwen2', dim: 896, numLayers: 24, numHeads: 14, numKvHeads: 2, hiddenDim: 4864, vocabSize: 151936, contextLength: 32768, ropeBase: 1000000, eps: 1e-6, tied: true },
  'qwen3-0.6b': { name: 'qwen3-0.6b', architecture: 'qwen3', dim: 1024, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, hiddenDim: 3072, vocabSize: 151936, contextLength: 40960, ropeBase: 1000000, eps: 1e-6, tied: true },
  // Qwen3-Embedding's block and tokenizer flags: the last token's hidden state (the end token,
  // which the tokenizer appends) is the embedding.
  'tiny-qwen3-embedding': { name: 'tiny-qwen3-embedding', architecture: 'qwen3', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 128, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: true, pooling: 'last', addBos: false, addEos: true },
  'qwen3-embedding-0.6b': { name: 'qwen3-embedding-0.6b', architecture: 'qwen3', dim: 1024, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, hiddenDim: 3072, vocabSize: 151669, contextLength: 32768, ropeBase: 1000000, eps: 1e-6, tied: true, pooling: 'last', addBos: false, addEos: true },
  // Qwen3-Reranker's: the last token's "yes" and "no" logits (cls.output), softmaxed.
  'tiny-qwen3-reranker': { name: 'tiny-qwen3-reranker', architecture: 'qwen3', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 2, headDim: 128, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, eps: 1e-6, tied: true, pooling: 'rank', addBos: false },
  'qwen3-reranker-0.6b': { name: 'qwen3-reranker-0.6b', architecture: 'qwen3', dim: 1024, numLayers: 28, numHeads: 16, numKvHeads: 8, headDim: 128, hiddenDim: 3072, vocabSize: 151936, contextLength: 40960, ropeBase: 1000000, eps: 1e-6, tied: true, pooling: 'rank', addBos: false },
  // EmbeddingGemma's block (Gemma 3's, attending both ways within a window of 16, 8 positions either
  // side, crossed many times by a test's 128 tokens; layer 5 global) with the mean of the hidden
  // states taken through its two Dense modules (dim -> 512 -> dim).
  'tiny-embeddinggemma': { name: 'tiny-embeddinggemma', architecture: 'gemma-embedding', dim: 256, numLayers: 8, numHeads: 4, numKvHeads: 1, headDim: 64, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000000, localRopeBase: 10000, eps: 1e-6, tied: true, slidingWindow: 16, pooling: 'mean', dense: 512, addEos: true },
  'embeddinggemma-300m': { name: 'embeddinggemma-300m', architecture: 'gemma-embedding', dim: 768, numLayers: 24, numHeads: 3, numKvHeads: 1, headDim: 256, hiddenDim: 1152, vocabSize: 262144, contextLength: 2048, ropeBase: 1000000, localRopeBase: 10000, eps: 1e-6, tied: true, slidingWindow: 512, pooling: 'mean', dense: 3072, addEos: true },
  // BERT's encoder (post-norm blocks, learned positions, GELU) at a test's size: the first token's
  // ([CLS]) hidden state is the embedding; the tokenizer frames a text in [CLS] and [SEP].
  'tiny-bert': { name: 'tiny-bert', architecture: 'bert', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 4, hiddenDim: 512, vocabSize: 1024, contextLength: 512, eps: 1e-12, tied: true, pooling: 'cls', addEos: true },
  'bge-small-en-v1.5': { name: 'bge-small-en-v1.5', architecture: 'bert', dim: 384, numLayers: 12, numHeads: 12, numKvHeads: 12, hiddenDim: 1536, vocabSize: 30522, contextLength: 512, eps: 1e-12, tied: true, pooling: 'cls', addEos: true },
  'all-minilm-l6-v2': { name: 'all-minilm-l6-v2', architecture: 'bert', dim: 384, numLayers: 6, numHeads: 12, numKvHeads: 12, hiddenDim: 1536, vocabSize: 30522, contextLength: 512, eps: 1e-12, tied: true, pooling: 'mean', addEos: true },
  // A BERT cross-encoder (BertForSequenceClassification, ms-marco-MiniLM-L6-v2's): one score, its
  // classifier (cls.output, with a bias) on the first token's hidden state. The converter writes no
  // pooling type for it (a cross-encoder has no sentence-transformers Pooling module): llama.cpp
  // ranks when a context asks for rank pooling.
  'tiny-bert-reranker': { name: 'tiny-bert-reranker', architecture: 'bert', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 4, hiddenDim: 512, vocabSize: 1024, contextLength: 512, eps: 1e-12, tied: true, labels: ['LABEL_0'], addEos: true },
  'ms-marco-minilm-l6': { name: 'ms-marco-minilm-l6', architecture: 'bert', dim: 384, numLayers: 6, numHeads: 12, numKvHeads: 12, hiddenDim: 1536, vocabSize: 30522, contextLength: 512, eps: 1e-12, tied: true, labels: ['LABEL_0'], addEos: true },
  // Nomic BERT's encoder: BERT's post-norm blocks with RoPE (base 1000) in place of learned
  // positions, a fused attn_qkv and a SiLU-gated FFN, no biases but the norms'; mean pooling.
  'tiny-nomic-bert': { name: 'tiny-nomic-bert', architecture: 'nomic-bert', dim: 256, numLayers: 2, numHeads: 4, numKvHeads: 4, hiddenDim: 512, vocabSize: 1024, contextLength: 512, ropeBase: 1000, eps: 1e-12, tied: true, pooling: 'mean', addEos: true },
  // config.json's vocab_size, 30528, past the tokenizer's 30522 tokens: the converter pads the vocabulary.
  'nomic-embed-text-v1.5': { name: 'nomic-embed-text-v1.5', architecture: 'nomic-bert', dim: 768, numLayers: 12, numHeads: 12, numKvHeads: 12, hiddenDim: 3072, vocabSize: 30528, contextLength: 2048, ropeBase: 1000, eps: 1e-12, tied: true, pooling: 'mean', addEos: true },
  'phi-3.5-mini': { name: 'phi-3.5-mini', architecture: 'phi3', dim: 3072, numLayers: 32, numHeads: 32, numKvHeads: 32, hiddenDim: 8192, vocabSize: 32064, contextLength: 131072, originalContextLength: 4096, ropeBase: 10000, eps: 1e-5, tied: false, slidingWindow: 262144 },
  'phi-4-mini': { name: 'phi-4-mini', architecture: 'phi3', dim: 3072, numLayers: 32, numHeads: 24, numKvHeads: 8, ropeDims: 96, hiddenDim: 8192, vocabSize: 200064, contextLength: 131072, originalContextLength: 4096, ropeBase: 10000, eps: 1e-5, tied: true, slidingWindow: 262144 },
};

/**
 * What llama.cpp's converter does per architecture beyond TextModel's keys:
 * LlamaModel adds rope.dimension_count and vocab_size; Qwen2Model and
 * Qwen3Model (its subclass) add nothing. And what a block holds beyond
 * llama's: q/k/v biases (qwen2), an RMSNorm weight per head of q and k
 * (qwen3). RoPE's pairing is the loader's (adjacent for llama, NeoX halves
 * for both Qwens), not the file's.
 */
const ARCHITECTURES = {
  llama: { llamaKeys: true, qkvBias: false, qkNorm: false },
  qwen2: { llamaKeys: false, qkvBias: true, qkNorm: false },
  qwen3: { llamaKeys: false, qkvBias: false, qkNorm: true },
  // Gemma3Model writes attention.sliding_window; its blocks norm what attention and the FFN add.
  gemma3: { llamaKeys: false, qkvBias: false, qkNorm: true, postNorms: true },
  // EmbeddingGemma is a Gemma3Model; llama.cpp's loader makes its attention bidirectional and
  // its window symmetric whatever the file says.
  'gemma-embedding': { llamaKeys: false, qkvBias: false, qkNorm: true, postNorms: true },
  // SmolLM3Model is a LlamaModel.
  smollm3: { llamaKeys: true, qkvBias: false, qkNorm: false },
  // Phi3MiniModel writes rope.dimension_count, attention.sliding_window (0 without one) and
  // LongRoPE's keys and factors (longRope); its blocks fuse q, k and v (attn_qkv) and the FFN's
  // gate and up (ffn_up: the gate's rows first), as the checkpoint has them (fused). Its
  // vocabulary ends in added tokens, <|endoftext|> among them, which llama.cpp's vocabulary
  // loader looks up in a model whose general.name says phi3 (and fails to load without it).
  phi3: { llamaKeys: false, qkvBias: false, qkNorm: false, fused: true, longRope: true, control: ['<|endoftext|>'] },
  // LFM2Model writes head_count_kv as a list (0 for a convolution layer) and shortconv.l_cache;
  // a convolution layer has shortconv.{in_proj, conv, out_proj} in place of attention; the final
  // norm is token_embd_norm.
  lfm2: { llamaKeys: false, qkvBias: false, qkNorm: true, recurrent: 'conv' },
  // Qwen3_5TextModel writes rope.dimension_count and its sections, the ssm.* keys and
  // full_attention_interval; attn_q holds each head's queries and gates; a recurrent layer has
  // attn_qkv, attn_gate and the ssm_* tensors; every block's FFN is normed by post_attention_norm.
  qwen35: { llamaKeys: false, qkvBias: false, qkNorm: true, gatedAttn: true, recurrent: 'delta' },
  // The Mamba-2 hybrids (mamba2Metadata has their keys): a Mamba-2 mixer is ssm_in (z, x, B, C and
  // dt), ssm_conv1d (taps and bias, over x, B and C), ssm_dt.bias, ssm_a (-exp(A_log)) and ssm_d
  // ([1, heads] each), ssm_norm ([inner / groups, groups]) and ssm_out. `mamba2` says where it is:
  // GraniteHybridModel's 'alternating' blocks hold it or attention (without RoPE), then an FFN;
  // NemotronHModel's 'pattern' blocks one of it, attention (without RoPE) and an MLP (ffn_up and
  // ffn_down: squared ReLU); FalconH1Model's 'parallel' blocks attention and it side by side, then
  // an FFN normed by ffn_norm (named without .weight: the converter maps pre_ff_layernorm.weight whole).
  granitehybrid: { llamaKeys: true, qkvBias: false, qkNorm: false, recurrent: 'mamba2', mamba2: 'alternating', ffnNorm: 'ffn_norm.weight', gatedFfn: true },
  nemotron_h: { llamaKeys: true, qkvBias: false, qkNorm: false, recurrent: 'mamba2', mamba2: 'pattern', ffnNorm: null, gatedFfn: false },
  'falcon-h1': { llamaKeys: false, qkvBias: false, qkNorm: false, recurrent: 'mamba2', mamba2: 'parallel', ffnNorm: 'ffn_norm', gatedFfn: true },
  // Gemma4Model (Gemma3Model's keys, then its own): window and global layers of their own head
  // size (key_length_swa) and RoPE (rope.dimension_count_swa, rope.freq_base_swa; the global
  // layers' partial RoPE as rope_freqs.weight), the window pattern as a list, shared_kv_layers,
  // the per-layer input's width; each block's k_norm and V only where it owns rows, V from K's
  // projection where the checkpoint has attention_k_eq_v (no attn_v), per-layer input tensors,
  // layer_output_scale.
  gemma4: { llamaKeys: false, qkvBias: false, qkNorm: true, postNorms: true },
  // Ministral3Model is a LlamaModel; TextModel writes the YaRN keys of rope_parameters, it the
  // log multiplier (mscale_all_dim) and attention.temperature_scale (llama_4_scaling_beta).
  mistral3: { llamaKeys: true, qkvBias: false, qkNorm: false },
  // BertModel writes attention.layer_norm_epsilon (no RMS norm), attention.causal false, no
  // head_count_kv and no RoPE key, and a WordPiece vocabulary (wordPieceVocab); its tensors are
  // encoderTensors'. NomicBertModel (a BertModel) adds rope.freq_base.
  bert: { encoder: true },
  'nomic-bert': { encoder: true },
};

/** gemma4: whether layer l of geometry g is a window layer (its pattern: every windowPeriod-th global). */
const isWindowLayer = (g, l) => (l + 1) % g.windowPeriod !== 0;
/** gemma4: whether layer l holds rows (the last sharedKvLayers read those of earlier ones). */
const ownsRows = (g, l) => l < g.numLayers - (g.sharedKvLayers ?? 0);
/** gemma4: layer l's head size, KV heads and FFN width. */
function gemma4Layer(g, l) {
  const window = isWindowLayer(g, l);
  return {
    window, headDim: window ? g.headDim : g.globalHeadDim,
    kvHeads: window ? g.numKvHeads : g.globalKvHeads ?? g.numKvHeads,
    hiddenDim: g.doubleWideMlp && !ownsRows(g, l) ? 2 * g.hiddenDim : g.hiddenDim,
  };
}

/** gemma4's rope_freqs.weight (Gemma4Model.generate_extra_tensors): 1 for the pairs a quarter of the global head turns, 1e30 (no turn) for the rest. */
function proportionalRopeFactors(g) {
  const pairs = g.globalHeadDim / 2, turned = Math.trunc((g.globalHeadDim * 0.25) / 2);
  return Float32Array.from({ length: pairs }, (_, i) => (i < turned ? 1 : 1e30));
}

/** Whether layer l of geometry g is recurrent (lfm2: not in attentionLayers; qwen35: not every fourth; a Mamba-2 hybrid: where it has the mixer). */
export function isRecurrentLayer(g, l) {
  const { recurrent } = ARCHITECTURES[architectureOf(g)];
  if (recurrent === 'conv') return !g.attentionLayers.includes(l);
  if (recurrent === 'delta') return (l + 1) % 4 !== 0;
  if (recurrent === 'mamba2') return mamba2Parts(g, l).mamba;
  return false;
}

/** What layer l of a Mamba-2 hybrid holds: { mamba, attention, ffn } (ARCHITECTURES' mamba2). */
function mamba2Parts(g, l) {
  const { mamba2 } = ARCHITECTURES[architectureOf(g)];
  if (mamba2 === 'alternating') return { mamba: !g.attentionLayers.includes(l), attention: g.attentionLayers.includes(l), ffn: true };
  if (mamba2 === 'pattern') return { mamba: g.pattern[l] === 'M', attention: g.pattern[l] === '*', ffn: g.pattern[l] === '-' };
  return { mamba: true, attention: true, ffn: true };
}

/** A Mamba-2 mixer's sizes: heads, the convolution's channels (x, B, C), ssm_in's outputs (z, x, B, C, dt). */
function mamba2Shape(g) {
  const { stateSize, groupCount, timeStepRank, innerSize } = g.ssm;
  const channels = innerSize + 2 * groupCount * stateSize;
  return { heads: timeStepRank, channels, projected: innerSize + channels + timeStepRank };
}

/** A qwen35 geometry's delta-rule sizes: key heads, value heads, their size, the convolution's channels. */
function deltaShape(g) {
  const { stateSize, groupCount, timeStepRank } = g.ssm;
  return { dk: stateSize, hk: groupCount, hv: timeStepRank, inner: stateSize * timeStepRank, channels: 2 * stateSize * groupCount + stateSize * timeStepRank };
}

/** llama.cpp's pooling types (enum llama_pooling_type), the value of <arch>.pooling_type. */
export const POOLING_TYPES = { none: 0, mean: 1, cls: 2, last: 3, rank: 4 };

/** The rerank prompt Qwen3Model writes for a Qwen3-Reranker (tokenizer.chat_template.rerank). */
export const QWEN3_RERANK_TEMPLATE = '<|im_start|>system\nJudge whether the Document meets the requirements based on the Query and the Instruct provided. Note that the answer can only be "yes" or "no".<|im_end|>\n'
  + '<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n'
  + '<|im_start|>assistant\n<think>\n\n</think>\n\n';

const architectureOf = (g) => g.architecture ?? 'llama';
const headDimOf = (g) => g.headDim ?? g.dim / g.numHeads;
const ropeDimsOf = (g) => g.ropeDims ?? headDimOf(g);

/**
 * rope.scaling.attn_factor as Phi3MiniModel computes it for LongRoPE (in
 * f64, written as f32): sqrt(1 + ln(scale) / ln(original context)), scale
 * the context over the original one; 1 when it does not pass it.
 */
export function longRopeAttnFactor(g) {
  const scale = g.contextLength / g.originalContextLength;
  return scale > 1 ? Math.sqrt(1 + Math.log(scale) / Math.log(g.originalContextLength)) : 1;
}

/** Every mix by name. */
export const MIXES = [...Object.keys(GGML_TYPES), 'Q4_K_M', 'Q3_K_M', 'IQ4_XS_MIX'];

// llama.cpp's llama_ftype of each mix (general.file_type).
const FILE_TYPES = { F32: 0, F16: 1, Q4_0: 2, Q4_1: 3, Q8_0: 7, Q5_0: 8, Q5_1: 9, Q4_K: 14, Q4_K_M: 15, Q5_K: 16, Q6_K: 18, BF16: 32,
  Q2_K: 10, Q3_K: 11, Q3_K_M: 12, IQ4_NL: 25, IQ4_XS: 30, IQ4_XS_MIX: 30 };

// Where a type of 256-blocks goes when its block does not divide a row (llama.cpp's tensor_type_fallback).
const K_FALLBACK = { Q4_K: 'Q5_0', Q5_K: 'Q5_1', Q6_K: 'Q8_0', Q2_K: 'Q4_0', Q3_K: 'Q4_0', IQ4_XS: 'IQ4_NL' };

/** Query heads to a key head, as llama.cpp's n_gqa (an integer division). */
const gqaOf = (g) => Math.floor(g.numHeads / (g.numKvHeads ?? g.numHeads));

/** llama.cpp's use_more_bits: the layers its Q4_K_M gives Q6_K in attn_v and ffn_down. */
const useMoreBits = (layer, numLayers) =>
  layer < Math.floor(numLayers / 8) || layer >= Math.floor((7 * numLayers) / 8) || (layer - Math.floor(numLayers / 8)) % 3 === 2;

/**
 * The type name of tensor `name` ([dims], ggml order) of layer `layer` in `mix`,
 * in a model of `numLayers` blocks whose output is tied to token_embd or not,
 * `gqa` query heads to a key head.
 */
export function tensorType(mix, { name, dims, layer, numLayers, tied, gqa = 1 }) {
  if (!MIXES.includes(mix)) throw new RangeError(`no mix ${mix} (known: ${MIXES.join(', ')})`);
  // Vectors, the convolutions' taps (llama.cpp's ssm_conv reads f32; its quantizer keeps them), and
  // BERT's position and token type embeddings (which the converter and the quantizer keep in f32).
  if (dims.length === 1 || /shortconv\.conv\.weight$|ssm_conv1d\.weight$|^position_embd\.weight$|^token_types\.weight$/.test(name)) return 'F32';
  // Nor does it quantize a matrix whose name does not end in weight or ends in a norm's (Mamba-2's
  // ssm_a and ssm_d, [1, heads], and its grouped ssm_norm, [inner / groups, groups]): the converter wrote them f32.
  if (!name.endsWith('weight') || name.endsWith('_norm.weight')) return 'F32';
  const rowLength = dims[0];
  let want = mix;
  if (mix === 'Q4_K_M') {
    const isOutput = name === 'output.weight' || (tied && name === 'token_embd.weight');
    if (isOutput) want = rowLength % 256 === 0 ? 'Q6_K' : 'Q8_0';
    // attn_qkv is attn_v-like to llama.cpp's quantizer (category_is_attn_v).
    else if (/attn_v\.weight$|attn_qkv\.weight$|ffn_down\.weight$/.test(name) && useMoreBits(layer, numLayers)) want = 'Q6_K';
    else want = 'Q4_K';
  } else if (mix === 'IQ4_XS_MIX') {
    // llama_tensor_get_type_impl for LLAMA_FTYPE_MOSTLY_IQ4_XS: the output as Q4_K_M's, attn_v
    // Q5_K where 4 or more query heads share a key head, ffn_down Q5_K in the first eighth of
    // the layers (that without an importance matrix), every other matrix IQ4_XS.
    const isOutput = name === 'output.weight' || (tied && name === 'token_embd.weight');
    if (isOutput) want = rowLength % 256 === 0 ? 'Q6_K' : 'Q8_0';
    else if (/attn_v\.weight$|attn_qkv\.weight$/.test(name) && gqa >= 4) want = 'Q5_K';
    else if (/ffn_down\.weight$/.test(name) && layer < Math.floor(numLayers / 8)) want = 'Q5_K';
    else want = 'IQ4_XS';
  } else if (mix === 'Q3_K_M') {
    // llama.cpp's rules for a model without experts, not Falcon: attn_v's
    // first two (one a layer here) and ffn_down's first sixteenth Q5_K, the
    // rest of them and attn_output Q4_K.
    const isOutput = name === 'output.weight' || (tied && name === 'token_embd.weight');
    if (isOutput) want = rowLength % 256 === 0 ? 'Q6_K' : 'Q8_0';
    else if (/attn_v\.weight$|attn_qkv\.weight$/.test(name)) want = layer < 2 ? 'Q5_K' : 'Q4_K';
    else if (/ffn_down\.weight$/.test(name)) want = layer < Math.floor(numLayers / 16) ? 'Q5_K' : 'Q4_K';
    else if (/attn_output\.weight$/.test(name)) want = 'Q4_K';
    else want = 'Q3_K';
  }
  const fits = (type) => rowLength % GGML_TYPES[type].blockSize === 0;
  if (fits(want)) return want;
  const fallback = K_FALLBACK[want];
  return fallback && fits(fallback) ? fallback : 'F16';
}

// ---------------------------------------------------------------------------
// A vocabulary: SentencePiece-style, as llama.cpp's "llama" tokenizer needs.

const SPACE = '\u2581';

/**
 * `size` pieces: <unk>, <s>, </s>, the 256 byte pieces <0x00>..<0xFF>, '▁',
 * the digits, then every string of letters a–z by length, each bare and after
 * '▁', until the size is reached. No piece holds a digit beside anything, so
 * a string of n digits is exactly n + 1 tokens after <s> ('▁' and one per
 * digit): what a benchmark needs for a prompt of a given length. `control`:
 * control tokens that take the last ids, as a checkpoint's added tokens do.
 * `distinctPieces`: without the pieces that read as a byte token does ('▁',
 * the digits, the single letters; a string of them is then spelt in bytes),
 * so that no two tokens have the same text.
 */
export function syntheticVocab(size, control = [], { distinctPieces = false } = {}) {
  const tokens = ['<unk>', '<s>', '</s>'];
  const types = [2, 3, 3]; // unknown, control, control
  for (let b = 0; b < 256; b++) {
    tokens.push(`<0x${b.toString(16).toUpperCase().padStart(2, '0')}>`);
    types.push(6); // byte
  }
  const normal = (piece) => {
    tokens.push(piece);
    types.push(1);
  };
  if (!distinctPieces) {
    normal(SPACE);
    for (let d = 0; d < 10; d++) normal(String(d));
  }
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  let words = [''];
  while (tokens.length < size) {
    words = words.flatMap((w) => [...letters].map((c) => w + c));
    for (const w of words) {
      if (tokens.length < size && !(distinctPieces && w.length === 1)) normal(w);
      if (tokens.length < size) normal(SPACE + w);
    }
  }
  tokens.length = size - control.length;
  types.length = size - control.length;
  for (const piece of control) {
    tokens.push(piece);
    types.push(3);
  }
  // sentencepiece's scores: higher merges first; shorter pieces first here.
  const scores = tokens.map((_, i) => (types[i] === 1 ? -i : 0));
  return { tokens, scores, types, bosId: 1, eosId: 2, unkId: 0 };
}

/**
 * A WordPiece vocabulary of `size` pieces as BertModel writes one: [PAD],
 * [UNK], [CLS], [SEP] and [MASK] (control tokens, as the tokenizer's special
 * added tokens are), then the digits and every string of letters a–z by
 * length, each word-initial ('▁' before it, the converter's phantom space)
 * and as a continuation (a ##piece, written bare), until the size is
 * reached. Every lowercase word tokenizes (its letters at worst), and a
 * string of n digits is n tokens ('▁d', then one per digit), so digitPrompt
 * holds with [CLS] and [SEP] about it. [CLS] is the begin token and [SEP]
 * the end and separator token, as the converter reads them from
 * tokenizer_config.json.
 */
function wordPieceVocab(size) {
  const tokens = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
  const types = [3, 3, 3, 3, 3];
  const piece = (p) => {
    for (const text of [SPACE + p, p]) {
      if (tokens.length < size) {
        tokens.push(text);
        types.push(1);
      }
    }
  };
  for (let d = 0; d < 10; d++) piece(String(d));
  const letters = 'abcdefghijklmnopqrstuvwxyz';
  let words = [''];
  while (tokens.length < size) {
    words = words.flatMap((w) => [...letters].map((c) => w + c));
    for (const w of words) piece(w);
  }
  return { tokens, types, padId: 0, unkId: 1, bosId: 2, eosId: 3, maskId: 4 };
}

/** A prompt text that the synthetic vocabulary makes exactly n tokens (<s> first), n ≥ 2. */
export function digitPrompt(n) {
  return Array.from({ length: n - 2 }, (_, i) => String(i % 10)).join('');
}

// ---------------------------------------------------------------------------
// Metadata

// The types llama.cpp reads these keys as (it refuses another): the
// general and tokenizer ones, and those under the architecture's prefix.
const KEY_TYPES = {
  'general.file_type': 'u32', 'general.alignment': 'u32', 'general.quantization_version': 'u32',
  'tokenizer.ggml.bos_token_id': 'u32', 'tokenizer.ggml.eos_token_id': 'u32',
  'tokenizer.ggml.unknown_token_id': 'u32', 'tokenizer.ggml.padding_token_id': 'u32',
  'tokenizer.ggml.seperator_token_id': 'u32', 'tokenizer.ggml.mask_token_id': 'u32', 'tokenizer.ggml.token_type_count': 'u32',
  'tokenizer.ggml.scores': ['f32'], 'tokenizer.ggml.token_type': ['i32'],
};
const ARCH_KEY_TYPES = {
  context_length: 'u32', embedding_length: 'u32', block_count: 'u32', feed_forward_length: 'u32',
  'rope.dimension_count': 'u32', 'attention.head_count': 'u32', 'attention.head_count_kv': 'u32',
  'attention.key_length': 'u32', 'attention.value_length': 'u32', vocab_size: 'u32',
  'attention.layer_norm_rms_epsilon': 'f32', 'attention.layer_norm_epsilon': 'f32', 'rope.freq_base': 'f32', 'attention.sliding_window': 'u32',
  'rope.scaling.original_context_length': 'u32', 'rope.scaling.attn_factor': 'f32',
  'rope.freq_base_swa': 'f32', pooling_type: 'u32', dense_2_feat_in: 'u32', dense_2_feat_out: 'u32', dense_3_feat_in: 'u32', dense_3_feat_out: 'u32',
};

/**
 * The metadata of a file read by js/model/gguf.js (which drops the value types)
 * with the GGUF types llama.cpp reads them as, for the writer. Strings,
 * booleans and string arrays type themselves; the writer refuses a number
 * under a key these tables do not know.
 */
export function retypedMetadata(file) {
  const prefix = `${file.metadata.get('general.architecture')}.`;
  return [...file.metadata].map(([key, value]) => {
    const type = KEY_TYPES[key] ?? (key.startsWith(prefix) ? ARCH_KEY_TYPES[key.slice(prefix.length)] : undefined);
    if (Array.isArray(type)) return [key, gguf.array(type[0], value)];
    return [key, type ? gguf[type](value) : value];
  });
}

/** The general keys of a file of architecture `arch` in `mix`. */
function generalMetadata(arch, { name, mix }) {
  return [
    ['general.architecture', arch],
    ['general.name', name],
    ['general.file_type', gguf.u32(FILE_TYPES[mix] ?? 0)],
    ['general.quantization_version', gguf.u32(2)],
    ['general.alignment', gguf.u32(32)],
  ];
}

/** The metadata the converter writes for geometry g (in its order), before the tokenizer's. */
function modelMetadata(g, { name, mix }) {
  const arch = architectureOf(g);
  const key = (suffix) => `${arch}.${suffix}`;
  const { llamaKeys, longRope = false, encoder = false } = ARCHITECTURES[arch];
  if (encoder) return [...generalMetadata(arch, { name, mix }), ...encoderMetadata(g, key)];
  // A key written twice (Gemma4Model's head sizes and per-layer lists after Gemma3Model's) keeps
  // its place and takes the later value, as the converter's writer does.
  return [...new Map([
    ...generalMetadata(arch, { name, mix }),
    [key('block_count'), gguf.u32(g.numLayers)],
    [key('context_length'), gguf.u32(g.contextLength)],
    [key('embedding_length'), gguf.u32(g.dim)],
    [key('feed_forward_length'), gguf.u32(g.hiddenDim)],
    [key('attention.head_count'), gguf.u32(g.numHeads)],
    [key('attention.head_count_kv'), arch === 'lfm2'
      ? gguf.array('i32', Array.from({ length: g.numLayers }, (_, l) => (isRecurrentLayer(g, l) ? 0 : g.numKvHeads)))
      : gguf.u32(g.numKvHeads)],
    [key('rope.freq_base'), gguf.f32(g.ropeBase)],
    [key('attention.layer_norm_rms_epsilon'), gguf.f32(g.eps)],
    ...(g.headDim ? [[key('attention.key_length'), gguf.u32(g.headDim)], [key('attention.value_length'), gguf.u32(g.headDim)]] : []),
    ...(llamaKeys ? [[key('vocab_size'), gguf.u32(g.vocabSize)], [key('rope.dimension_count'), gguf.u32(ropeDimsOf(g))]] : []),
    ...(g.slidingWindow || longRope ? [[key('attention.sliding_window'), gguf.u32(g.slidingWindow ?? 0)]] : []),
    ...(longRope ? [
      [key('rope.dimension_count'), gguf.u32(ropeDimsOf(g))],
      [key('rope.scaling.original_context_length'), gguf.u32(g.originalContextLength)],
      [key('rope.scaling.attn_factor'), gguf.f32(longRopeAttnFactor(g))],
    ] : []),
    ...(arch === 'lfm2' ? [[key('shortconv.l_cache'), gguf.u32(g.convTaps)]] : []),
    ...(arch === 'gemma4' ? gemma4Metadata(g, key) : []),
    ...(g.yarn ? [
      [key('rope.scaling.type'), 'yarn'],
      [key('rope.scaling.factor'), gguf.f32(g.yarn.factor)],
      [key('rope.scaling.original_context_length'), gguf.u32(g.yarn.originalContextLength)],
      [key('rope.scaling.yarn_beta_fast'), gguf.f32(g.yarn.betaFast)],
      [key('rope.scaling.yarn_beta_slow'), gguf.f32(g.yarn.betaSlow)],
      [key('rope.scaling.yarn_log_multiplier'), gguf.f32(g.yarn.logMultiplier)],
      [key('attention.temperature_scale'), gguf.f32(g.temperatureScale)],
    ] : []),
    ...(g.localRopeBase ? [[key('rope.freq_base_swa'), gguf.f32(g.localRopeBase)]] : []),
    ...(g.dense ? [
      [key('dense_2_feat_in'), gguf.u32(g.dim)],
      [key('dense_2_feat_out'), gguf.u32(g.dense)],
      [key('dense_3_feat_in'), gguf.u32(g.dense)],
      [key('dense_3_feat_out'), gguf.u32(g.dim)],
    ] : []),
    ...(g.pooling ? [[key('pooling_type'), gguf.u32(POOLING_TYPES[g.pooling])]] : []),
    // Qwen3Model's for a reranker: its head's two outputs and the prompt that frames a query and a document.
    ...(g.pooling === 'rank' ? [
      [key('classifier.output_labels'), ['yes', 'no']],
      ['tokenizer.chat_template.rerank', QWEN3_RERANK_TEMPLATE],
      ['tokenizer.chat_templates', ['rerank']],
    ] : []),
    ...(ARCHITECTURES[arch].recurrent === 'mamba2' ? mamba2Metadata(g, key) : []),
    ...(arch === 'qwen35' ? [
      [key('rope.dimension_count'), gguf.u32(ropeDimsOf(g))],
      [key('rope.dimension_sections'), gguf.array('i32', [11, 11, 10, 0])],
      [key('ssm.conv_kernel'), gguf.u32(g.ssm.convKernel)],
      [key('ssm.state_size'), gguf.u32(g.ssm.stateSize)],
      [key('ssm.group_count'), gguf.u32(g.ssm.groupCount)],
      [key('ssm.time_step_rank'), gguf.u32(g.ssm.timeStepRank)],
      [key('ssm.inner_size'), gguf.u32(deltaShape(g).inner)],
      [key('full_attention_interval'), gguf.u32(4)],
    ] : []),
  ])];
}

/**
 * The Mamba-2 hybrids' keys beyond TextModel's (and LlamaModel's): the
 * ssm.* keys; then FalconH1Model's vocab_size -- or GraniteHybridModel's
 * (NemotronHModel is one): GraniteModel's multipliers as attention.scale,
 * embedding_scale, residual_scale and logit_scale, TextModel's
 * expert_count and expert_used_count and GraniteMoeModel's
 * expert_shared_feed_forward_length (its shared_mlp, the FFN) where
 * config.json has num_local_experts 0 (Granite's), head_count_kv as a list
 * (0 but for attention layers), rope.scaling.finetuned false and a context of
 * 2^20 (a model without RoPE); NemotronHModel's layer_norm_epsilon (its
 * config.json's, which llama.cpp's loader requires) and feed_forward_length
 * as a list (0 but for MLP layers). A later key takes an earlier one's place.
 */
function mamba2Metadata(g, key) {
  const { mamba2 } = ARCHITECTURES[architectureOf(g)];
  const perLayer = (value) => gguf.array('i32', Array.from({ length: g.numLayers }, (_, l) => value(mamba2Parts(g, l))));
  const ssm = [
    [key('ssm.conv_kernel'), gguf.u32(g.ssm.convKernel)],
    [key('ssm.state_size'), gguf.u32(g.ssm.stateSize)],
    [key('ssm.group_count'), gguf.u32(g.ssm.groupCount)],
    [key('ssm.inner_size'), gguf.u32(g.ssm.innerSize)],
    [key('ssm.time_step_rank'), gguf.u32(g.ssm.timeStepRank)],
  ];
  if (mamba2 === 'parallel') return [...ssm, [key('vocab_size'), gguf.u32(g.vocabSize)]];
  const m = g.multipliers;
  return [
    ...(m ? [
      [key('attention.scale'), gguf.f32(m.attention)],
      [key('embedding_scale'), gguf.f32(m.embedding)],
      [key('residual_scale'), gguf.f32(m.residual)],
      [key('logit_scale'), gguf.f32(m.logits)],
    ] : []),
    ...(mamba2 === 'alternating' ? [
      [key('expert_count'), gguf.u32(0)],
      [key('expert_used_count'), gguf.u32(0)],
      [key('expert_shared_feed_forward_length'), gguf.u32(g.hiddenDim)],
    ] : []),
    ...ssm,
    [key('attention.head_count_kv'), perLayer((p) => (p.attention ? g.numKvHeads : 0))],
    [key('rope.scaling.finetuned'), false],
    [key('context_length'), gguf.u32(2 ** 20)],
    ...(mamba2 === 'pattern' ? [
      [key('attention.layer_norm_epsilon'), gguf.f32(g.eps)],
      [key('feed_forward_length'), perLayer((p) => (p.ffn ? g.hiddenDim : 0))],
    ] : []),
  ];
}

/**
 * BertModel's keys (TextModel's from config.json's names: no head_count_kv,
 * LayerNorm's epsilon; NomicBertModel's rotary_emb_base as rope.freq_base),
 * then its own: attention.causal false, the sentence-transformers Pooling
 * module's pooling type, a classifier's labels.
 */
function encoderMetadata(g, key) {
  return [
    [key('block_count'), gguf.u32(g.numLayers)],
    [key('context_length'), gguf.u32(g.contextLength)],
    [key('embedding_length'), gguf.u32(g.dim)],
    [key('feed_forward_length'), gguf.u32(g.hiddenDim)],
    [key('attention.head_count'), gguf.u32(g.numHeads)],
    ...(g.ropeBase ? [[key('rope.freq_base'), gguf.f32(g.ropeBase)]] : []),
    [key('attention.layer_norm_epsilon'), gguf.f32(g.eps)],
    [key('attention.causal'), false],
    ...(g.pooling ? [[key('pooling_type'), gguf.u32(POOLING_TYPES[g.pooling])]] : []),
    ...(g.labels ? [[key('classifier.output_labels'), g.labels]] : []),
  ];
}

/** Gemma4Model's keys beyond Gemma3Model's (which wrote key_length and value_length, and the final logit cap). */
function gemma4Metadata(g, key) {
  const layers = Array.from({ length: g.numLayers }, (_, l) => gemma4Layer(g, l));
  return [
    [key('attention.key_length'), gguf.u32(g.globalHeadDim)],
    [key('attention.value_length'), gguf.u32(g.globalHeadDim)],
    [key('rope.freq_base_swa'), gguf.f32(10000)],
    [key('final_logit_softcapping'), gguf.f32(g.softcap)],
    [key('attention.sliding_window'), gguf.u32(g.slidingWindow)],
    [key('attention.shared_kv_layers'), gguf.u32(g.sharedKvLayers)],
    [key('embedding_length_per_layer_input'), gguf.u32(g.perLayerDim)],
    [key('attention.sliding_window_pattern'), gguf.array('bool', layers.map((x) => x.window))],
    [key('attention.key_length_swa'), gguf.u32(g.headDim)],
    [key('attention.value_length_swa'), gguf.u32(g.headDim)],
    ...(g.doubleWideMlp ? [[key('feed_forward_length'), gguf.array('i32', layers.map((x) => x.hiddenDim))]] : []),
    ...(g.globalKvHeads ? [[key('attention.head_count_kv'), gguf.array('i32', layers.map((x) => x.kvHeads))]] : []),
    [key('rope.dimension_count'), gguf.u32(g.globalHeadDim)],
    [key('rope.dimension_count_swa'), gguf.u32(g.headDim)],
  ];
}

/** The synthetic SentencePiece vocabulary's tokenizer keys, with geometry g's begin and end flags. */
function syntheticVocabMetadata(vocab, g) {
  return [
    ['tokenizer.ggml.model', 'llama'],
    ['tokenizer.ggml.tokens', vocab.tokens],
    ['tokenizer.ggml.scores', gguf.array('f32', vocab.scores)],
    ['tokenizer.ggml.token_type', gguf.array('i32', vocab.types)],
    ['tokenizer.ggml.bos_token_id', gguf.u32(vocab.bosId)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(vocab.eosId)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(vocab.unkId)],
    ['tokenizer.ggml.add_bos_token', g.addBos ?? true],
    ['tokenizer.ggml.add_eos_token', g.addEos ?? false],
    ['tokenizer.ggml.add_space_prefix', true],
  ];
}

/**
 * BertModel's tokenizer keys for a WordPiece vocabulary, as it writes them
 * for bge-small-en-v1.5, all-MiniLM-L6-v2 and nomic-embed-text-v1.5 (whose
 * tokenizer is BERT's uncased one): token_type_count (type_vocab_size, 2;
 * llama.cpp refuses a BERT without it), the pre-tokenizer its hash names
 * (llama.cpp reads no pre-tokenizer for WordPiece), no scores; the special
 * ids from tokenizer_config.json (no cls_token_id: gguf-py has no writer for
 * it); the flags from tokenizer.json's template "[CLS] $A [SEP]" (begin and
 * end tokens, geometry g's; add_sep false, as its pair template
 * "[CLS] $A [SEP] $B [SEP]" puts no second [SEP] between A and B); its
 * BertNormalizer's lowercase.
 */
function wordPieceVocabMetadata(vocab, g) {
  return [
    ['tokenizer.ggml.token_type_count', gguf.u32(2)],
    ['tokenizer.ggml.model', 'bert'],
    ['tokenizer.ggml.pre', 'bert-bge'],
    ['tokenizer.ggml.tokens', vocab.tokens],
    ['tokenizer.ggml.token_type', gguf.array('i32', vocab.types)],
    ['tokenizer.ggml.bos_token_id', gguf.u32(vocab.bosId)],
    ['tokenizer.ggml.eos_token_id', gguf.u32(vocab.eosId)],
    ['tokenizer.ggml.unknown_token_id', gguf.u32(vocab.unkId)],
    ['tokenizer.ggml.seperator_token_id', gguf.u32(vocab.eosId)],
    ['tokenizer.ggml.padding_token_id', gguf.u32(vocab.padId)],
    ['tokenizer.ggml.mask_token_id', gguf.u32(vocab.maskId)],
    ['tokenizer.ggml.add_bos_token', g.addBos ?? true],
    ['tokenizer.ggml.add_eos_token', g.addEos ?? false],
    ['tokenizer.ggml.add_sep_token', false],
    ['tokenizer.ggml.normalizer.lowercase', true],
  ];
}

// hf-vocab.mjs's GGUF type names -> the writer's.
const HF_VOCAB_TYPES = { uint32: 'u32', int32: 'i32', float32: 'f32' };

/** An hfVocabMetadata entry ({ key, type, itemType, value }) as a writer metadata entry. */
function writerEntry({ key, type, itemType, value }) {
  if (type === 'array') return [key, itemType === 'string' ? value : gguf.array(HF_VOCAB_TYPES[itemType], value)];
  return [key, HF_VOCAB_TYPES[type] ? gguf[HF_VOCAB_TYPES[type]](value) : value];
}

/** One key of every GGUF value type, and an array of each, under a name of our own. */
export function everyValueType() {
  const scalars = [['u8', 250], ['i8', -120], ['u16', 65000], ['i16', -32000], ['u32', 4000000000], ['i32', -2000000000],
    ['f32', 1.5], ['bool', true], ['u64', 2n ** 53n + 2n], ['i64', -(2n ** 40n)], ['f64', Math.PI]];
  return [
    ...scalars.map(([type, value]) => [`kvcache_wasm.test.${type}`, gguf[type](value)]),
    ['kvcache_wasm.test.string', 'ünïcode ▁ text'],
    ...scalars.map(([type, value]) => [`kvcache_wasm.test.array_${type}`, gguf.array(type, [value, value])]),
    ['kvcache_wasm.test.array_string', ['a', 'bc', '']],
  ];
}

// ---------------------------------------------------------------------------
// Tensors

/**
 * Tensor names and ggml dims of a model of geometry g, in llama.cpp's order
 * (rope_freqs.weight or LongRoPE's factors first, as the converter yields its
 * generated tensors before the model's), each with its layer (-1: none).
 */
function modelTensors(g) {
  const { dim, hiddenDim, vocabSize, numLayers } = g;
  const { qkvBias, qkNorm, postNorms = false, fused = false, longRope = false, gatedAttn = false, recurrent } = ARCHITECTURES[architectureOf(g)];
  const headDim = headDimOf(g);
  const qDim = g.numHeads * headDim;
  const kvDim = g.numKvHeads * headDim;
  const list = [];
  if (g.ropeScaling) list.push({ name: 'rope_freqs.weight', dims: [headDim / 2], layer: -1 });
  if (longRope) {
    for (const name of ['rope_factors_long.weight', 'rope_factors_short.weight']) list.push({ name, dims: [ropeDimsOf(g) / 2], layer: -1 });
  }
  if (architectureOf(g) === 'gemma4') return gemma4Tensors(g);
  if (recurrent === 'mamba2') return mamba2Tensors(g);
  if (ARCHITECTURES[architectureOf(g)].encoder) return encoderTensors(g);
  // EmbeddingGemma's Dense modules, generated tensors of the converter's (no bias); a reranker's
  // head, which the converter yields as it meets the LM head (the embedding, tied).
  if (g.dense) list.push({ name: 'dense_2.weight', dims: [dim, g.dense], layer: -1 }, { name: 'dense_3.weight', dims: [g.dense, dim], layer: -1 });
  if (g.pooling === 'rank') list.push({ name: 'cls.output.weight', dims: [dim, 2], layer: -1 });
  list.push({ name: 'token_embd.weight', dims: [dim, vocabSize], layer: -1 });
  for (let l = 0; l < numLayers; l++) {
    const block = (name, dims, present = true) => (present ? [{ name: `blk.${l}.${name}`, dims, layer: l }] : []);
    if (isRecurrentLayer(g, l)) {
      const delta = recurrent === 'delta' ? deltaShape(g) : null;
      list.push(
        ...block('attn_norm.weight', [dim]),
        ...block('shortconv.conv.weight', [g.convTaps, dim], !delta),
        ...block('shortconv.in_proj.weight', [dim, 3 * dim], !delta),
        ...block('shortconv.out_proj.weight', [dim, dim], !delta),
        ...(delta ? [
          ...block('attn_qkv.weight', [dim, delta.channels]),
          ...block('attn_gate.weight', [dim, delta.inner]),
          ...block('ssm_conv1d.weight', [g.ssm.convKernel, delta.channels]),
          ...block('ssm_dt.bias', [delta.hv]),
          ...block('ssm_a', [delta.hv]),
          ...block('ssm_beta.weight', [dim, delta.hv]),
          ...block('ssm_alpha.weight', [dim, delta.hv]),
          ...block('ssm_norm.weight', [delta.dk]),
          ...block('ssm_out.weight', [delta.inner, dim]),
          ...block('post_attention_norm.weight', [dim]),
        ] : [...block('ffn_norm.weight', [dim])]),
        ...block('ffn_gate.weight', [dim, hiddenDim]),
        ...block('ffn_down.weight', [hiddenDim, dim]),
        ...block('ffn_up.weight', [dim, hiddenDim]),
      );
      continue;
    }
    list.push(
      ...block('attn_norm.weight', [dim]),
      ...block('attn_qkv.weight', [dim, qDim + 2 * kvDim], fused),
      ...block('attn_q.weight', [dim, (gatedAttn ? 2 : 1) * qDim], !fused),
      ...block('attn_q.bias', [qDim], qkvBias),
      ...block('attn_k.weight', [dim, kvDim], !fused),
      ...block('attn_k.bias', [kvDim], qkvBias),
      ...block('attn_v.weight', [dim, kvDim], !fused),
      ...block('attn_v.bias', [kvDim], qkvBias),
      ...block('attn_q_norm.weight', [headDim], qkNorm),
      ...block('attn_k_norm.weight', [headDim], qkNorm),
      ...block('attn_output.weight', [qDim, dim]),
      ...block('post_attention_norm.weight', [dim], postNorms || recurrent === 'delta'),
      ...block('ffn_norm.weight', [dim], recurrent !== 'delta'),
      ...block('ffn_gate.weight', [dim, hiddenDim], !fused),
      ...block('ffn_down.weight', [hiddenDim, dim]),
      ...block('ffn_up.weight', [dim, (fused ? 2 : 1) * hiddenDim]),
      ...block('post_ffw_norm.weight', [dim], postNorms),
    );
  }
  list.push({ name: recurrent === 'conv' ? 'token_embd_norm.weight' : 'output_norm.weight', dims: [dim], layer: -1 });
  if (!g.tied) list.push({ name: 'output.weight', dims: [dim, vocabSize], layer: -1 });
  return list;
}

/**
 * bert's and nomic-bert's tensors: the embedding, token_types (type_vocab_size
 * rows; llama.cpp adds the first to every token), bert's learned positions
 * (position_embd, a row per position of the context), the embedding's
 * LayerNorm; per block bert's q, k, v or nomic-bert's fused attn_qkv, the
 * attention's output and its LayerNorm (attn_output_norm, after the residual
 * add), the FFN (bert's up and down; nomic-bert's gate, up and down) and its
 * LayerNorm (layer_output_norm); a cross-encoder's classifier (cls.output)
 * last. Every LayerNorm has a bias, as every bert projection does; nomic-bert
 * has no other bias. No output.weight: llama.cpp's encoders end in the last
 * block's LayerNorm.
 */
function encoderTensors(g) {
  const { dim, hiddenDim, vocabSize, numLayers } = g;
  const nomic = architectureOf(g) === 'nomic-bert';
  const list = [
    { name: 'token_embd.weight', dims: [dim, vocabSize], layer: -1 },
    { name: 'token_types.weight', dims: [dim, 2], layer: -1 },
    ...(nomic ? [] : [{ name: 'position_embd.weight', dims: [dim, g.contextLength], layer: -1 }]),
    { name: 'token_embd_norm.weight', dims: [dim], layer: -1 },
    { name: 'token_embd_norm.bias', dims: [dim], layer: -1 },
  ];
  for (let l = 0; l < numLayers; l++) {
    const block = (name, dims, present = true) => (present ? [{ name: `blk.${l}.${name}`, dims, layer: l }] : []);
    const projection = (name, dims, present = true) => [...block(`${name}.weight`, dims, present), ...block(`${name}.bias`, [dims[1]], present && !nomic)];
    const norm = (name) => [...block(`${name}.weight`, [dim]), ...block(`${name}.bias`, [dim])];
    list.push(
      ...block('attn_qkv.weight', [dim, 3 * dim], nomic),
      ...projection('attn_q', [dim, dim], !nomic),
      ...projection('attn_k', [dim, dim], !nomic),
      ...projection('attn_v', [dim, dim], !nomic),
      ...projection('attn_output', [dim, dim]),
      ...norm('attn_output_norm'),
      ...block('ffn_gate.weight', [dim, hiddenDim], nomic),
      ...projection('ffn_up', [dim, hiddenDim]),
      ...projection('ffn_down', [hiddenDim, dim]),
      ...norm('layer_output_norm'),
    );
  }
  if (g.labels) {
    list.push({ name: 'cls.output.weight', dims: [dim, g.labels.length], layer: -1 }, { name: 'cls.output.bias', dims: [g.labels.length], layer: -1 });
  }
  return list;
}

/**
 * A Mamba-2 hybrid's tensors: per block attn_norm (every block's first
 * norm), then what mamba2Parts says it holds -- attention (q, k, v, output;
 * no bias), a Mamba-2 mixer, an FFN (after its norm where it has one, gated
 * where it is) -- then output_norm and output.
 */
function mamba2Tensors(g) {
  const { dim, hiddenDim, vocabSize, numLayers } = g;
  const { ffnNorm, gatedFfn } = ARCHITECTURES[architectureOf(g)];
  const headDim = headDimOf(g);
  const { heads, channels, projected } = mamba2Shape(g);
  const { convKernel, groupCount, innerSize, norm = true } = g.ssm;
  const list = [{ name: 'token_embd.weight', dims: [dim, vocabSize], layer: -1 }];
  for (let l = 0; l < numLayers; l++) {
    const block = (name, dims, present = true) => (present ? [{ name: `blk.${l}.${name}`, dims, layer: l }] : []);
    const { mamba, attention, ffn } = mamba2Parts(g, l);
    list.push(
      ...block('attn_norm.weight', [dim]),
      ...block('attn_q.weight', [dim, g.numHeads * headDim], attention),
      ...block('attn_k.weight', [dim, g.numKvHeads * headDim], attention),
      ...block('attn_v.weight', [dim, g.numKvHeads * headDim], attention),
      ...block('attn_output.weight', [g.numHeads * headDim, dim], attention),
      ...block('ssm_in.weight', [dim, projected], mamba),
      ...block('ssm_conv1d.weight', [convKernel, channels], mamba),
      ...block('ssm_conv1d.bias', [channels], mamba),
      ...block('ssm_dt.bias', [heads], mamba),
      ...block('ssm_a', [1, heads], mamba),
      ...block('ssm_d', [1, heads], mamba),
      ...block('ssm_norm.weight', [innerSize / groupCount, groupCount], mamba && norm),
      ...block('ssm_out.weight', [innerSize, dim], mamba),
      ...block(ffnNorm, [dim], ffn && ffnNorm !== null),
      ...block('ffn_gate.weight', [dim, hiddenDim], ffn && gatedFfn),
      ...block('ffn_up.weight', [dim, hiddenDim], ffn),
      ...block('ffn_down.weight', [hiddenDim, dim], ffn),
    );
  }
  list.push({ name: 'output_norm.weight', dims: [dim], layer: -1 });
  if (!g.tied) list.push({ name: 'output.weight', dims: [dim, vocabSize], layer: -1 });
  return list;
}

/** gemma4's tensors, in the converter's order (its generated rope_freqs first). */
function gemma4Tensors(g) {
  const { dim, vocabSize, numLayers, perLayerDim } = g;
  const list = [
    { name: 'rope_freqs.weight', dims: [g.globalHeadDim / 2], layer: -1 },
    { name: 'token_embd.weight', dims: [dim, vocabSize], layer: -1 },
    ...(perLayerDim ? [
      { name: 'per_layer_token_embd.weight', dims: [perLayerDim * numLayers, vocabSize], layer: -1 },
      { name: 'per_layer_model_proj.weight', dims: [dim, perLayerDim * numLayers], layer: -1 },
      { name: 'per_layer_proj_norm.weight', dims: [perLayerDim], layer: -1 },
    ] : []),
  ];
  for (let l = 0; l < numLayers; l++) {
    const block = (name, dims, present = true) => (present ? [{ name: `blk.${l}.${name}`, dims, layer: l }] : []);
    const { window, headDim, kvHeads, hiddenDim } = gemma4Layer(g, l);
    const owns = ownsRows(g, l);
    list.push(
      ...block('attn_norm.weight', [dim]),
      ...block('attn_q.weight', [dim, g.numHeads * headDim]),
      ...block('attn_k.weight', [dim, kvHeads * headDim], owns),
      ...block('attn_v.weight', [dim, kvHeads * headDim], owns && !(g.kEqV && !window)),
      ...block('attn_q_norm.weight', [headDim]),
      ...block('attn_k_norm.weight', [headDim], owns),
      ...block('attn_output.weight', [g.numHeads * headDim, dim]),
      ...block('post_attention_norm.weight', [dim]),
      ...block('ffn_norm.weight', [dim]),
      ...block('ffn_gate.weight', [dim, hiddenDim]),
      ...block('ffn_up.weight', [dim, hiddenDim]),
      ...block('ffn_down.weight', [hiddenDim, dim]),
      ...block('post_ffw_norm.weight', [dim]),
      ...block('inp_gate.weight', [dim, perLayerDim], perLayerDim > 0),
      ...block('proj.weight', [perLayerDim, dim], perLayerDim > 0),
      ...block('post_norm.weight', [dim], perLayerDim > 0),
      ...block('layer_output_scale.weight', [1]),
    );
  }
  list.push({ name: 'output_norm.weight', dims: [dim], layer: -1 });
  if (!g.tied) list.push({ name: 'output.weight', dims: [dim, vocabSize], layer: -1 });
  return list;
}

/**
 * rope_freqs.weight as the converter computes it from a rope_scaling of
 * type llama3 (LlamaModel.generate_extra_tensors), in torch's float32 step
 * by step: each RoPE frequency base^(-2i/headDim) whose wavelength is
 * shorter than originalContextLength / highFreqFactor keeps a factor of 1,
 * one longer than originalContextLength / lowFreqFactor gets `factor`, and
 * those between 1 / ((1 - smooth) / factor + smooth). ggml divides the
 * angle of pair i by factor i. (The converter reads
 * original_max_position_embeddings from the top level of config.json, not
 * from rope_scaling where Llama 3 keeps it: 8192 by default, which is Llama
 * 3's value anyway. torch's powf may differ from Math.pow in the last bit.)
 */
export function llama3RopeFactors(headDim, base, { factor, lowFreqFactor, highFreqFactor, originalContextLength }) {
  const f = Math.fround;
  const lowFreqWavelen = originalContextLength / lowFreqFactor;
  const highFreqWavelen = originalContextLength / highFreqFactor;
  return Float32Array.from({ length: headDim / 2 }, (_, i) => {
    const freq = f(1 / f(base ** f((2 * i) / headDim)));
    const wavelen = f(f(2 * Math.PI) / freq);
    if (wavelen < highFreqWavelen) return 1;
    if (wavelen > lowFreqWavelen) return factor;
    const smooth = f(f(f(originalContextLength / wavelen) - lowFreqFactor) / (highFreqFactor - lowFreqFactor));
    return f(1 / f(f(f(1 - smooth) / factor) + smooth));
  });
}

/**
 * The RMS of a random matrix's values: 1/√(its row length), so that each
 * output has about the RMS of its input; the embedding (the output, when
 * tied) and the output 2/√dim, so that logits have an RMS of about 2:
 * broad, not saturated.
 */
function randomRms(name, dims) {
  if (name === 'token_embd.weight' || name === 'output.weight') return 2 / Math.sqrt(dims[0]);
  return 1 / Math.sqrt(dims[0]);
}

/** Norm weights (output_norm, a block's and qwen3's per-head ones): 1 give or take 0.1, in f32. */
function normWeights(count, random, scale = 1) {
  return GGML_TYPES.F32.encode(Float32Array.from({ length: count }, () => scale * (1 + 0.2 * (random.unit() - 0.5))));
}

/**
 * gemma4's q and k norms: its attention does not divide q.k by sqrt(head),
 * which trained norms make up for; norms of 1 would give scores of RMS
 * sqrt(head), an attention so peaked that a last-bit difference moves it
 * (llama.cpp's flash attention on against off: mean KL 3e-6 at 10 layers).
 * Norms of head^-1/4 give q.k an RMS of 1, as 1/sqrt(head) does elsewhere.
 */
const qkNormScale = (g, name) => (architectureOf(g) === 'gemma4' && /attn_[qk]_norm/.test(name) ? 1 : 0);

/**
 * Biases (qwen2's q, k and v): uniform in [-1, 1], in f32 -- an RMS of
 * 0.58 beside projections of RMS about 1, so that they move the attention.
 * An encoder's (bert's projections', its LayerNorms'): `scale` 0.1 times
 * that. Its blocks add the same biases to every token after every
 * LayerNorm, and biases of RMS 0.58 drive every token of every text to one
 * state: 12 blocks of them give bge-small-en-v1.5's geometry [CLS] states
 * alike to a cosine of 0.9998 from text to text, 0.83 with these.
 */
function biasValues(count, random, scale = 1) {
  return GGML_TYPES.F32.encode(Float32Array.from({ length: count }, () => scale * (2 * random.unit() - 1)));
}

/**
 * qwen35's and Mamba-2's ssm_a, -exp(A_log) as the converter writes it: each (value) head's
 * decay rate, from -0.4 to -2.7 (A_log uniform in [-1, 1]), in f32.
 */
function decayRates(count, random) {
  return GGML_TYPES.F32.encode(Float32Array.from({ length: count }, () => -Math.exp(2 * random.unit() - 1)));
}

/**
 * A Mamba-2 mixer's ssm_dt.bias as Mamba-2 initializes it (dt_bias, in
 * f32): softplus^-1 of each head's time step, drawn log-uniform in
 * [0.001, 0.1], so that its state decays slowly and carries a text.
 */
function timeStepBiases(count, random) {
  return GGML_TYPES.F32.encode(Float32Array.from({ length: count }, () => {
    const dt = Math.exp(Math.log(0.001) + random.unit() * Math.log(100));
    return dt + Math.log(-Math.expm1(-dt));
  }));
}

/**
 * LongRoPE's factors, the divisors of each pair's angle, in f32: the long
 * ones from 1 to 10 (a checkpoint's rise from 1 for its fast pairs to tens
 * for its slow ones, drawn), the short ones 1 to 1.2.
 */
function ropeFactorValues(name, count, random) {
  const spread = name === 'rope_factors_long.weight' ? 9 : 0.2;
  return GGML_TYPES.F32.encode(Float32Array.from({ length: count }, () => 1 + spread * random.unit()));
}

/**
 * A model of geometry `g` (any architecture of ARCHITECTURES) with
 * random weights in `mix`, as llama.cpp's converter lays it out: each
 * drawn tensor random valid blocks of its type (values of RMS randomRms),
 * norms and biases in F32, drawn from its own seed, so a tensor's data is
 * the same however often it is asked for (rope_freqs.weight is computed,
 * llama3RopeFactors, and draws no seed: the other tensors' data does not
 * depend on whether it is there). `everyValue` adds one metadata key of
 * every GGUF value type. `tokenizer` (entries as hf-vocab.mjs's
 * hfVocabMetadata gives them) replaces the synthetic vocabulary's tokenizer
 * keys (a WordPiece one for bert and nomic-bert: wordPieceVocab), the
 * vocabulary size becoming its token count. `control`: control
 * tokens the synthetic vocabulary ends with (an image projector's markers,
 * which llama.cpp's mtmd looks up: vision.mjs); `distinctPieces`:
 * syntheticVocab's. Returns a spec for the writer, with `geometry` and
 * `vocab` beside it.
 */
export function randomLlama(g, { mix = 'F32', seed = 1, everyValue = false, tokenizer, control = [], distinctPieces = false, name = `random-${g.name}-${mix}` } = {}) {
  if (tokenizer) g = { ...g, vocabSize: tokenizer.find((e) => e.key === 'tokenizer.ggml.tokens').value.length };
  const { encoder = false, control: architectureControl = [], recurrent } = ARCHITECTURES[architectureOf(g)];
  const [makeVocab, vocabMetadata] = encoder
    ? [() => wordPieceVocab(g.vocabSize), wordPieceVocabMetadata]
    : [() => syntheticVocab(g.vocabSize, [...architectureControl, ...control], { distinctPieces }), syntheticVocabMetadata];
  const vocab = tokenizer ? null : makeVocab();
  let drawn = 0;
  const tensors = modelTensors(g).map((t) => {
    const typeName = tensorType(mix, { ...t, numLayers: g.numLayers, tied: g.tied, gqa: gqaOf(g) });
    const count = t.dims.reduce((a, b) => a * b, 1);
    if (t.name === 'rope_freqs.weight') {
      const factors = architectureOf(g) === 'gemma4' ? proportionalRopeFactors(g) : llama3RopeFactors(headDimOf(g), g.ropeBase, g.ropeScaling);
      return { ...t, type: typeName, data: () => GGML_TYPES.F32.encode(factors) };
    }
    const tensorSeed = (seed * 1000003 + drawn++ * 7919) >>> 0;
    let data;
    // Mamba-2's grouped ssm_norm, its decay rates (ssm_a) and its skip (ssm_d, a norm's values) are matrices by shape only.
    const matrix = t.dims.length > 1 && !/_norm\.weight$|\.ssm_[ad]$/.test(t.name);
    if (t.name.endsWith('.ssm_a')) data = () => decayRates(count, rng(tensorSeed));
    else if (matrix) data = () => ggmlType(typeName).random(count, rng(tensorSeed), randomRms(t.name, t.dims));
    else if (recurrent === 'mamba2' && t.name.endsWith('.ssm_dt.bias')) data = () => timeStepBiases(count, rng(tensorSeed));
    else if (t.name.endsWith('.bias')) data = () => biasValues(count, rng(tensorSeed), encoder ? 0.1 : 1);
    else if (t.name.startsWith('rope_factors_')) data = () => ropeFactorValues(t.name, count, rng(tensorSeed));
    else data = () => normWeights(count, rng(tensorSeed), qkNormScale(g, t.name) ? count ** -0.25 : 1);
    return { ...t, type: typeName, data };
  });
  const metadata = [...modelMetadata(g, { name, mix }), ...(tokenizer ? tokenizer.map(writerEntry) : vocabMetadata(vocab, g)),
    ...(everyValue ? everyValueType() : [])];
  return { version: 3, metadata, tensors, geometry: g, vocab };
}

/** The geometry of a model read by js/model/gguf.js (llama, qwen2 or qwen3). */
function geometryOf(file) {
  const architecture = file.metadata.get('general.architecture');
  const get = (key, fallback) => file.metadata.get(`${architecture}.${key}`) ?? fallback;
  return {
    name: file.metadata.get('general.name') ?? 'model', architecture, dim: get('embedding_length'), numLayers: get('block_count'),
    numHeads: get('attention.head_count'), numKvHeads: get('attention.head_count_kv', get('attention.head_count')),
    headDim: get('attention.key_length'), hiddenDim: get('feed_forward_length'),
    vocabSize: file.metadata.get('tokenizer.ggml.tokens').length, contextLength: get('context_length'),
    ropeBase: get('rope.freq_base', 10000), eps: get('attention.layer_norm_rms_epsilon'),
    tied: !file.tensors.has('output.weight'),
  };
}

/**
 * A model read by js/model/gguf.js (llama, qwen2 or qwen3; an F32 or F16 file of any version),
 * re-encoded as GGUF `version` with its matrices in `mix`: the same metadata
 * with the types llama.cpp reads it as, general.file_type the mix's, each
 * matrix encoded from f32 by its type's encoder.
 */
export function reencodeLlama(file, { mix = 'F32', version = 3 } = {}) {
  const g = geometryOf(file);
  const metadata = retypedMetadata(file).filter(([key]) => key !== 'general.file_type');
  metadata.splice(1, 0, ['general.file_type', gguf.u32(FILE_TYPES[mix] ?? 0)]);
  const tensors = [...file.tensors.values()].map((info) => {
    const layer = Number(/^blk\.(\d+)\./.exec(info.name)?.[1] ?? -1);
    const typeName = tensorType(mix, { name: info.name, dims: info.dims, layer, numLayers: g.numLayers, tied: g.tied, gqa: gqaOf(g) });
    return { name: info.name, dims: info.dims, layer, type: typeName, data: () => ggmlType(typeName).encode(file.tensor(info.name)) };
  });
  return { version, metadata, tensors, geometry: g };
}

/**
 * A probe of type `typeName`'s dequantization: a one-block model whose
 * token_embd.weight is random valid blocks of that type (values of RMS 1) and
 * whose block adds nothing to the residual stream (attn_output and ffn_down
 * all zero; every other tensor F32, norms all ones). An engine's final hidden
 * state for a token is then rmsnorm(its embedding row): the row as the engine
 * dequantized it, normalised.
 */
export function embeddingProbe(typeName, { dim = 512, vocabSize = 512, seed = 1 } = {}) {
  const g = { name: `probe-${typeName}`, dim, numLayers: 1, numHeads: dim / 64, numKvHeads: 2, hiddenDim: 256, vocabSize, contextLength: 512, ropeBase: 10000, eps: 1e-5, tied: false };
  const spec = randomLlama(g, { mix: 'F32', seed });
  const ones = (count) => GGML_TYPES.F32.encode(new Float32Array(count).fill(1));
  for (const t of spec.tensors) {
    const count = t.dims.reduce((a, b) => a * b, 1);
    if (t.name === 'token_embd.weight') {
      t.type = typeName;
      t.data = () => ggmlType(typeName).random(count, rng(seed), 1);
    } else if (/attn_output|ffn_down/.test(t.name)) {
      t.data = () => new Uint8Array(4 * count);
    } else if (t.dims.length === 1) {
      t.data = () => ones(count);
    }
  }
  spec.metadata = spec.metadata.map(([key, value]) => (key === 'general.name' ? [key, g.name] : [key, value]));
  return spec;
}

/** Tensor `name` of a spec, dequantized to f32 by its type's reference decoder. */
export function tensorValues(spec, name) {
  const t = spec.tensors.find((x) => x.name === name);
  if (!t) throw new RangeError(`no tensor ${name} in this model`);
  const data = typeof t.data === 'function' ? t.data() : t.data;
  return ggmlType(t.type).decode(data, t.dims.reduce((a, b) => a * b, 1));
}

/** How many matrices of each type a spec holds, e.g. { Q4_K: 150, Q6_K: 31, F32: 61 }. */
export function typeCounts(spec) {
  const counts = {};
  for (const t of spec.tensors) counts[t.type] = (counts[t.type] ?? 0) + 1;
  return counts;
}

/**
 * The path of spec's file in `dir` (named `name`.gguf), written there first
 * unless it is there already (a file is only ever complete: it is written
 * under a temporary name and renamed). For the benchmarks' large models.
 */
export function modelFile(dir, name, makeSpec) {
  const path = join(dir, `${name}.gguf`);
  if (!existsSync(path)) {
    writeGgufFile(`${path}.partial`, makeSpec());
    renameSync(`${path}.partial`, path);
  }
  return path;
}

// ---------------------------------------------------------------------------
// The real models of ../shared/data, and real text for them.

const GENESIS = 'In the beginning God created the heaven and the earth. And the earth was without form, and void; and '
  + 'darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. And God said, '
  + 'Let there be light: and there was light. And God saw the light, that it was good: and God divided the light from '
  + 'the darkness. And God called the light Day, and the darkness he called Night. And the evening and the morning '
  + 'were the first day. And God said, Let there be a firmament in the midst of the waters, and let it divide the '
  + 'waters from the waters. And God made the firmament, and divided the waters which were under the firmament from '
  + 'the waters which were above the firmament: and it was so. And God called the firmament Heaven. And the evening '
  + 'and the morning were the second day. And God said, Let the waters under the heaven be gathered together unto '
  + 'one place, and let the dry land appear: and it was so. And God called the dry land Earth; and the gathering '
  + 'together of the waters called he Seas: and God saw that it was good. And God said, Let the earth bring forth '
  + 'grass, the herb yielding seed, and the fruit tree yielding fruit after his kind, whose seed is in itself, upon '
  + 'the earth: and it was so. And the earth brought forth grass, and herb yielding seed after his kind, and the tree '
  + 'yielding fruit, whose seed was in itself, after his kind: and God saw that it was good. And the evening and the '
  + 'morning were the third day. And God said, Let there be lights in the firmament of the heaven to divide the day '
  + 'from the night; and let them be for signs, and for seasons, and for days, and years: And let them be for lights '
  + 'in the firmament of the heaven to give light upon the earth: and it was so. And God made two great lights; the '
  + 'greater light to rule the day, and the lesser light to rule the night: he made the stars also. And God set them '
  + 'in the firmament of the heaven to give light upon the earth, And to rule over the day and over the night, and to '
  + 'divide the light from the darkness: and God saw that it was good. And the evening and the morning were the '
  + 'fourth day. And God said, Let the waters bring forth abundantly the moving creature that hath life, and fowl '
  + 'that may fly above the earth in the open firmament of heaven. And God created great whales, and every living '
  + 'creature that moveth, which the waters brought forth abundantly, after their kind, and every winged fowl after '
  + 'his kind: and God saw that it was good.';

/**
 * The two real models, by file name: where each is, and `count` tokens of
 * real text for it given its runner (a Llama): stories260K's greedy story from
 * <s>, Genesis 1:1-21 in kjv-d512-h64's own tokens (up to 400 or so).
 */
export const REAL_MODELS = {
  stories260k: {
    path: fileURLToPath(new URL('../../../shared/data/stories260k.gguf', import.meta.url)),
    tokens: (runner, count) => [1, ...generate(runner.session(), [1], { steps: count - 1, stopAtEos: false }).tokens],
  },
  'kjv-d512-h64': {
    path: fileURLToPath(new URL('../../../shared/data/kjv-d512-h64.gguf', import.meta.url)),
    tokens: (runner, count) => runner.tokenizer.encode(GENESIS).slice(0, count),
  },
};
