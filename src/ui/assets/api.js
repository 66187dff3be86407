// The server's own HTTP+JSON routes, as any client calls them, relative to where the page is
// served (so a proxy's path prefix is kept).
export const uiRoot = new URL('../', import.meta.url);
export const apiRoot = new URL('../../', import.meta.url);

const KIND = 'a2a-ui.auth-kind';
const VALUE = 'a2a-ui.auth-value';

/** The credential this tab signed in with (session storage only, never in a URL). */
export function credential() {
  return { kind: sessionStorage.getItem(KIND) || 'bearer', value: sessionStorage.getItem(VALUE) || '' };
}

export function setCredential(kind, value) {
  if (value) {
    sessionStorage.setItem(KIND, kind);
    sessionStorage.setItem(VALUE, value);
  } else {
    sessionStorage.removeItem(KIND);
    sessionStorage.removeItem(VALUE);
  }
}

/** The auth header, only when a credential is set. */
export function authHeaders() {
  const { kind, value } = credential();
  if (!value) return {};
  return kind === 'apikey' ? { 'X-API-Key': value } : { Authorization: `Bearer ${value}` };
}

/** An error the server answered with (google.rpc.Status JSON). */
export class ApiError extends Error {
  constructor(status, body) {
    const error = (body && body.error) || {};
    const info = (error.details || []).find((d) => d && d.reason) || {};
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.reason = info.reason || error.status || '';
  }
}

export function url(path, query = {}) {
  // `./`: a path like `message:send` would otherwise read as a URL of scheme `message:`.
  const u = new URL(`./${path}`, apiRoot);
  for (const [k, v] of Object.entries(query)) {
    if (v !== undefined && v !== null && v !== '') u.searchParams.set(k, v);
  }
  return u;
}

async function call(method, path, { query, body } = {}) {
  const headers = { Accept: 'application/json', ...authHeaders() };
  if (body !== undefined) headers['Content-Type'] = 'application/json';
  const response = await fetch(url(path, query), {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
  });
  const text = await response.text();
  let json = {};
  try {
    json = text ? JSON.parse(text) : {};
  } catch {
    json = { error: { message: text.slice(0, 200) } };
  }
  if (!response.ok) throw new ApiError(response.status, json);
  return json;
}

export const taskPath = (id) => `tasks/${encodeURIComponent(id)}`;
export const taskPage = (id) => new URL(`tasks/${encodeURIComponent(id)}`, uiRoot).href;

export const listTasks = (query) => call('GET', 'tasks', { query });
export const getTask = (id) => call('GET', taskPath(id));
export const cancelTask = (id) => call('POST', `${taskPath(id)}:cancel`, { body: {} });
export const listPushConfigs = (id) => call('GET', `${taskPath(id)}/pushNotificationConfigs`);
export const agentCard = () => call('GET', '.well-known/agent-card.json');

/** SendMessage returning at once: `{task}` or `{message}`. */
export function sendMessage(text, { taskId, contextId } = {}) {
  const message = { messageId: crypto.randomUUID(), role: 'ROLE_USER', parts: [{ text }] };
  if (taskId) message.taskId = taskId;
  if (contextId) message.contextId = contextId;
  return call('POST', 'message:send', { body: { message, configuration: { returnImmediately: true } } });
}
