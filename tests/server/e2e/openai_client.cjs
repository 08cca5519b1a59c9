// Drives `deltallm serve` with the official OpenAI client for JavaScript, unchanged. Started by
// openai_test.py, which passes the server's address, key and model in the environment.
'use strict';
const assert = require('node:assert/strict');
const { execFileSync } = require('node:child_process');
const path = require('node:path');

const npm = process.env.DELTALLM_NPM_DIR;
const { OpenAI } = require(path.join(npm, 'node_modules', 'openai'));

const base = process.env.DELTALLM_URL;
const key = process.env.DELTALLM_KEY;
const bin = process.env.DELTALLM_BIN;
const client = new OpenAI({ baseURL: base + '/v1', apiKey: key, maxRetries: 0, timeout: 60000 });
let model;

const user = (content) => ({ role: 'user', content });
const greedy = { temperature: 0 };

async function text(params) {
  const r = await client.chat.completions.create({ model, ...params });
  return r;
}

async function streamed(params) {
  const s = await client.chat.completions.create({ model, stream: true, ...params });
  const chunks = [];
  for await (const c of s) chunks.push(c);
  return chunks;
}

const checks = [];
const check = (name, fn) => checks.push([name, fn]);

check('lists the model', async () => {
  const list = await client.models.list();
  const ids = list.data.map((m) => m.id);
  assert.equal(ids.length, 1);
  model = ids[0];
  assert.equal(model, process.env.DELTALLM_MODEL);
});

check('answers a chat without streaming', async () => {
  const r = await text({ messages: [user('Say hello')], max_tokens: 8, ...greedy });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, model);
  assert.equal(r.choices.length, 1);
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.ok(['length', 'stop'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.prompt_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
});

check('streams the same text it answers whole, with role, finish and usage chunks', async () => {
  const params = { messages: [user('Tell me a story')], max_tokens: 16, ...greedy };
  const whole = await text(params);
  const chunks = await streamed({ ...params, stream_options: { include_usage: true } });
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  let content = '';
  let finish = null;
  for (const c of chunks) {
    assert.equal(c.id, chunks[0].id);
    for (const ch of c.choices) {
      content += ch.delta.content || '';
      if (ch.finish_reason) finish = ch.finish_reason;
    }
  }
  assert.equal(content, whole.choices[0].message.content);
  assert.equal(finish, whole.choices[0].finish_reason);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(last.usage.prompt_tokens, whole.usage.prompt_tokens);
  // llama-server's timings ride on the chunk that finishes the choice.
  const timed = chunks.filter((c) => c.timings);
  assert.equal(timed.length, 1);
  assert.ok(timed[0].choices[0].finish_reason);
  assert.equal(timed[0].timings.predicted_n, whole.usage.completion_tokens);
});

check('max_tokens and max_completion_tokens bound the answer', async () => {
  for (const n of [1, 5, 13]) {
    const r = await text({ messages: [user('Count')], max_tokens: n, ignore_eos: true, ...greedy });
    assert.equal(r.usage.completion_tokens, n);
    assert.equal(r.choices[0].finish_reason, 'length');
  }
  const r = await text({ messages: [user('Count')], max_completion_tokens: 3, ignore_eos: true });
  assert.equal(r.usage.completion_tokens, 3);
});

check('a stop string cuts the text, streamed or not, and is never sent', async () => {
  const params = { messages: [user('Write a line')], max_tokens: 24, ignore_eos: true, ...greedy };
  const full = (await text(params)).choices[0].message.content;
  // A stop string from the middle of the greedy text (two characters, away from the start).
  const chars = Array.from(full);
  assert.ok(chars.length >= 8, `too short to cut: ${JSON.stringify(full)}`);
  const stop = chars.slice(5, 7).join('');
  const expected = full.slice(0, full.indexOf(stop));
  const r = await text({ ...params, stop: [stop] });
  assert.equal(r.choices[0].message.content, expected);
  assert.equal(r.choices[0].finish_reason, 'stop');
  const chunks = await streamed({ ...params, stop });
  let content = '';
  for (const c of chunks) for (const ch of c.choices) content += ch.delta.content || '';
  assert.equal(content, expected);
});

check('the same seed gives the same text', async () => {
  const params = { messages: [user('Improvise')], max_tokens: 20, temperature: 1.0, top_p: 1 };
  const a = await text({ ...params, seed: 1234 });
  const b = await text({ ...params, seed: 1234 });
  assert.equal(a.choices[0].message.content, b.choices[0].message.content);
  const s = await streamed({ ...params, seed: 1234 });
  let content = '';
  for (const c of s) for (const ch of c.choices) content += ch.delta.content || '';
  assert.equal(content, a.choices[0].message.content);
});

check('usage counts the tokens of the rendered prompt', async () => {
  const messages = [{ role: 'system', content: 'You are terse.' }, user('How many tokens is this?')];
  const r = await text({ messages, max_tokens: 1 });
  const rendered = await (
    await fetch(base + '/apply-template', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages }),
    })
  ).json();
  const ids = execFileSync(bin, ['tokenize'], { input: rendered.prompt, stdio: ['pipe', 'pipe', 'ignore'] })
    .toString()
    .trim()
    .split(',');
  assert.equal(r.usage.prompt_tokens, ids.length);
  const viaRoute = await (
    await fetch(base + '/tokenize', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ content: rendered.prompt, add_special: true }),
    })
  ).json();
  assert.equal(viaRoute.tokens.length, ids.length);
});

check('the second turn of a chat reuses the first from the prefix cache', async () => {
  const first = [{ role: 'system', content: 'You answer in riddles.' }, user('Who are you?')];
  const r1 = await text({ messages: first, max_tokens: 6, ...greedy });
  const second = [...first, r1.choices[0].message, user('And where do you live?')];
  const r2 = await text({ messages: second, max_tokens: 6, ...greedy });
  // The built-in template renders a reply as its generation prompt began it: the whole first
  // prompt is shared.
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens >= r1.usage.prompt_tokens,
    JSON.stringify([r1.usage, r2.usage]));
  assert.ok(r2.usage.prompt_tokens_details.cached_tokens < r2.usage.prompt_tokens);
  // The timings say the same: what was prefilled, what came from the cache, and how long each
  // part took.
  const t = r2.timings;
  assert.equal(t.cache_n, r2.usage.prompt_tokens_details.cached_tokens, JSON.stringify(t));
  assert.equal(t.cache_n + t.prompt_n, r2.usage.prompt_tokens);
  assert.equal(t.predicted_n, r2.usage.completion_tokens);
  for (const k of ['prompt_ms', 'predicted_ms', 'queue_ms', 'prepare_ms'])
    assert.ok(t[k] >= 0 && t[k] < 60000, k + ' ' + JSON.stringify(t));
  assert.ok(t.prompt_ms > 0, JSON.stringify(t));
});

check('a thinking template\'s second turn reuses all the first turn it shares', async () => {
  // The template opens the reply with <think> and renders history without it (as Qwen3.5's
  // does), so the first prompt's end is not where the second parts from it: the second turn must
  // still find every token the two prompts share in the cache (on a server that warms no next
  // turn, which would cache more).
  const url = process.env.DELTALLM_COLD_THINK_URL;
  const thinker = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0 });
  const ask = (messages) => thinker.chat.completions.create({ model: 'thinker', messages,
    max_tokens: 6, ignore_eos: true, temperature: 0 });
  const tokens = async (messages) => {
    const r = await (await fetch(url + '/apply-template', { method: 'POST',
      headers: { 'Content-Type': 'application/json' }, body: JSON.stringify({ messages }) })).json();
    return execFileSync(bin, ['tokenize'], { input: r.prompt, stdio: ['pipe', 'pipe', 'ignore'] })
      .toString().trim().split(',');
  };
  const first = [user('Tell me about the sea, the ships upon it and the people who sail them.')];
  const r1 = await ask(first);
  const second = [...first, { role: 'assistant', content: r1.choices[0].message.content || '' },
    user('And the harbours?')];
  const r2 = await ask(second);
  const [a, b] = [await tokens(first), await tokens(second)];
  let shared = 0;
  while (shared < a.length && a[shared] === b[shared]) shared++;
  assert.ok(shared < a.length, 'the template no longer parts from its generation prompt');
  assert.equal(r2.usage.prompt_tokens_details.cached_tokens, shared,
    JSON.stringify([r1.usage, r2.usage, a.length, b.length]));
});

check('a thinking template\'s next turn finds all but its new message warmed', async () => {
  // An answer (here one that ends at a stop string) has the server prefill the next turn's
  // beginning a moment later (the reply as the history renders it, without the think block, and
  // the next user turn's opening), so a next turn that comes after it reads only its own
  // message; a next turn that comes at once takes the warm-up's place.
  const url = process.env.DELTALLM_THINK_URL;
  const thinker = new OpenAI({ baseURL: url + '/v1', apiKey: 'none', maxRetries: 0 });
  const tokens = async (messages, add_generation_prompt) => {
    const r = await (await fetch(url + '/apply-template', { method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ messages, add_generation_prompt }) })).json();
    return execFileSync(bin, ['tokenize'], { input: r.prompt, stdio: ['pipe', 'pipe', 'ignore'] })
      .toString().trim().split(',');
  };
  const counter = async (name) => {
    const m = await (await fetch(url + '/metrics')).text();
    const line = m.split('\n').find((l) => l.startsWith(name + ' '));
    return line ? Number(line.split(' ')[1]) : 0;
  };
  const warmups = () => counter('deltallm_next_turn_warmups_total');
  const superseded = () => counter('deltallm_next_turn_warmups_superseded_total');
  // The warm-ups done reach n (they run after the server's delay), within 10 s.
  const warmed = async (n) => {
    for (let i = 0; i < 200 && (await warmups()) < n; i++)
      await new Promise((r) => setTimeout(r, 50));
    assert.equal(await warmups(), n);
  };
  const before = await warmups();
  const first = [user('Which rivers run to the sea, and which of them end in a lake instead?')];
  const r1 = await thinker.chat.completions.create({ model: 'thinker', messages: first,
    max_tokens: 40, temperature: 0, stop: [' '] });
  assert.equal(r1.choices[0].finish_reason, 'stop');
  await warmed(before + 1);
  const reply = { role: 'assistant', content: r1.choices[0].message.content || '' };
  const second = [...first, reply, user('And the lakes?')];
  const r2 = await thinker.chat.completions.create({ model: 'thinker', messages: second,
    max_tokens: 4, ignore_eos: true, temperature: 0 });
  const [head, all] = [await tokens([...first, reply], false), await tokens(second, true)];
  const cached = r2.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= head.length && cached < all.length,
    JSON.stringify([r1.usage, r2.usage, head.length, all.length]));
  // A turn cut by max_tokens is still the history the next turn sends back: warmed too.
  assert.equal(r2.choices[0].finish_reason, 'length');
  await warmed(before + 2);
  // Another next turn of the first: its new tokens are read in one window, with no snapshot
  // where a turn after it would part from it (its warm-up starts from its own hit). Counted
  // while the answer streams, before that warm-up can run.
  const steps = () => counter('deltallm_prompt_steps_total');
  const stepsBefore = await steps();
  const other = [...first, reply, user('And the seas, the deepest of them?')];
  const s2 = await thinker.chat.completions.create({ model: 'thinker', messages: other,
    max_tokens: 24, ignore_eos: true, temperature: 0, stream: true });
  let stepsAtFirstToken = null;
  for await (const c of s2) {
    const d = c.choices[0]?.delta || {};
    if (stepsAtFirstToken === null && (d.content || d.reasoning_content))
      stepsAtFirstToken = await steps();
  }
  assert.equal(stepsAtFirstToken - stepsBefore, 1);
  await warmed(before + 3);
  // A streamed answer is warmed too.
  const ask = (messages) => thinker.chat.completions.create({ model: 'thinker', messages,
    max_tokens: 40, temperature: 0, stop: [' '], stream: true });
  const finished = async (stream) => {
    let finish = null;
    for await (const c of stream) finish = c.choices[0]?.finish_reason || finish;
    return finish;
  };
  assert.equal(await finished(await ask(second)), 'stop');
  await warmed(before + 4);
  // A next turn sent as soon as its answer ends takes the place of that answer's warm-up.
  const gaveWay = await superseded();
  const third = [...second, { role: 'assistant', content: '' }, user('Which is deepest?')];
  assert.equal(await finished(await ask(third)), 'stop');
  const r4 = await thinker.chat.completions.create({ model: 'thinker', messages: [...third,
    { role: 'assistant', content: '' }, user('Why?')], max_tokens: 2, ignore_eos: true });
  assert.equal(r4.choices[0].finish_reason, 'length');
  assert.equal(await superseded(), gaveWay + 1);
  await warmed(before + 5);  // (the third turn's warm-up gave way; the fourth's runs)
});

check('logprobs come per token with the asked alternatives', async () => {
  const r = await text({ messages: [user('Hi')], max_tokens: 5, ignore_eos: true, logprobs: true,
    top_logprobs: 3, ...greedy });
  const lp = r.choices[0].logprobs.content;
  assert.equal(lp.length, 5);
  for (const t of lp) {
    assert.equal(typeof t.token, 'string');
    assert.ok(t.logprob <= 0);
    assert.equal(t.top_logprobs.length, 3);
    // Greedy: the chosen token is the most likely one.
    assert.ok(Math.abs(t.top_logprobs[0].logprob - t.logprob) < 1e-5);
  }
});

check('a stop string\'s tokens are in neither the logprobs nor the usage', async () => {
  const params = { messages: [user('Write a line')], max_tokens: 24, ignore_eos: true, ...greedy,
    logprobs: true };
  const full = await text(params);
  const tokens = full.choices[0].logprobs.content.map((t) => t.token);
  assert.equal(tokens.length, 24);
  // A stop string that begins on a token boundary, a few tokens in: the tokens before it are the
  // answer's, every time (the scheduler may make one more before the stop takes effect).
  const cut = (at) => ({ at, stop: tokens.slice(at, at + 2).join(''),
    before: tokens.slice(0, at).join('') });
  const clean = ({ stop, before }) => stop.trim() && !(before + stop.slice(0, -1)).includes(stop);
  const { at, stop, before } = [4, 5, 6, 7, 8, 9, 10].map(cut).find(clean) || {};
  assert.ok(stop, `no clean cut in ${JSON.stringify(tokens)}`);
  for (let i = 0; i < 3; ++i) {
    const r = await text({ ...params, stop });
    assert.equal(r.choices[0].message.content, before);
    assert.deepEqual(r.choices[0].logprobs.content.map((t) => t.token), tokens.slice(0, at));
    assert.equal(r.usage.completion_tokens, at + 2);
  }
});

check('logit_bias rules a token out, or all but forces it', async () => {
  const params = { messages: [user('Hi')], max_tokens: 1, ignore_eos: true, ...greedy,
    logprobs: true };
  const first = (await text(params)).choices[0].logprobs.content[0].token;
  const ids = (await (await fetch(base + '/tokenize', {
    method: 'POST',
    headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ content: first, add_special: false }),
  })).json()).tokens;
  assert.equal(ids.length, 1, JSON.stringify({ first, ids }));
  const banned = await text({ ...params, logit_bias: { [ids[0]]: -100 } });
  assert.notEqual(banned.choices[0].logprobs.content[0].token, first);
  const forced = await text({ ...params, logit_bias: { 65: 100 } });
  assert.equal(forced.choices[0].logprobs.content[0].token,
    (await (await fetch(base + '/detokenize', {
      method: 'POST',
      headers: { Authorization: 'Bearer ' + key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ tokens: [65] }),
    })).json()).content);
  await assert.rejects(text({ ...params, logit_bias: { abc: 1 } }),
    (e) => e instanceof OpenAI.BadRequestError && /logit_bias/.test(e.message));
});

check('tools and a tool result go round trip', async () => {
  const tools = [{
    type: 'function',
    function: {
      name: 'get_weather',
      description: 'The weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  }];
  const r = await text({ messages: [user('Weather in Paris?')], tools, tool_choice: 'auto',
    max_tokens: 8 });
  assert.ok(['stop', 'length', 'tool_calls'].includes(r.choices[0].finish_reason));
  const call = { id: 'call_1', type: 'function',
    function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
  const r2 = await text({
    messages: [user('Weather in Paris?'), { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: '{"temp": 21}' }],
    tools, max_tokens: 8,
  });
  assert.equal(r2.choices[0].message.role, 'assistant');
  assert.ok(!/<tool_call>/.test(r2.choices[0].message.content || ''));
});

check('a forced tool_choice opens the answer with a call of that function', async () => {
  const tools = [{ type: 'function', function: { name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
  // The built-in template does not show the model its tools: a forced call is refused there.
  await assert.rejects(text({ messages: [user('Hi')], tools, tool_choice: 'required',
    max_tokens: 4 }), (e) => e instanceof OpenAI.BadRequestError && /tools/.test(e.message));
  // Qwen3.5's template shows them (thinking off: the call opens the answer).
  const qwen = new OpenAI({ baseURL: process.env.DELTALLM_TOOLS_URL + '/v1', apiKey: 'none',
    maxRetries: 0 });
  const askQwen = (params) => qwen.chat.completions.create({ model: 'qwen35', ...params });
  const ask = { messages: [user('Tell me a story')], tools, max_tokens: 40, ...greedy,
    chat_template_kwargs: { enable_thinking: false } };
  const free = await askQwen({ ...ask, tool_choice: 'auto' });
  assert.ok(!(free.choices[0].message.tool_calls || []).length);
  // The built-in model writes whatever follows the opening: a call when it closes one, else the
  // call's text given back as content.
  const opened = (m, name) => (m.tool_calls && m.tool_calls.length
    ? m.tool_calls[0].function.name.startsWith(name)
    : (m.content || '').startsWith('<tool_call>\n<function=' + name));
  const named = await askQwen({ ...ask,
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  assert.ok(opened(named.choices[0].message, 'get_weather'), JSON.stringify(named.choices[0]));
  // "required": a call of one of the listed functions, whole name and all.
  const required = await askQwen({ ...ask, tool_choice: 'required' });
  assert.ok(opened(required.choices[0].message, 'get_weather'), JSON.stringify(required.choices[0]));
  // Thinking switched off by the prompt: no thinking block opens before the call.
  assert.ok(!required.choices[0].message.reasoning_content, JSON.stringify(required.choices[0]));
  await assert.rejects(askQwen({ ...ask, tool_choice: { type: 'function', function: { name: 'nope' } } }),
    (e) => e instanceof OpenAI.BadRequestError && /nope/.test(e.message));
});

check('legacy completions answer and stream', async () => {
  const r = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6,
    temperature: 0, ignore_eos: true });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.usage.completion_tokens, 6);
  const s = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 6,
    temperature: 0, ignore_eos: true, stream: true });
  let t = '';
  for await (const c of s) for (const ch of c.choices) t += ch.text;
  assert.equal(t, r.choices[0].text);
});

check('client errors arrive as the client library\'s error types', async () => {
  await assert.rejects(text({ model: 'no-such-model', messages: [user('x')] }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404);
  await assert.rejects(text({ messages: [user('x')], max_tokens: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && /max_tokens/.test(e.message));
  await assert.rejects(text({ messages: [user('x')], n: 2 }),
    (e) => e instanceof OpenAI.BadRequestError);
  const bad = new OpenAI({ baseURL: base + '/v1', apiKey: 'sk-wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(), (e) => e instanceof OpenAI.AuthenticationError);
});

check('response_format json_object constrains the content to a JSON object', async () => {
  const ask = { messages: [user('Describe a cat.')], response_format: { type: 'json_object' } };
  const free = await text({ messages: ask.messages, max_tokens: 24, ...greedy });
  const g = await text({ ...ask, max_tokens: 64, ...greedy });
  assert.equal(g.choices[0].finish_reason, 'stop');
  const obj = JSON.parse(g.choices[0].message.content);
  assert.ok(obj !== null && typeof obj === 'object' && !Array.isArray(obj));
  assert.notEqual(free.choices[0].message.content, g.choices[0].message.content);
  // Sampled: an object from the first character; whole (and parsed) whenever the model ended.
  for (const seed of [1, 2, 3]) {
    const r = await text({ ...ask, max_tokens: 48, temperature: 1, seed });
    const c = r.choices[0].message.content;
    assert.ok(c.startsWith('{'), c);
    if (r.choices[0].finish_reason === 'stop') assert.equal(typeof JSON.parse(c), 'object');
  }
  let streamedText = '';
  for (const c of await streamed({ ...ask, max_tokens: 64, ...greedy }))
    for (const ch of c.choices) streamedText += ch.delta.content || '';
  assert.equal(streamedText, g.choices[0].message.content);
});

check('response_format json_schema holds the content to the schema', async () => {
  const schema = { type: 'object', additionalProperties: false, required: ['color', 'n', 'ok'],
    properties: { color: { enum: ['red', 'blue'] }, n: { type: 'integer' }, ok: { type: 'boolean' } } };
  const ask = { messages: [user('Name a color.')], max_tokens: 160,
    response_format: { type: 'json_schema', json_schema: { name: 'c', strict: true, schema } } };
  for (const seed of [1, 2, 3, 4]) {
    const r = await text({ ...ask, temperature: seed === 1 ? 0 : 1, seed });
    const c = r.choices[0].message.content;
    assert.ok(c.startsWith('{'), c);
    if (r.choices[0].finish_reason !== 'stop') continue;
    const o = JSON.parse(c);
    assert.deepEqual(Object.keys(o).sort(), ['color', 'n', 'ok']);
    assert.ok(['red', 'blue'].includes(o.color) && Number.isInteger(o.n) &&
      typeof o.ok === 'boolean', c);
  }
  await assert.rejects(text({ ...ask, response_format: { type: 'json_schema', json_schema: {
    name: 'c', schema: { type: 'object', properties: { a: { type: 'string', maxLength: 2 } } } } } }),
  (e) => e instanceof OpenAI.BadRequestError && /maxLength/.test(e.message));
});

check('reasoning comes back as reasoning_content, or not at all when thinking is off', async () => {
  const thinker = new OpenAI({ baseURL: process.env.DELTALLM_THINK_URL + '/v1', apiKey: 'none',
    maxRetries: 0 });
  const params = { model: 'thinker', messages: [user('Think first')], max_tokens: 10,
    ignore_eos: true, temperature: 0 };
  // The template opens <think>, so the text begins as reasoning.
  const r = await thinker.chat.completions.create(params);
  const m = r.choices[0].message;
  assert.equal(typeof m.reasoning_content, 'string');
  assert.ok(m.reasoning_content.length > 0);
  assert.ok(!/<\/?think>/.test(m.reasoning_content + (m.content || '')));
  const s = await thinker.chat.completions.create({ ...params, stream: true });
  let reasoning = '';
  let content = '';
  for await (const c of s) {
    for (const ch of c.choices) {
      reasoning += ch.delta.reasoning_content || '';
      content += ch.delta.content || '';
    }
  }
  assert.equal(reasoning, m.reasoning_content);
  assert.equal(content, m.content || '');
  const off = await thinker.chat.completions.create({ ...params,
    chat_template_kwargs: { enable_thinking: false } });
  assert.equal(off.choices[0].message.reasoning_content, undefined);
  assert.ok(off.choices[0].message.content.length > 0);
});

(async () => {
  let passed = 0;
  let failed = 0;
  for (const [name, fn] of checks) {
    const t = Date.now();
    try {
      await fn();
      passed++;
      console.log(`ok   ${name} (${((Date.now() - t) / 1000).toFixed(2)} s)`);
    } catch (e) {
      failed++;
      console.log(`FAIL ${name}: ${e && e.stack ? e.stack : e}`);
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  process.exit(failed ? 1 : 0);
})();
