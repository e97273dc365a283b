// Chat templates: the Jinja text a GGUF file carries as tokenizer.chat_template
// (Hugging Face's tokenizer_config.json chat_template, copied by llama.cpp's
// converter), rendered with @huggingface/jinja -- the engine transformers.js
// renders it with -- from the variables transformers.js gives it, so that the
// text is byte for byte tokenizer.apply_chat_template(messages, { tokenize:
// false }).
//
// transformers.js renders a template with: messages; add_generation_prompt;
// tools and documents (null unless given); the special tokens its
// tokenizer_config.json sets (bos_token, eos_token, unk_token, sep_token,
// pad_token, cls_token, mask_token, those that are set); then the caller's
// own variables over them. The engine adds raise_exception, range,
// strftime_now (the date in local time: Llama 3.x templates date their system
// turn with it unless given date_string) and true/false/none. A GGUF file
// names only the begin and end tokens among those (as llama.cpp's own
// template renderer gives only them), so those are the two fromTokenizer
// passes; the others can be given as variables.

import { Template } from '@huggingface/jinja';
import { checkObject, shown } from '../runtime/checks.js';
import { nearest } from '../runtime/options.js';

/** A template that does not parse, raises an exception, or fails to render; `cause` is the engine's error. */
export class ChatTemplateError extends Error {
  constructor(message, options) {
    super(message, options);
    this.name = 'ChatTemplateError';
  }
}

// Where the engine's raise_exception throws from (the first frame of its
// error's stack), found once: an error thrown there is the template's own,
// its message the template's. (A template's variables cannot replace the
// engine's globals, raise_exception among them.) Where stacks say nothing,
// such an error reads as any other the engine throws.
let raiseSite;
function raisedByTemplate(error) {
  if (raiseSite === undefined) {
    try {
      new Template('{{ raise_exception("") }}').render({});
    } catch (probe) {
      raiseSite = topFrame(probe);
    }
  }
  return raiseSite !== null && topFrame(error) === raiseSite;
}
// The first line of a stack that names a place (file:line:column), after the message some engines put first.
function topFrame(error) {
  if (typeof error?.stack !== 'string') return null;
  const head = String(error);
  const frames = error.stack.startsWith(head) ? error.stack.slice(head.length) : error.stack;
  return frames.split('\n').find((line) => /:\d+:\d+\)?$/.test(line)) ?? null;
}

// `(x if x is defined else fallback)` for any node x: the engine's own node
// for that expression, taken from a probe template once per fallback (Jinja
// text; `fallbackType` its node's type); null where the engine's tree is not
// shaped as this expects, and what would use it stays as it is.
const definedOr = new Map();
function definedOrNode(fallback, fallbackType) {
  if (!definedOr.has(fallback)) {
    const probe = new Template(`{{ (y if y is defined else ${fallback}) }}`).parsed.body?.[0];
    const fits = probe?.type === 'Ternary' && probe.condition?.type === 'TestExpression' && probe.condition.operand?.type === 'Identifier' &&
      probe.trueExpr?.type === 'Identifier' && probe.falseExpr?.type === fallbackType;
    const copy = (node, fields) => Object.assign(Object.create(Object.getPrototypeOf(node)), node, fields);
    definedOr.set(fallback, fits ? (x) => copy(probe, { condition: copy(probe.condition, { operand: x }), trueExpr: x }) : null);
  }
  return definedOr.get(fallback);
}

// Each node of the engine's tree, after its children.
function eachNode(node, visit) {
  if (Array.isArray(node)) return node.forEach((child) => eachNode(child, visit));
  if (node === null || typeof node !== 'object' || typeof node.type !== 'string') return;
  for (const value of Object.values(node)) eachNode(value, visit);
  visit(node);
}

// A `for` over something undefined (a message field the message lacks, as
// `for tool_call in message.tool_calls`) loops over nothing in Python's
// jinja2, which renders the templates for transformers, but throws in the
// engine. So each loop's sequence is read as `(x if x is defined else [])`.
// A `none` still fails as it does in jinja2.
function loopsOverUndefinedAsEmpty(program) {
  const orEmpty = definedOrNode('[]', 'ArrayLiteral');
  if (orEmpty === null) return;
  eachNode(program, (node) => {
    if (node.type !== 'For') return;
    // A filtered loop (for x in xs if test) keeps its filter: its sequence is the select's left side.
    if (node.iterable.type === 'SelectExpression') node.iterable.lhs = orEmpty(node.iterable.lhs);
    else node.iterable = orEmpty(node.iterable);
  });
}

// A string filter (upper, lower, ...) of something undefined -- `value['type'] | upper`
// for a property without a type, in Gemma 4's template -- is '' in jinja2, which
// prints an undefined value as '', but throws in the engine. So each such
// filter's operand is read as `(x if x is defined else '')`.
const STRING_FILTERS = new Set(['upper', 'lower', 'trim', 'title', 'capitalize']);
function stringFiltersOfUndefinedAsBlank(program) {
  const orBlank = definedOrNode('""', 'StringLiteral');
  if (orBlank === null) return;
  eachNode(program, (node) => {
    if (node.type === 'FilterExpression' && node.filter?.type === 'Identifier' && STRING_FILTERS.has(node.filter.value)) node.operand = orBlank(node.operand);
  });
}

// Variables render() sets itself; a caller gives them another way.
const OWN = { messages: 'the messages are render\'s first argument', add_generation_prompt: 'give options.addGenerationPrompt' };

export class ChatTemplate {
  #template;

  /**
   * A template from its Jinja text; `bosToken` / `eosToken` are the text of
   * the begin and end tokens (bos_token and eos_token to the template; null:
   * not set). Throws a ChatTemplateError when the text does not parse.
   */
  constructor(source, { bosToken = null, eosToken = null } = {}) {
    const where = 'new ChatTemplate';
    if (typeof source !== 'string') throw new TypeError(`${where}: source must be a string, the template's Jinja text (got ${shown(source)})`);
    for (const [name, value] of [['bosToken', bosToken], ['eosToken', eosToken]]) {
      if (value !== null && typeof value !== 'string') throw new TypeError(`${where}: ${name} must be a string or null (got ${shown(value)})`);
    }
    try {
      this.#template = new Template(source);
    } catch (error) {
      throw new ChatTemplateError(`the chat template does not parse: ${error.message}`, { cause: error });
    }
    loopsOverUndefinedAsEmpty(this.#template.parsed);
    stringFiltersOfUndefinedAsBlank(this.#template.parsed);
    this.source = source;
    this.bosToken = bosToken;
    this.eosToken = eosToken;
  }

  /**
   * The chat template of a tokenizer read from a GGUF file (Tokenizer.fromGguf,
   * a Llama's tokenizer, or a RemoteLlama's): its tokenizer.chat_template,
   * with the text of its begin and end tokens. Throws a ChatTemplateError
   * when the file has no template, or it does not parse.
   */
  static fromTokenizer(tokenizer) {
    checkObject('ChatTemplate.fromTokenizer', 'tokenizer', tokenizer);
    if (typeof tokenizer.chatTemplate !== 'string') {
      throw new ChatTemplateError('the model has no chat template (its GGUF file has no tokenizer.chat_template)');
    }
    return new ChatTemplate(tokenizer.chatTemplate, { bosToken: tokenizer.bosToken, eosToken: tokenizer.eosToken });
  }

  /**
   * The conversation as the model's prompt text. `messages`: { role, content,
   * ... } objects (templates read role and content, some also tool_calls,
   * reasoning_content and more). `addGenerationPrompt` (default true) ends
   * it with the opening of the assistant's turn, for the model to write;
   * every other option is a template variable (tools, date_string,
   * enable_thinking, ...), set over the ones render sets. Throws a
   * ChatTemplateError naming what the template raised, or why it could not
   * render.
   */
  render(messages, options = {}) {
    const where = 'ChatTemplate.render';
    if (!Array.isArray(messages) || !messages.every((m) => m !== null && typeof m === 'object' && !Array.isArray(m))) {
      throw new TypeError(`${where}: messages must be an array of message objects ({ role, content }) (got ${shown(messages)})`);
    }
    checkObject(where, 'options', options);
    const { addGenerationPrompt = true, ...variables } = options;
    if (typeof addGenerationPrompt !== 'boolean') {
      throw new TypeError(`${where}: options.addGenerationPrompt must be a boolean (got ${shown(addGenerationPrompt)})`);
    }
    for (const key of Object.keys(variables)) {
      if (key in OWN) throw new TypeError(`${where}: options.${key} is not a variable to set: ${OWN[key]}`);
      // Template variables are snake_case: a camelCase one near the option is a slip.
      if (/[A-Z]/.test(key) && nearest(key, ['addGenerationPrompt'])) throw new TypeError(`${where}: unknown option '${key}' (did you mean 'addGenerationPrompt'?)`);
    }
    const special = {};
    if (this.bosToken) special.bos_token = this.bosToken;
    if (this.eosToken) special.eos_token = this.eosToken;
    try {
      return this.#template.render({
        messages,
        add_generation_prompt: addGenerationPrompt,
        tools: null,
        documents: null,
        ...special,
        ...variables,
      });
    } catch (error) {
      if (raisedByTemplate(error)) throw new ChatTemplateError(`the chat template raised an exception: ${error.message}`, { cause: error });
      throw new ChatTemplateError(`the chat template failed to render: ${error.message}`, { cause: error });
    }
  }
}
