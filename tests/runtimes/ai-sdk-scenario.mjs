// The AI SDK through kvcache-wasm/ai-sdk with the models in a LlamaWorker,
// the same calls wherever it runs (a browser's page, Node): text, a second
// turn from the cache, a stream aborted mid-way and the model used after
// it, an object of a schema and 50 of a nested one (each valid), two tool
// calls run by the SDK and answered. The
// caller passes the modules (a page imports them through its import map and
// a bundle of `ai`, Node by name) and the models' sources.
//
//   const result = await aiSdkScenario({ LlamaWorker, kvcache, ai }, { stories, tools, workerOptions });

/** A nested schema: an object in an object, an array of an enum, strings and an integer bounded. */
export const PERSON_SCHEMA = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 12 },
    address: { type: 'object', properties: { city: { type: 'string', maxLength: 10 }, zip: { type: 'string', pattern: '^[0-9]{5}$' } }, required: ['city', 'zip'], additionalProperties: false },
    tags: { type: 'array', items: { enum: ['a', 'b', 'c'] }, minItems: 1, maxItems: 3 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
  },
  required: ['name', 'address', 'tags', 'age'],
  additionalProperties: false,
};
// How many objects of PERSON_SCHEMA the scenario asks for, each sampled with its own seed.
export const PEOPLE = 50;

export async function aiSdkScenario({ LlamaWorker, kvcache, ai }, { stories, tools, workerOptions }) {
  const { generateText, streamText, Output, jsonSchema, tool, isStepCount } = ai;
  const worker = new LlamaWorker(workerOptions);
  try {
    const model = kvcache(await worker.load(stories));
    const first = await generateText({ model, prompt: 'Once upon a time', maxOutputTokens: 24, temperature: 0 });
    const next = await generateText({ model, messages: [{ role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: first.text },
      { role: 'user', content: 'Then' }], maxOutputTokens: 8, temperature: 0 });
    const stop = new AbortController();
    const parts = [];
    let deltas = 0;
    const streamed = streamText({ model, prompt: 'Tom', maxOutputTokens: 200, temperature: 0, abortSignal: stop.signal, onError: () => {} });
    for await (const part of streamed.fullStream) {
      parts.push(part.type);
      if (part.type === 'text-delta' && ++deltas === 5) stop.abort();
    }
    const tokensAfterAbort = (await (await model.session()).tokens()).length;
    const again = await generateText({ model, prompt: 'Once upon a time', maxOutputTokens: 24, temperature: 0 });
    const schema = jsonSchema({ type: 'object', properties: { name: { type: 'string', maxLength: 12 }, pet: { enum: ['cat', 'dog'] } }, required: ['name', 'pet'] });
    const { output } = await generateText({ model, output: Output.object({ schema }), prompt: 'Lily', temperature: 0 });
    const people = [];
    for (let seed = 0; seed < PEOPLE; seed++) {
      people.push((await generateText({ model, output: Output.object({ schema: jsonSchema(PERSON_SCHEMA) }), prompt: 'A person.', temperature: 1, seed, maxOutputTokens: 400 })).output);
    }

    const ran = [];
    const loop = await generateText({
      model: kvcache(await worker.load(tools)), prompt: 'Weather in Paris, and the time?', temperature: 0, maxOutputTokens: 40, stopWhen: isStepCount(3),
      tools: {
        get_weather: tool({
          description: 'The weather in a city',
          inputSchema: jsonSchema({ type: 'object', properties: { city: { type: 'string', maxLength: 10 } }, required: ['city'], additionalProperties: false }),
          execute: async ({ city }) => { ran.push(city); return { city, celsius: 21 }; },
        }),
        get_time: tool({
          description: 'The time in a zone',
          inputSchema: jsonSchema({ type: 'object', properties: { zone: { enum: ['UTC', 'CET'] } }, required: ['zone'], additionalProperties: false }),
          execute: async ({ zone }) => { ran.push(zone); return `12:00 ${zone}`; },
        }),
      },
      // The weather first, then the time, then an answer in text.
      prepareStep: ({ stepNumber }) => ({ toolChoice: [{ type: 'tool', toolName: 'get_weather' }, { type: 'tool', toolName: 'get_time' }, 'none'][stepNumber] }),
    });
    const usage = ({ inputTokens, outputTokens, inputTokenDetails: { cacheReadTokens, noCacheTokens } }) => ({ inputTokens, outputTokens, cacheReadTokens, noCacheTokens });
    return {
      text: first.text, finishReason: first.finishReason, usage: usage(first.usage), nextUsage: usage(next.usage), next: next.text,
      parts, tokensAfterAbort, again: again.text, object: output, people,
      steps: loop.steps.map((s) => s.finishReason), ran, calls: loop.steps.flatMap((s) => s.toolCalls.map((c) => [c.toolName, c.input])), answer: loop.text,
    };
  } finally {
    worker.terminate();
  }
}
