#!/usr/bin/env node
// Interop checks: drive an A2A v1.0 server with the official JS SDK client (@a2a-js/sdk),
// over each binding the card declares.
//
// Usage: node interop.mjs BASE_URL [BINDING...]
//   BASE_URL  where the server's Agent Card lives, e.g. http://127.0.0.1:50051
//   BINDING   JSONRPC, HTTP+JSON and/or GRPC (default: all three, in that order)
//
// The client is built the way an application would build it: the SDK's card resolver
// (DefaultAgentCardResolver) fetches BASE_URL/.well-known/agent-card.json, and a ClientFactory
// that knows exactly one transport factory (JsonRpcTransportFactory, RestTransportFactory or
// GrpcTransportFactory from @a2a-js/sdk/client/grpc) picks that binding's interface from the
// card's supportedInterfaces and creates the transport for its URL. The same check bodies run
// for every binding; only the wire-level detail of an error is binding-specific (JSON-RPC
// error code, HTTP status, gRPC status).
//
// Output: one line per check, `ok - [js BINDING] <name>` or `FAIL - [js BINDING] <name>: <reason>`,
// then `N passed, M failed`. Exit status is non-zero if any check failed.

import { randomUUID } from 'node:crypto';

import {
  CancelTaskRequest,
  GetTaskRequest,
  ListTasksRequest,
  SendMessageRequest,
  SubscribeToTaskRequest,
  TaskState,
  Role,
} from '@a2a-js/sdk';
import {
  ClientFactory,
  DefaultAgentCardResolver,
  JsonRpcTransportFactory,
  RestTransportFactory,
} from '@a2a-js/sdk/client';
import { GrpcTransportFactory } from '@a2a-js/sdk/client/grpc';
import {
  TaskNotCancelableError,
  TaskNotFoundError,
  UnsupportedOperationError,
} from '@a2a-js/sdk/errors';

const RPC_TIMEOUT_MS = 15_000; // per unary call
const STREAM_LIMIT_MS = 30_000; // how long we wait for a stream to end on its own
const CHECK_TIMEOUT_MS = 60_000; // hard bound for one whole check

const TERMINAL = new Set([
  TaskState.TASK_STATE_COMPLETED,
  TaskState.TASK_STATE_FAILED,
  TaskState.TASK_STATE_CANCELED,
  TaskState.TASK_STATE_REJECTED,
]);

// binding -> how the SDK builds it, and which transport class it must end up with
const BINDINGS = {
  JSONRPC: { factory: () => new JsonRpcTransportFactory(), transport: 'JsonRpcTransport' },
  'HTTP+JSON': { factory: () => new RestTransportFactory(), transport: 'RestTransport' },
  GRPC: { factory: () => new GrpcTransportFactory(), transport: 'GrpcTransport' },
};

// A2A error class -> [JSON-RPC code, HTTP status, gRPC status] per spec §5.4 (A2A-NOTES §6.1)
const WIRE_CODES = new Map([
  [TaskNotFoundError, [-32001, 404, 5 /* NOT_FOUND */]],
  [TaskNotCancelableError, [-32002, 400, 9 /* FAILED_PRECONDITION */]],
  [UnsupportedOperationError, [-32004, 400, 9 /* FAILED_PRECONDITION */]],
]);

class CheckFailed extends Error {}

function expect(cond, msg) {
  if (!cond) throw new CheckFailed(msg);
}

// ---------------------------------------------------------------------------
// Where the client comes from: the server's Agent Card
// ---------------------------------------------------------------------------

class Target {
  constructor(binding, baseUrl, card) {
    this.binding = binding;
    this.baseUrl = baseUrl;
    this.card = card;
    this.clients = [];
  }

  factory() {
    return new ClientFactory({ transports: [BINDINGS[this.binding].factory()] });
  }

  /** An SDK client for this binding, created from the card (own connection). */
  async client() {
    const client = await this.factory().createFromAgentCard(this.card);
    this.clients.push(client);
    expectTransport(client, this.binding, 'ClientFactory.createFromAgentCard');
    return client;
  }

  close() {
    for (const c of this.clients.splice(0)) {
      try {
        c.transport?.grpcClient?.close?.();
      } catch {
        // cleanup only
      }
    }
  }
}

/** The client's transport is the SDK's v1.0 transport for `binding` (not a v0.3 Legacy* one). */
function expectTransport(client, binding, how) {
  const t = client.transport;
  // bundled class names may carry a leading underscore (`_RestTransport`)
  const name = t?.constructor?.name?.replace(/^_+/, '');
  const want = BINDINGS[binding].transport;
  expect(
    name === want && t.protocolName === binding && t.protocolVersion === '1.0',
    `${how} restricted to ${binding} picked ${t?.constructor?.name} ` +
      `(protocol ${t?.protocolName} ${t?.protocolVersion}), expected ${want} (1.0)`,
  );
}

// ---------------------------------------------------------------------------
// Requests
// ---------------------------------------------------------------------------

function sendRequest(text, { contextId = '', taskId = '', returnImmediately = false } = {}) {
  const json = {
    message: {
      messageId: randomUUID(),
      role: 'ROLE_USER',
      parts: [{ text }],
      contextId,
      taskId,
    },
  };
  if (returnImmediately) json.configuration = { returnImmediately: true };
  return SendMessageRequest.fromJSON(json);
}

const rpc = () => ({ signal: AbortSignal.timeout(RPC_TIMEOUT_MS) });

/** Drains an SDK stream (the iterator takes the abort signal); fails if it does not end in time. */
async function collect(makeStream, what, events = [], limitMs = STREAM_LIMIT_MS) {
  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), limitMs);
  try {
    for await (const ev of makeStream({ signal: abort.signal })) events.push(ev);
  } catch (e) {
    if (abort.signal.aborted) {
      throw new CheckFailed(
        `${what}: stream did not end within ${limitMs / 1000}s; got ${events.length} events: ${describeAll(events)}`,
      );
    }
    throw e;
  } finally {
    clearTimeout(timer);
  }
  return events;
}

// ---------------------------------------------------------------------------
// Formatting helpers
// ---------------------------------------------------------------------------

const st = (state) => (TaskState[state] ?? `state#${state}`).replace(/^TASK_STATE_/, '');
const texts = (parts) =>
  (parts ?? []).filter((p) => p.content?.$case === 'text').map((p) => p.content.value);
const kind = (ev) => ev?.payload?.$case;
const isMessage = (result) => result && 'messageId' in result;

function describe(ev) {
  const v = ev?.payload?.value;
  switch (kind(ev)) {
    case 'task':
      return `Task(${st(v.status?.state)}, artifacts=${JSON.stringify(v.artifacts.map((a) => texts(a.parts)))})`;
    case 'message':
      return `Message(${JSON.stringify(texts(v.parts))})`;
    case 'statusUpdate':
      return `Status(${st(v.status?.state)})`;
    case 'artifactUpdate':
      return `Artifact(${JSON.stringify(texts(v.artifact?.parts))}, append=${v.append}, lastChunk=${v.lastChunk})`;
    default:
      return `Empty(${JSON.stringify(ev)})`;
  }
}

function describeAll(events, limit = 16) {
  const shown = events.slice(0, limit).map(describe);
  if (events.length > limit) shown.push(`... (+${events.length - limit})`);
  return `[${shown.join(', ')}]`;
}

function describeErr(e) {
  if (!(e instanceof Error)) return String(e);
  let msg = `${e.name}: ${e.message}`;
  for (const k of ['envelopeCode', 'statusCode', 'status', 'metadata']) {
    if (e[k] !== undefined) msg += ` ${k}=${JSON.stringify(e[k])}`;
  }
  if (e.cause) msg += ` [caused by ${describeErr(e.cause)}]`;
  return msg;
}

const chunks = (lo, hi) => Array.from({ length: hi - lo }, (_, i) => `chunk ${lo + i}`);
const eq = (a, b) => JSON.stringify(a) === JSON.stringify(b);

// ---------------------------------------------------------------------------
// A2A errors, and their wire-level side per binding
// ---------------------------------------------------------------------------

/** The SDK error of class `cls` in `e` (JSON-RPC in-stream errors come wrapped as `cause`). */
function findError(e, cls) {
  for (let x = e; x; x = x.cause) if (x instanceof cls) return x;
  return undefined;
}

async function expectError(target, cls, what, call) {
  let got;
  try {
    got = await call();
  } catch (e) {
    if (e instanceof CheckFailed) throw e;
    const err = findError(e, cls);
    if (!err) throw new CheckFailed(`${what}: expected ${cls.name}, got ${describeErr(e)}`);
    const [jsonrpcCode, httpStatus, grpcStatus] = WIRE_CODES.get(cls);
    if (target.binding === 'JSONRPC') {
      expect(
        err.envelopeCode === jsonrpcCode,
        `${what}: ${cls.name} but JSON-RPC code ${err.envelopeCode}, expected ${jsonrpcCode}`,
      );
    } else if (target.binding === 'HTTP+JSON') {
      expect(
        err.statusCode === httpStatus,
        `${what}: ${cls.name} but HTTP status ${err.statusCode}, expected ${httpStatus}`,
      );
    } else {
      expect(
        err.status === grpcStatus,
        `${what}: ${cls.name} but gRPC status ${err.status}, expected ${grpcStatus}`,
      );
    }
    return;
  }
  const shown = Array.isArray(got) ? describeAll(got) : JSON.stringify(got)?.slice(0, 200);
  throw new CheckFailed(`${what}: succeeded (${shown}), expected ${cls.name}`);
}

// ---------------------------------------------------------------------------
// Stream verification shared by the streaming checks
// ---------------------------------------------------------------------------

/**
 * Checks the events that follow the initial Task of a stream: only status/artifact updates
 * for `task`; artifact updates carry exactly `expectedTexts` in order (one text part each,
 * same artifact id, append false only on the first when `firstAppend` is false, lastChunk
 * only on the last); the final event is a COMPLETED status update, nothing terminal before it.
 */
function verifyUpdatesAfterTask(events, task, { expectedTexts, firstAppend, artifactId, what }) {
  expect(events.length > 0, `${what}: no events after the initial Task`);
  const gotTexts = [];
  events.forEach((ev, i) => {
    const k = kind(ev);
    expect(
      k === 'statusUpdate' || k === 'artifactUpdate',
      `${what}: event #${i + 1} after the Task is ${describe(ev)}, expected only status/artifact updates; all: ${describeAll(events)}`,
    );
    const upd = ev.payload.value;
    expect(upd.taskId === task.id, `${what}: ${describe(ev)} has taskId ${upd.taskId}, expected ${task.id}`);
    expect(
      upd.contextId === task.contextId,
      `${what}: ${describe(ev)} has contextId ${upd.contextId}, expected ${task.contextId}`,
    );
    if (k === 'statusUpdate' && i !== events.length - 1) {
      expect(
        !TERMINAL.has(upd.status?.state),
        `${what}: terminal ${describe(ev)} is followed by more events: ${describeAll(events)}`,
      );
    }
    if (k === 'artifactUpdate') {
      const parts = texts(upd.artifact?.parts);
      expect(
        parts.length === 1 && upd.artifact.parts.length === 1,
        `${what}: artifact update with parts ${JSON.stringify(upd.artifact?.parts)}, expected one text part`,
      );
      const n = gotTexts.length;
      gotTexts.push(parts[0]);
      if (artifactId === undefined) {
        artifactId = upd.artifact.artifactId;
        expect(artifactId, `${what}: artifact update without artifactId`);
      }
      expect(
        upd.artifact.artifactId === artifactId,
        `${what}: chunk ${parts[0]} has artifactId ${upd.artifact.artifactId}, expected ${artifactId}`,
      );
      const wantAppend = firstAppend || n > 0;
      expect(Boolean(upd.append) === wantAppend, `${what}: ${describe(ev)}: expected append=${wantAppend}`);
      const wantLast = n === expectedTexts.length - 1;
      expect(Boolean(upd.lastChunk) === wantLast, `${what}: ${describe(ev)}: expected lastChunk=${wantLast}`);
    }
  });
  expect(
    eq(gotTexts, expectedTexts),
    `${what}: streamed chunk texts ${JSON.stringify(gotTexts)}, expected ${JSON.stringify(expectedTexts)}`,
  );
  const last = events[events.length - 1];
  expect(
    kind(last) === 'statusUpdate' && last.payload.value.status?.state === TaskState.TASK_STATE_COMPLETED,
    `${what}: last event is ${describe(last)}, expected Status(COMPLETED); all: ${describeAll(events)}`,
  );
}

function verifyInitialTask(events, what) {
  expect(events.length > 0, `${what}: stream ended without any event`);
  const first = events[0];
  expect(
    kind(first) === 'task',
    `${what}: first event is ${describe(first)}, expected a Task; all: ${describeAll(events)}`,
  );
  const task = first.payload.value;
  expect(task.id, `${what}: initial Task has an empty id`);
  expect(task.contextId, `${what}: initial Task has an empty contextId`);
  expect(!TERMINAL.has(task.status?.state), `${what}: initial Task is already ${st(task.status?.state)}`);
  return task;
}

async function sendTask(client, req) {
  const result = await client.sendMessage(req, rpc());
  expect(result && !isMessage(result), `SendMessage: expected a Task, got ${JSON.stringify(result)?.slice(0, 300)}`);
  return result;
}

// ---------------------------------------------------------------------------
// Checks (one body per check, run once per binding)
// ---------------------------------------------------------------------------

async function checkCard(target) {
  const ifaces = (target.card.supportedInterfaces ?? []).filter((i) => i.protocolBinding === target.binding);
  expect(
    ifaces.length > 0,
    `card declares no ${target.binding} interface; it has ${JSON.stringify(target.card.supportedInterfaces)}`,
  );
  expect(
    ifaces[0].protocolVersion === '1.0',
    `${target.binding} interface protocolVersion ${JSON.stringify(ifaces[0].protocolVersion)}, expected "1.0"`,
  );
  expect(target.card.capabilities?.streaming === true, 'card capabilities.streaming is not true');
  // The whole SDK path: createFromUrl resolves the card itself and picks the interface.
  const client = await target.factory().createFromUrl(target.baseUrl);
  target.clients.push(client);
  expectTransport(client, target.binding, 'ClientFactory.createFromUrl');
}

async function checkStreamingSend(target) {
  const client = await target.client();
  const events = await collect(
    (opts) => client.sendMessageStream(sendRequest('stream 5 100'), opts),
    'SendStreamingMessage',
  );
  const task = verifyInitialTask(events, 'SendStreamingMessage');
  verifyUpdatesAfterTask(events.slice(1), task, {
    expectedTexts: chunks(0, 5),
    firstAppend: false,
    artifactId: undefined,
    what: 'SendStreamingMessage',
  });
}

async function checkSubscribeMidStream(target) {
  const total = 10;
  const clientA = await target.client();
  const clientB = await target.client(); // separate connection
  const aEvents = [];
  let firstChunk;
  const sawChunk = new Promise((resolve) => {
    firstChunk = resolve;
  });
  const aDone = collect(
    (opts) =>
      (async function* () {
        for await (const ev of clientA.sendMessageStream(sendRequest(`stream ${total} 200`), opts)) {
          if (kind(ev) === 'artifactUpdate') firstChunk();
          yield ev;
        }
      })(),
    'client A SendStreamingMessage',
    aEvents,
  );
  aDone.catch(() => {}); // observed below
  const first = await Promise.race([
    sawChunk.then(() => 'chunk'),
    aDone.then(
      () => 'ended',
      (e) => e,
    ),
    new Promise((resolve) => setTimeout(() => resolve('timeout'), 15_000)),
  ]);
  if (first !== 'chunk') {
    if (first instanceof Error) {
      throw new CheckFailed(`client A SendStreamingMessage failed before the first chunk: ${describeErr(first)}`);
    }
    throw new CheckFailed(`client A saw no artifact chunk (${first}); got ${describeAll(aEvents)}`);
  }
  const task = verifyInitialTask(aEvents, 'client A SendStreamingMessage');

  const bEvents = await collect(
    (opts) => clientB.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: task.id }), opts),
    'client B SubscribeToTask',
  );
  expect(bEvents.length > 0, 'SubscribeToTask: stream ended without any event');
  expect(
    kind(bEvents[0]) === 'task',
    `SubscribeToTask: first event is ${describe(bEvents[0])}, expected a Task snapshot; all: ${describeAll(bEvents)}`,
  );
  const snap = bEvents[0].payload.value;
  expect(snap.id === task.id, `SubscribeToTask: snapshot id ${snap.id}, expected ${task.id}`);
  expect(
    !TERMINAL.has(snap.status?.state),
    `SubscribeToTask: snapshot already ${st(snap.status?.state)} (subscribed right after the first chunk of a 2 s stream)`,
  );
  expect(
    snap.artifacts.length === 1,
    `SubscribeToTask: snapshot has ${snap.artifacts.length} artifacts, expected 1 holding the chunks so far`,
  );
  const snapTexts = texts(snap.artifacts[0].parts);
  const k = snapTexts.length;
  expect(
    k >= 1 && eq(snapTexts, chunks(0, k)),
    `SubscribeToTask: snapshot artifact texts ${JSON.stringify(snapTexts)}, expected chunk 0..chunk k-1 with k >= 1`,
  );
  verifyUpdatesAfterTask(bEvents.slice(1), snap, {
    expectedTexts: chunks(k, total),
    firstAppend: true,
    artifactId: snap.artifacts[0].artifactId,
    what: `SubscribeToTask (snapshot held ${k} chunks)`,
  });
  const streamed = bEvents
    .slice(1)
    .filter((e) => kind(e) === 'artifactUpdate')
    .map((e) => texts(e.payload.value.artifact.parts)[0]);
  expect(
    eq([...snapTexts, ...streamed], chunks(0, total)),
    `snapshot ${JSON.stringify(snapTexts)} + streamed ${JSON.stringify(streamed)} != chunk 0..${total - 1}`,
  );

  // Client A's own stream must be unaffected and complete too.
  await aDone;
  verifyUpdatesAfterTask(aEvents.slice(1), task, {
    expectedTexts: chunks(0, total),
    firstAppend: false,
    artifactId: undefined,
    what: 'client A SendStreamingMessage',
  });
}

async function checkGetTask(target) {
  const client = await target.client();
  const task = await sendTask(client, sendRequest('hello'));
  expect(
    task.status?.state === TaskState.TASK_STATE_COMPLETED,
    `SendMessage("hello"): state ${st(task.status?.state)}, expected COMPLETED`,
  );
  let arts = task.artifacts.map((a) => texts(a.parts));
  expect(eq(arts, [['hello']]), `SendMessage("hello"): artifacts ${JSON.stringify(arts)}, expected [["hello"]]`);

  const got = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }), rpc());
  expect(got.id === task.id, `GetTask: id ${got.id}, expected ${task.id}`);
  expect(
    got.status?.state === TaskState.TASK_STATE_COMPLETED,
    `GetTask: state ${st(got.status?.state)}, expected COMPLETED`,
  );
  arts = got.artifacts.map((a) => texts(a.parts));
  expect(eq(arts, [['hello']]), `GetTask: artifacts ${JSON.stringify(arts)}, expected [["hello"]]`);

  const h0 = await client.getTask(GetTaskRequest.fromJSON({ id: task.id, historyLength: 0 }), rpc());
  expect(h0.history.length === 0, `GetTask(historyLength=0): ${h0.history.length} history messages, expected 0`);
  const h1 = await client.getTask(GetTaskRequest.fromJSON({ id: task.id, historyLength: 1 }), rpc());
  expect(h1.history.length === 1, `GetTask(historyLength=1): ${h1.history.length} history messages, expected 1`);
}

async function checkListTasks(target) {
  const contextId = randomUUID();
  const client = await target.client();
  const t1 = await sendTask(client, sendRequest('list first', { contextId }));
  // keep the two status timestamps apart so newest-first is unambiguous
  await new Promise((r) => setTimeout(r, 50));
  const t2 = await sendTask(client, sendRequest('list second', { contextId }));
  for (const t of [t1, t2]) {
    expect(
      t.contextId === contextId,
      `SendMessage: task contextId ${t.contextId}, expected the client-chosen ${contextId}`,
    );
  }
  const want = [t2.id, t1.id];

  const full = await client.listTasks(ListTasksRequest.fromJSON({ contextId }), rpc());
  let got = full.tasks.map((t) => t.id);
  expect(eq(got, want), `ListTasks(contextId): ids ${JSON.stringify(got)}, expected ${JSON.stringify(want)} (newest first)`);
  expect(full.totalSize === 2, `ListTasks(contextId): totalSize ${full.totalSize}, expected 2`);
  expect(full.nextPageToken === '', `ListTasks(contextId): nextPageToken ${JSON.stringify(full.nextPageToken)}, expected empty`);

  const p1 = await client.listTasks(ListTasksRequest.fromJSON({ contextId, pageSize: 1 }), rpc());
  got = p1.tasks.map((t) => t.id);
  expect(eq(got, [t2.id]), `ListTasks page 1: ids ${JSON.stringify(got)}, expected ${JSON.stringify([t2.id])}`);
  expect(p1.nextPageToken !== '', 'ListTasks page 1: empty nextPageToken');
  expect(p1.totalSize === 2, `ListTasks page 1: totalSize ${p1.totalSize}, expected 2`);
  expect(p1.pageSize === 1, `ListTasks page 1: pageSize ${p1.pageSize}, expected 1`);

  const p2 = await client.listTasks(
    ListTasksRequest.fromJSON({ contextId, pageSize: 1, pageToken: p1.nextPageToken }),
    rpc(),
  );
  got = p2.tasks.map((t) => t.id);
  expect(eq(got, [t1.id]), `ListTasks page 2: ids ${JSON.stringify(got)}, expected ${JSON.stringify([t1.id])}`);
  expect(p2.nextPageToken === '', `ListTasks page 2: nextPageToken ${JSON.stringify(p2.nextPageToken)}, expected empty`);
  expect(p2.totalSize === 2, `ListTasks page 2: totalSize ${p2.totalSize}, expected 2`);
}

async function checkCancel(target) {
  const client = await target.client();
  const started = Date.now();
  const task = await sendTask(client, sendRequest('stream 100 200', { returnImmediately: true }));
  const elapsed = (Date.now() - started) / 1000;
  expect(elapsed < 5, `SendMessage(returnImmediately=true) took ${elapsed.toFixed(1)}s (a 20 s task): did not return immediately`);
  expect(
    !TERMINAL.has(task.status?.state),
    `SendMessage(returnImmediately=true): state ${st(task.status?.state)}, expected a non-terminal state`,
  );

  const canceled = await client.cancelTask(CancelTaskRequest.fromJSON({ id: task.id }), rpc());
  expect(canceled.id === task.id, `CancelTask: returned task id ${canceled.id}, expected ${task.id}`);
  expect(
    canceled.status?.state === TaskState.TASK_STATE_CANCELED,
    `CancelTask: returned state ${st(canceled.status?.state)}, expected CANCELED`,
  );

  const got = await client.getTask(GetTaskRequest.fromJSON({ id: task.id }), rpc());
  expect(
    got.status?.state === TaskState.TASK_STATE_CANCELED,
    `GetTask after cancel: state ${st(got.status?.state)}, expected CANCELED`,
  );

  await expectError(target, TaskNotCancelableError, 'second CancelTask', () =>
    client.cancelTask(CancelTaskRequest.fromJSON({ id: task.id }), rpc()),
  );
}

async function checkUnknownTask(target) {
  const client = await target.client();
  await expectError(target, TaskNotFoundError, 'GetTask("does-not-exist")', () =>
    client.getTask(GetTaskRequest.fromJSON({ id: 'does-not-exist' }), rpc()),
  );
  await expectError(target, TaskNotFoundError, 'CancelTask("does-not-exist")', () =>
    client.cancelTask(CancelTaskRequest.fromJSON({ id: 'does-not-exist' }), rpc()),
  );
  await expectError(target, TaskNotFoundError, 'SubscribeToTask("does-not-exist")', () =>
    collect(
      (opts) => client.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: 'does-not-exist' }), opts),
      'SubscribeToTask',
    ),
  );
}

async function checkInputRequired(target) {
  const client = await target.client();
  const task = await sendTask(client, sendRequest('input'));
  expect(
    task.status?.state === TaskState.TASK_STATE_INPUT_REQUIRED,
    `SendMessage("input"): state ${st(task.status?.state)}, expected INPUT_REQUIRED`,
  );
  const question = texts(task.status?.message?.parts);
  expect(question.some(Boolean), 'SendMessage("input"): INPUT_REQUIRED status carries no question text');

  const done = await sendTask(client, sendRequest('blue', { taskId: task.id, contextId: task.contextId }));
  expect(done.id === task.id, `follow-up SendMessage: task id ${done.id}, expected ${task.id}`);
  expect(
    done.status?.state === TaskState.TASK_STATE_COMPLETED,
    `follow-up SendMessage("blue"): state ${st(done.status?.state)}, expected COMPLETED`,
  );
  const arts = done.artifacts.map((a) => texts(a.parts));
  expect(
    arts.some((a) => a.includes('blue')),
    `follow-up SendMessage("blue"): artifacts ${JSON.stringify(arts)}, expected one echoing "blue"`,
  );
}

async function checkDirectMessage(target) {
  const client = await target.client();
  const msg = await client.sendMessage(sendRequest('message hi there'), rpc());
  expect(isMessage(msg), `SendMessage("message hi there"): got ${JSON.stringify(msg)?.slice(0, 300)}, expected a Message`);
  expect(eq(texts(msg.parts), ['hi there']), `direct Message texts ${JSON.stringify(texts(msg.parts))}, expected ["hi there"]`);
  expect(msg.role === Role.ROLE_AGENT, `direct Message role ${Role[msg.role] ?? msg.role}, expected ROLE_AGENT`);
  expect(msg.messageId, 'direct Message has an empty messageId');
}

async function checkDirectMessageStreaming(target) {
  const client = await target.client();
  const events = await collect(
    (opts) => client.sendMessageStream(sendRequest('message hi there'), opts),
    'SendStreamingMessage',
  );
  expect(
    events.length === 1 && kind(events[0]) === 'message',
    `SendStreamingMessage("message hi there"): got ${describeAll(events)}, expected exactly one Message`,
  );
  const got = texts(events[0].payload.value.parts);
  expect(eq(got, ['hi there']), `direct Message texts ${JSON.stringify(got)}, expected ["hi there"]`);
}

async function checkSubscribeTerminal(target) {
  const client = await target.client();
  const task = await sendTask(client, sendRequest('hello again'));
  expect(
    task.status?.state === TaskState.TASK_STATE_COMPLETED,
    `SendMessage: state ${st(task.status?.state)}, expected COMPLETED`,
  );
  await expectError(target, UnsupportedOperationError, 'SubscribeToTask on a COMPLETED task', () =>
    collect((opts) => client.resubscribeTask(SubscribeToTaskRequest.fromJSON({ id: task.id }), opts), 'SubscribeToTask'),
  );
}

const CHECKS = [
  ['agent card declares this binding; ClientFactory picks it', checkCard],
  ['streaming send: stream 5 100', checkStreamingSend],
  ['subscribe mid-stream from a second client', checkSubscribeMidStream],
  ['get task with historyLength', checkGetTask],
  ['list tasks by contextId with pagination', checkListTasks],
  ['cancel task, then cancel again -> TaskNotCancelableError', checkCancel],
  ['unknown task -> TaskNotFoundError (get, cancel, subscribe)', checkUnknownTask],
  ['input-required multi-turn', checkInputRequired],
  ['direct message reply (sendMessage)', checkDirectMessage],
  ['direct message reply (sendMessageStream)', checkDirectMessageStreaming],
  ['subscribe to a terminal task -> UnsupportedOperationError', checkSubscribeTerminal],
];

async function runCheck(name, fn, target) {
  const label = `[js ${target.binding}] ${name}`;
  let timer;
  try {
    await Promise.race([
      fn(target),
      new Promise((_, reject) => {
        timer = setTimeout(
          () => reject(new CheckFailed(`check did not finish within ${CHECK_TIMEOUT_MS / 1000}s`)),
          CHECK_TIMEOUT_MS,
        );
      }),
    ]);
  } catch (e) {
    const reason = e instanceof CheckFailed ? e.message : describeErr(e);
    console.log(`FAIL - ${label}: ${reason}`);
    return false;
  } finally {
    clearTimeout(timer);
    target.close();
  }
  console.log(`ok - ${label}`);
  return true;
}

async function main(argv) {
  const [baseUrlArg, ...bindingArgs] = argv;
  const bindings = bindingArgs.length ? bindingArgs : Object.keys(BINDINGS);
  if (!baseUrlArg || bindings.some((b) => !(b in BINDINGS))) {
    console.error(`usage: node interop.mjs BASE_URL [${Object.keys(BINDINGS).join('|')} ...]`);
    return 2;
  }
  const baseUrl = baseUrlArg.replace(/\/+$/, '');
  let passed = 0;
  let failed = 0;
  let card;
  try {
    card = await new DefaultAgentCardResolver().resolve(baseUrl);
  } catch (e) {
    console.log(`FAIL - [js] fetch the Agent Card from ${baseUrl}: ${describeErr(e)}`);
    console.log('0 passed, 1 failed');
    return 1;
  }
  for (const binding of bindings) {
    const target = new Target(binding, baseUrl, card);
    for (const [name, fn] of CHECKS) {
      if (await runCheck(name, fn, target)) passed += 1;
      else failed += 1;
    }
  }
  console.log(`${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

// Exit explicitly: open gRPC channels or keep-alive sockets must not keep the process alive.
main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    console.log(`FAIL - [js] interop script crashed: ${describeErr(e)}`);
    console.log('0 passed, 1 failed');
    process.exit(1);
  },
);
