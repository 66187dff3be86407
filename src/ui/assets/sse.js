// Server-Sent Events read from a fetch() body, so that headers (Authorization, Last-Event-ID)
// can be sent, which EventSource cannot do.
import { ApiError, authHeaders } from './api.js';

/** Calls `onEvent({id, event, data})` for each event of `response`; resolves at its end. */
export async function readEvents(response, onEvent) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  let data = [];
  let event = 'message';
  let id = null;
  try {
    await pump();
  } finally {
    reader.cancel().catch(() => {});
  }

  async function pump() {
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value;
    for (;;) {
      const end = buffer.search(/\r\n|\r|\n/);
      if (end < 0) break;
      // A lone \r at the end of what arrived may be the first half of \r\n.
      if (buffer[end] === '\r' && end + 1 === buffer.length) break;
      const line = buffer.slice(0, end);
      buffer = buffer.slice(end + (buffer.startsWith('\r\n', end) ? 2 : 1));
      if (line === '') {
        if (data.length) onEvent({ id, event, data: data.join('\n') });
        data = [];
        event = 'message';
        continue;
      }
      if (line.startsWith(':')) continue;
      const colon = line.indexOf(':');
      const field = colon < 0 ? line : line.slice(0, colon);
      let text = colon < 0 ? '' : line.slice(colon + 1);
      if (text.startsWith(' ')) text = text.slice(1);
      if (field === 'data') data.push(text);
      else if (field === 'event') event = text;
      else if (field === 'id' && !text.includes('\0')) id = text;
    }
  }
  }
}

/**
 * Opens `url` as an event stream (with `Last-Event-ID` when `lastEventId` is set) and reads it
 * to its end. Throws ApiError when the server refuses, TypeError when the network fails.
 */
export async function stream(url, { lastEventId, signal, onOpen, onEvent }) {
  const headers = { Accept: 'text/event-stream', ...authHeaders() };
  if (lastEventId) headers['Last-Event-ID'] = lastEventId;
  const response = await fetch(url, { headers, signal, cache: 'no-store' });
  if (!response.ok) {
    let body = {};
    try {
      body = await response.json();
    } catch {
      // not JSON: the status says enough
    }
    throw new ApiError(response.status, body);
  }
  onOpen();
  await readEvents(response, onEvent);
}
