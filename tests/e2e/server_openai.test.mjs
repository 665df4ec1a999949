// End-to-end: `folio serve` on the bundled tiny model, driven by the official `openai` npm client.
// Run by CTest (tests/e2e/CMakeLists.txt) with FOLIO_BINARY and FOLIO_MODEL_DIR set. Every loop is
// bounded in count and time; the server listens on 127.0.0.1 only.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import OpenAI from 'openai';

const binary = process.env.FOLIO_BINARY;
const modelDir = process.env.FOLIO_MODEL_DIR;
const golden = JSON.parse(readFileSync(`${modelDir}/golden.json`, 'utf8'));
let server, baseURL, client;
const API_KEY = 'e2e-secret-key';

before(async () => {
  server = spawn(binary, ['serve', '--model', modelDir, '--port', '0', '--api-key', API_KEY,
    '--served-model-name', 'tiny', '--num-kv-blocks', '512', '--max-num-seqs', '64'],
    { stdio: ['ignore', 'ignore', 'pipe'] });
  baseURL = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('server did not start in 60 s')), 60000);
    let log = '';
    server.stderr.on('data', (d) => {
      log += d.toString();
      const m = log.match(/on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    });
    server.on('exit', (code) => reject(new Error(`server exited ${code}: ${log}`)));
  });
  client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: API_KEY, maxRetries: 0, timeout: 60000 });
});

after(async () => {
  if (!server) return;
  const exited = new Promise((r) => server.on('exit', (code) => r(code)));
  server.kill('SIGTERM');
  assert.equal(await exited, 0, 'SIGTERM ends the server with exit code 0');
});

async function metric(name) {
  const res = await fetch(`${baseURL}/metrics`, { headers: { authorization: `Bearer ${API_KEY}` } });
  const text = await res.text();
  const line = text.split('\n').find((l) => l.startsWith(name + '{') || l.startsWith(name + ' '));
  return line ? Number(line.split(' ').pop()) : NaN;
}

async function waitIdle() {
  for (let i = 0; i < 100; i++) {
    if ((await metric('folio:num_requests_running')) === 0 &&
        (await metric('folio:kv_cache_usage_perc')) === 0) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.fail('the engine did not return to idle with an empty KV cache');
}

test('completions match transformers greedy text, streamed equals non-streamed', async () => {
  for (const c of golden.completions.slice(0, 3)) {
    const r = await client.completions.create({ model: 'tiny', prompt: c.prompt, max_tokens: 16,
      temperature: 0 });
    assert.equal(r.choices[0].text, c.text);
    assert.equal(r.usage.completion_tokens, 16);
    assert.equal(r.usage.prompt_tokens, c.prompt_ids.length);
    const stream = await client.completions.create({ model: 'tiny', prompt: c.prompt,
      max_tokens: 16, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    assert.equal(text, c.text);
  }
});

test('chat matches the golden chat turn, streamed equals non-streamed', async () => {
  const messages = golden.chat.messages;
  const r = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 16,
    temperature: 0 });
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(r.choices[0].message.content, golden.chat.text);
  assert.equal(r.usage.prompt_tokens, golden.chat.prompt_ids.length);
  const stream = await client.chat.completions.create({ model: 'tiny', messages, max_tokens: 16,
    temperature: 0, stream: true, stream_options: { include_usage: true } });
  let text = '', role = null, usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    const d = chunk.choices[0]?.delta;
    if (d?.role) role = d.role;
    text += d?.content ?? '';
  }
  assert.equal(role, 'assistant');
  assert.equal(text, golden.chat.text);
  assert.equal(usage.completion_tokens, 16);
});

test('n > 1 with a seed, logprobs and stop strings', async () => {
  const r = await client.completions.create({ model: 'tiny', prompt: 'Hello', max_tokens: 8,
    temperature: 0.9, n: 3, seed: 42, logprobs: 2 });
  assert.equal(r.choices.length, 3);
  for (const ch of r.choices) {
    assert.equal(ch.logprobs.tokens.length, 8);
    assert.ok(ch.logprobs.top_logprobs.every((t) => Object.keys(t).length >= 2));
  }
  const again = await client.completions.create({ model: 'tiny', prompt: 'Hello', max_tokens: 8,
    temperature: 0.9, n: 3, seed: 42, logprobs: 2 });
  assert.deepEqual(again.choices.map((c) => c.text), r.choices.map((c) => c.text));

  const full = golden.completions[0].text;
  const stopAt = full.slice(4, 8);
  const s = await client.completions.create({ model: 'tiny', prompt: golden.completions[0].prompt,
    max_tokens: 16, temperature: 0, stop: [stopAt] });
  assert.equal(s.choices[0].finish_reason, 'stop');
  assert.equal(s.choices[0].text, full.slice(0, full.indexOf(stopAt)));
  const chat = await client.chat.completions.create({ model: 'tiny', messages: golden.chat.messages,
    max_tokens: 4, temperature: 0, logprobs: true, top_logprobs: 3 });
  assert.equal(chat.choices[0].logprobs.content.length, 4);
  assert.equal(chat.choices[0].logprobs.content[0].top_logprobs.length, 3);
});

test('bad input is answered with OpenAI-shaped errors and the server keeps serving', async () => {
  await assert.rejects(client.completions.create({ model: 'nope', prompt: 'x' }),
    (e) => e.status === 404);
  await assert.rejects(client.completions.create({ model: 'tiny', prompt: 'x', max_tokens: 5000 }),
    (e) => e.status === 400 && /maximum context length is 4096 tokens/.test(e.message));
  const bad = await fetch(`${baseURL}/v1/completions`, { method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${API_KEY}` },
    body: '{"prompt": "x", "max_tokens": "10"}' });
  assert.equal(bad.status, 400);
  const err = await bad.json();
  assert.ok(err.error.message && err.error.type);
  const noKey = await fetch(`${baseURL}/v1/models`);
  assert.equal(noKey.status, 401);
  const health = await fetch(`${baseURL}/health`);
  assert.equal(health.status, 200);
  const ok = await client.completions.create({ model: 'tiny', prompt: 'Hi', max_tokens: 2 });
  assert.equal(ok.choices[0].finish_reason, 'length');
});

test('a client that disconnects mid-stream frees its KV blocks', async () => {
  const controller = new AbortController();
  const stream = await client.completions.create({ model: 'tiny', prompt: 'Once upon a time',
    max_tokens: 3000, temperature: 0, ignore_eos: true, stream: true },
    { signal: controller.signal });
  let chunks = 0;
  try {
    for await (const _ of stream) { if (++chunks === 5) controller.abort(); }
  } catch (e) {
    assert.ok(controller.signal.aborted, `unexpected error: ${e}`);
  }
  assert.ok(chunks >= 5 && chunks < 3000, `read ${chunks} chunks`);
  await waitIdle();
});

test('bounded soak: concurrent streams with random cancellations all end cleanly', async () => {
  const deadline = Date.now() + 8000;
  let seed = 7;
  const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
  let completed = 0, cancelled = 0;
  const one = async (i) => {
    const controller = new AbortController();
    const cancelAfter = rand() < 0.3 ? 1 + Math.floor(rand() * 5) : -1;
    try {
      const stream = await client.completions.create({ model: 'tiny', prompt: `request ${i}`,
        max_tokens: 4 + Math.floor(rand() * 24), temperature: 0.7, seed: i, stream: true },
        { signal: controller.signal });
      let n = 0, finish = null;
      for await (const chunk of stream) {
        if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
        if (++n === cancelAfter) controller.abort();
      }
      assert.ok(finish === 'length' || finish === 'stop', `finish ${finish}`);
      completed++;
    } catch (e) {
      assert.ok(controller.signal.aborted, `unexpected error: ${e}`);
      cancelled++;
    }
  };
  let i = 0;
  while (Date.now() < deadline && i < 600) {
    await Promise.all(Array.from({ length: 100 }, () => one(i++)));
  }
  assert.ok(completed > 0 && cancelled > 0, `completed ${completed}, cancelled ${cancelled}`);
  await waitIdle();
  assert.equal((await fetch(`${baseURL}/health`)).status, 200);
});
