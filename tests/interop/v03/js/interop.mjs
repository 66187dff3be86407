#!/usr/bin/env node
// Interop checks for A2A v0.3 clients: the official JS SDK @a2a-js/sdk@0.3.14.
//
// Usage: node interop.mjs BASE_URL [BINDING...]   (JSONRPC and/or HTTP+JSON; default both)
//
// The client is built as a v0.3 application builds it: a ClientFactory that knows one
// transport (JsonRpcTransportFactory or RestTransportFactory) resolves
// BASE_URL/.well-known/agent-card.json (without A2A-Version, so the server answers with the
// card carrying the v0.3 fields) and connects to that binding's interface in the card.
// Errors are checked by the SDK's own mapping of the A2A error codes.
//
// Output: `ok - [v0.3 js BINDING] <name>` or `FAIL - …: <reason>` per check, then
// `N passed, M failed`. Exit status is non-zero if any check failed.

import { randomUUID } from 'node:crypto';

import {
  ClientFactory,
  JsonRpcTransport,
  JsonRpcTransportFactory,
  RestTransport,
  RestTransportFactory,
} from '@a2a-js/sdk/client';

const FACTORIES = { JSONRPC: () => new JsonRpcTransportFactory(), 'HTTP+JSON': () => new RestTransportFactory() };
let TAG = '[v0.3 js]';
const results = [];

function assert(condition, what) {
  if (!condition) throw new Error(`assertion failed: ${what}`);
}

function message(text, task) {
  return {
    kind: 'message',
    messageId: randomUUID(),
    role: 'user',
    parts: [{ kind: 'text', text }],
    ...(task ? { taskId: task.id, contextId: task.contextId } : {}),
  };
}

/** The A2A error code an SDK error carries: its code, the cause of a stream error, or the
 * SDK's error class for it (the REST transport maps codes to classes). */
const CLASSES = { TaskNotFoundError: -32001, TaskNotCancelableError: -32002, UnsupportedOperationError: -32004 };
function codeOf(error) {
  for (let e = error; e; e = e.cause) {
    if (CLASSES[e.constructor?.name] !== undefined) return CLASSES[e.constructor.name];
    const code = e.errorResponse?.error?.code;
    if (typeof code === 'number') return code;
    const match = /\(Code: (-?\d+)\)/.exec(e.message ?? '');
    if (match) return Number(match[1]);
  }
  return undefined;
}

async function expectCode(call, code) {
  try {
    await call();
  } catch (error) {
    assert(codeOf(error) === code, `code ${code}, got ${codeOf(error)}: ${error.message}`);
    return;
  }
  throw new Error(`expected error ${code}, the call succeeded`);
}

async function check(name, body) {
  try {
    await Promise.race([
      body(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timed out after 30s')), 30_000).unref()),
    ]);
    console.log(`ok - ${TAG} ${name}`);
    results.push(true);
  } catch (error) {
    console.log(`FAIL - ${TAG} ${name}: ${error?.stack?.split('\n')[0] ?? error}`);
    results.push(false);
  }
}

async function collect(stream) {
  const items = [];
  for await (const item of stream) items.push(item);
  return items;
}

async function main(baseUrl, binding) {
  TAG = `[v0.3 js ${binding}]`;
  const factory = new ClientFactory({ transports: [FACTORIES[binding]()] });
  let client;
  await check('card: the factory resolves the v0.3 card and connects to the binding', async () => {
    client = await factory.createFromUrl(baseUrl);
    const card = await client.getAgentCard();
    assert(card.preferredTransport === 'JSONRPC', `preferredTransport ${card.preferredTransport}`);
    assert(card.protocolVersion.startsWith('0.3'), `protocolVersion ${card.protocolVersion}`);
    assert(card.url, 'url');
    const expected = binding === 'JSONRPC' ? JsonRpcTransport : RestTransport;
    assert(client.transport instanceof expected, `transport ${client.transport?.constructor?.name}`);
  });
  if (!client) return;

  const send = (text, task, configuration) =>
    client.sendMessage({ message: message(text, task), ...(configuration ? { configuration } : {}) });

  await check('message/send (blocking) returns the completed Task', async () => {
    const task = await send('hello');
    assert(task.kind === 'task' && task.status.state === 'completed', JSON.stringify(task.status));
    assert(task.artifacts?.[0]?.parts?.[0]?.kind === 'text', 'a text artifact');
  });
  await check('message/send answered by a Message', async () => {
    const reply = await send('message hi');
    assert(reply.kind === 'message' && reply.role === 'agent', JSON.stringify(reply));
  });
  await check('message/stream: Task first, 3 chunks, final status', async () => {
    const items = await collect(client.sendMessageStream({ message: message('stream 3 20') }));
    assert(items[0].kind === 'task', `first is ${items[0].kind}`);
    assert(items.filter((i) => i.kind === 'artifact-update').length === 3, 'three chunks');
    const last = items.at(-1);
    assert(last.kind === 'status-update' && last.final && last.status.state === 'completed', JSON.stringify(last));
  });
  await check('tasks/resubscribe mid-stream: snapshot first, no gap, final', async () => {
    const started = await send('stream 6 150', undefined, { blocking: false });
    assert(started.status.state !== 'completed', 'non-blocking send returns early');
    await new Promise((resolve) => setTimeout(resolve, 350));
    const items = await collect(client.resubscribeTask({ id: started.id }));
    assert(items[0].kind === 'task' && items[0].status.state === 'working', JSON.stringify(items[0].status));
    const inSnapshot = items[0].artifacts?.[0]?.parts?.length ?? 0;
    const streamed = items.filter((i) => i.kind === 'artifact-update').length;
    assert(inSnapshot + streamed === 6, `${inSnapshot} in the snapshot + ${streamed} streamed`);
    assert(items.at(-1).final === true, 'ends with final');
  });
  await check('tasks/get and tasks/cancel', async () => {
    const waiting = await send('input');
    assert(waiting.status.state === 'input-required', waiting.status.state);
    const got = await client.getTask({ id: waiting.id });
    assert(got.id === waiting.id && got.kind === 'task', 'same task');
    const canceled = await client.cancelTask({ id: waiting.id });
    assert(canceled.status.state === 'canceled', canceled.status.state);
  });
  await check('tasks/pushNotificationConfig set/get/list/delete', async () => {
    const task = await send('input');
    const config = { taskId: task.id, pushNotificationConfig: { id: 'p1', url: 'http://127.0.0.1:9/hook' } };
    const saved = await client.setTaskPushNotificationConfig(config);
    assert(saved.pushNotificationConfig.id === 'p1', JSON.stringify(saved));
    const got = await client.getTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: 'p1' });
    assert(got.pushNotificationConfig.url === 'http://127.0.0.1:9/hook', JSON.stringify(got));
    const listed = await client.listTaskPushNotificationConfig({ id: task.id });
    assert(listed.length === 1 && listed[0].pushNotificationConfig.id === 'p1', JSON.stringify(listed));
    await client.deleteTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: 'p1' });
    await expectCode(() => client.getTaskPushNotificationConfig({ id: task.id, pushNotificationConfigId: 'p1' }), -32001);
  });
  await check('unknown task: get, cancel and resubscribe give -32001', async () => {
    await expectCode(() => client.getTask({ id: 'no-such-task' }), -32001);
    await expectCode(() => client.cancelTask({ id: 'no-such-task' }), -32001);
    await expectCode(() => collect(client.resubscribeTask({ id: 'no-such-task' })), -32001);
  });
  await check('terminal task: cancel -32002, resubscribe -32004', async () => {
    const task = await send('hello');
    await expectCode(() => client.cancelTask({ id: task.id }), -32002);
    await expectCode(() => collect(client.resubscribeTask({ id: task.id })), -32004);
  });
}

function finish() {
  const passed = results.filter(Boolean).length;
  console.log(`${passed} passed, ${results.length - passed} failed`);
  return passed === results.length ? 0 : 1;
}

const [baseUrl, ...asked] = process.argv.slice(2);
const bindings = asked.length ? asked : Object.keys(FACTORIES);
if (!baseUrl || bindings.some((b) => !FACTORIES[b])) {
  console.error('usage: node interop.mjs BASE_URL [JSONRPC|HTTP+JSON...]');
  process.exit(2);
}
for (const binding of bindings) await main(baseUrl, binding);
process.exitCode = finish();
