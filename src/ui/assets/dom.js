// Small DOM helpers shared by the views.

/** `h('a', {href, class, onclick}, ...children)`: an element; null and false children are skipped. */
export function h(tag, props = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(props)) {
    if (value === null || value === undefined || value === false) continue;
    if (key === 'class') el.className = value;
    else if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'value' || key === 'checked') el[key] = value;
    else el.setAttribute(key, value === true ? '' : value);
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : String(child));
  }
  return el;
}

export const STATES = [
  'SUBMITTED', 'WORKING', 'INPUT_REQUIRED', 'AUTH_REQUIRED',
  'COMPLETED', 'FAILED', 'CANCELED', 'REJECTED',
];
export const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELED', 'REJECTED']);

/** `TASK_STATE_WORKING` → `WORKING`. */
export const stateName = (state) => (state || 'TASK_STATE_UNSPECIFIED').replace(/^TASK_STATE_/, '');
export const taskState = (task) => stateName(task && task.status && task.status.state);

/** The state as text, coloured as well (never by colour alone). */
export function stateBadge(state) {
  const name = stateName(state);
  return h('span', { class: `state state-${name.toLowerCase().replace('_', '-')}` }, name);
}

export function when(timestamp) {
  if (!timestamp) return '—';
  const date = new Date(timestamp);
  if (Number.isNaN(date.getTime())) return timestamp;
  const today = new Date().toDateString() === date.toDateString();
  const time = date.toLocaleTimeString([], { hour12: false });
  return today ? time : `${date.toLocaleDateString()} ${time}`;
}

/** A part as text: its text, its data as JSON, or a file's name and type. */
export function partText(part) {
  if (part.text !== undefined) return part.text;
  if (part.data !== undefined) return JSON.stringify(part.data);
  const file = part.filename || 'file';
  if (part.url !== undefined) return `${file} (${part.mediaType || '?'}): ${part.url}`;
  if (part.raw !== undefined) return `${file} (${part.mediaType || '?'}, ${part.raw.length} base64 chars)`;
  return JSON.stringify(part);
}

export const messageText = (message) => ((message && message.parts) || []).map(partText).join('\n');

/** Says something in the live status line at the foot of the page. */
export function say(text) {
  document.getElementById('status').textContent = text;
}

export function errorText(error) {
  if (error && error.status) return `${error.message} (${error.reason || `HTTP ${error.status}`})`;
  return `server unreachable (${(error && error.message) || error})`;
}
