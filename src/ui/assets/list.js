// The task list: ListTasks with the state and context filters, newest first, paged, refreshing
// itself every few seconds; and the form that starts a task.
import { listTasks, sendMessage, taskPage } from './api.js';
import { STATES, errorText, h, messageText, say, stateBadge, when } from './dom.js';

const REFRESH_MS = 3000;

export function listView(main) {
  const filters = { status: '', contextId: '', pageSize: '20' };
  let tokens = ['']; // page tokens of the pages seen so far; the last is the current page
  let next = '';

  const body = h('tbody');
  const summary = h('p', { class: 'hint', id: 'list-summary' });
  const prev = h('button', { type: 'button', onclick: () => go(-1) }, '← Newer');
  const more = h('button', { type: 'button', onclick: () => go(1) }, 'Older →');
  const state = h('select', { id: 'filter-state', name: 'status' },
    h('option', { value: '' }, 'any'),
    STATES.map((s) => h('option', { value: `TASK_STATE_${s}` }, s)));
  const context = h('input', { id: 'filter-context', name: 'contextId', spellcheck: 'false' });
  const size = h('select', { id: 'filter-size', name: 'pageSize' },
    ['10', '20', '50', '100'].map((n) => h('option', { value: n }, n)));
  size.value = filters.pageSize;

  const form = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    Object.assign(filters, { status: state.value, contextId: context.value.trim(), pageSize: size.value });
    tokens = [''];
    refresh();
  } },
  h('label', { for: 'filter-state' }, 'State'), state,
  h('label', { for: 'filter-context' }, 'Context'), context,
  h('label', { for: 'filter-size' }, 'Per page'), size,
  h('button', { type: 'submit' }, 'Filter'));

  main.append(
    newTaskForm(),
    h('section', { 'aria-labelledby': 'tasks-title' },
      h('h1', { id: 'tasks-title' }, 'Tasks'),
      form,
      h('p', { class: 'hint' }, 'Newest first; refreshes every 3 seconds.'),
      h('div', { class: 'scroll' },
        h('table', { class: 'tasks' },
          h('thead', {}, h('tr', {}, ['Task', 'Context', 'State', 'Last update', 'Artifacts']
            .map((c) => h('th', { scope: 'col' }, c)))),
          body)),
      h('div', { class: 'row pager' }, prev, more, summary)),
  );

  function go(step) {
    if (step > 0 && next) tokens.push(next);
    if (step < 0 && tokens.length > 1) tokens.pop();
    refresh();
  }

  let busy = false;
  async function refresh() {
    if (busy) return;
    busy = true;
    try {
      const page = await listTasks({
        status: filters.status,
        contextId: filters.contextId,
        pageSize: filters.pageSize,
        pageToken: tokens[tokens.length - 1],
        historyLength: 0,
        includeArtifacts: true,
      });
      render(page);
    } catch (error) {
      say(`Task list: ${errorText(error)}; retrying every ${REFRESH_MS / 1000} s.`);
    } finally {
      busy = false;
    }
  }

  function render(page) {
    const tasks = page.tasks || [];
    next = page.nextPageToken || '';
    body.replaceChildren(...tasks.map(row));
    if (!tasks.length) body.append(h('tr', {}, h('td', { colspan: 5 }, 'No tasks yet.')));
    prev.disabled = tokens.length <= 1;
    more.disabled = !next;
    const total = page.totalSize !== undefined ? ` of ${page.totalSize}` : '';
    summary.textContent = `Page ${tokens.length}: ${tasks.length} task(s)${total}; updated ${when(new Date().toISOString())}.`;
  }

  refresh();
  setInterval(() => {
    if (document.visibilityState === 'visible') refresh();
  }, REFRESH_MS);
}

function row(task) {
  const status = task.status || {};
  return h('tr', { 'data-task': task.id },
    h('td', { 'data-label': 'Task' }, h('a', { class: 'mono', href: taskPage(task.id) }, task.id)),
    h('td', { 'data-label': 'Context', class: 'mono' }, task.contextId || '—'),
    h('td', { 'data-label': 'State' }, stateBadge(status.state)),
    h('td', { 'data-label': 'Last update' }, when(status.timestamp)),
    h('td', { 'data-label': 'Artifacts' }, String((task.artifacts || []).length)));
}

/** Starts a task (SendMessage, returning at once) and opens its page. */
function newTaskForm() {
  const text = h('input', { id: 'new-text', name: 'text', required: true, placeholder: 'stream 20 100', spellcheck: 'false' });
  const context = h('input', { id: 'new-context', name: 'contextId', placeholder: 'new context', spellcheck: 'false' });
  const reply = h('p', { class: 'reply', id: 'new-reply' });
  const form = h('form', { class: 'card send', id: 'new-task', onsubmit: async (e) => {
    e.preventDefault();
    const button = form.querySelector('button');
    button.disabled = true;
    reply.textContent = '';
    try {
      const result = await sendMessage(text.value, { contextId: context.value.trim() });
      if (result.task) {
        window.location.assign(taskPage(result.task.id));
        return;
      }
      reply.textContent = `Reply: ${messageText(result.message)}`;
    } catch (error) {
      reply.textContent = `Not sent: ${errorText(error)}`;
    }
    button.disabled = false;
  } },
  h('h2', {}, 'Send a message'),
  h('label', { for: 'new-text' }, 'Message text'), text,
  h('label', { for: 'new-context' }, 'Context id (optional)'), context,
  h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Send')),
  reply);
  return form;
}

/** Puts `example` in the new-task form (the card's skill examples call this). */
export function useExample(example) {
  const input = document.getElementById('new-text');
  if (!input) return;
  input.value = example;
  input.focus();
}
