// One task, live: GetTask first; while it runs, its event stream (SubscribeToTask over
// HTTP+JSON SSE), applied as it comes: the status timeline, each artifact growing chunk by
// chunk, the history, push configs. A dropped stream is reopened with Last-Event-ID; a
// finished task is shown as GetTask returns it.
import { cancelTask, getTask, listPushConfigs, sendMessage, taskPath, url } from './api.js';
import { pushEnabled } from './card.js';
import { TERMINAL, errorText, h, messageText, partText, say, stateBadge, taskState, when } from './dom.js';
import { stream } from './sse.js';

const MAX_BACKOFF_MS = 10000;
const sleep = (ms) => new Promise((resolve) => { setTimeout(resolve, ms); });

export function taskView(main, id) {
  let task = null;
  const timeline = []; // statuses in the order seen
  const artifactLists = new Map(); // artifactId → <ol> of its parts

  const title = h('h1', { id: 'task-title' }, 'Task ', h('span', { class: 'mono' }, id));
  const stateBox = h('p', { id: 'task-state' });
  const connection = h('p', { id: 'connection', class: 'hint', role: 'status' }, 'Loading…');
  const cancel = h('button', { type: 'button', id: 'cancel', onclick: onCancel }, 'Cancel task');
  const answer = answerForm();
  const facts = h('dl', { class: 'facts' });
  const timelineList = h('ol', { id: 'timeline', class: 'timeline' });
  const artifactsBox = h('div', { id: 'artifacts' });
  const historyList = h('ol', { id: 'history', class: 'history' });
  const pushBox = h('div', { id: 'push-configs' }, h('p', { class: 'hint' }, '…'));

  main.append(
    h('p', {}, h('a', { href: '../' }, '← All tasks')),
    h('section', { 'aria-labelledby': 'task-title' }, title, stateBox, connection, facts,
      h('div', { class: 'row' }, cancel), answer),
    h('section', { class: 'card' }, h('h2', {}, 'Status timeline'), timelineList),
    h('section', { class: 'card' }, h('h2', {}, 'Artifacts'), artifactsBox),
    h('section', { class: 'card' }, h('h2', {}, 'History'), historyList),
    h('section', { class: 'card' }, h('h2', {}, 'Push configs'), pushBox),
  );

  // ---- applying what the server says ----

  function setTask(next) {
    task = next;
    note(task.status);
    renderHeader();
    renderArtifacts();
    renderHistory();
  }

  function note(status) {
    if (!status) return;
    const last = timeline[timeline.length - 1];
    if (last && last.state === status.state && last.timestamp === status.timestamp) return;
    timeline.push(status);
    timelineList.append(h('li', {}, stateBadge(status.state), ' ', h('time', {}, when(status.timestamp)),
      status.message ? ` — ${messageText(status.message)}` : ''));
  }

  function apply(event) {
    if (event.task) {
      setTask(event.task);
    } else if (event.statusUpdate && task) {
      task.status = event.statusUpdate.status;
      if (task.status && task.status.message) {
        task.history = [...(task.history || []), task.status.message];
        renderHistory();
      }
      note(task.status);
      renderHeader();
    } else if (event.artifactUpdate && task) {
      addChunk(event.artifactUpdate);
    }
  }

  function addChunk(update) {
    const chunk = update.artifact || {};
    const artifacts = task.artifacts || (task.artifacts = []);
    const existing = artifacts.find((a) => a.artifactId === chunk.artifactId);
    if (existing && update.append) {
      existing.parts = [...(existing.parts || []), ...(chunk.parts || [])];
      const list = artifactLists.get(chunk.artifactId);
      if (list) {
        // Follow the growing artifact, unless the reader scrolled up to read.
        const atEnd = list.scrollTop + list.clientHeight >= list.scrollHeight - 4;
        list.append(...(chunk.parts || []).map(partItem));
        if (atEnd) list.scrollTop = list.scrollHeight;
        return;
      }
    } else if (existing) {
      Object.assign(existing, chunk);
    } else {
      artifacts.push({ ...chunk });
    }
    renderArtifacts();
  }

  function renderHeader() {
    const state = taskState(task);
    stateBox.replaceChildren('State: ', stateBadge(task.status && task.status.state),
      task.status && task.status.timestamp ? ` since ${when(task.status.timestamp)}` : '');
    facts.replaceChildren(
      h('dt', {}, 'Context'), h('dd', { class: 'mono' }, task.contextId || '—'),
      h('dt', {}, 'Artifacts'), h('dd', {}, String((task.artifacts || []).length)),
    );
    cancel.hidden = TERMINAL.has(state);
    answer.hidden = state !== 'INPUT_REQUIRED';
    document.title = `${state} · task ${id.slice(0, 8)} · a2a-server`;
  }

  function renderArtifacts() {
    artifactLists.clear();
    const artifacts = (task && task.artifacts) || [];
    artifactsBox.replaceChildren(...artifacts.map((artifact) => {
      const list = h('ol', { class: 'parts' }, (artifact.parts || []).map(partItem));
      artifactLists.set(artifact.artifactId, list);
      return h('article', { class: 'artifact', 'data-artifact': artifact.artifactId },
        h('h3', {}, artifact.name || artifact.artifactId, ' ', h('span', { class: 'hint mono' }, artifact.artifactId)),
        artifact.description ? h('p', {}, artifact.description) : null,
        list);
    }));
    if (!artifacts.length) artifactsBox.append(h('p', { class: 'hint' }, 'None yet.'));
    if (task) renderHeader();
  }

  function renderHistory() {
    const history = (task && task.history) || [];
    historyList.replaceChildren(...history.map((m) =>
      h('li', {}, h('span', { class: 'tag' }, (m.role || '').replace(/^ROLE_/, '').toLowerCase() || '?'), ' ', messageText(m))));
    if (!history.length) historyList.append(h('li', { class: 'hint' }, 'No messages.'));
  }

  // ---- following the task ----

  async function follow() {
    try {
      setTask(await getTask(id));
    } catch (error) {
      connection.textContent = error.status === 404
        ? 'Task not found: unknown here, or forgotten (a server restart with the memory store forgets tasks).'
        : `Could not load the task: ${errorText(error)}`;
      return;
    }
    loadPushConfigs();
    if (TERMINAL.has(taskState(task))) {
      connection.textContent = `Finished: ${taskState(task)}.`;
      return;
    }
    let lastEventId = null;
    let attempt = 0;
    while (!TERMINAL.has(taskState(task))) {
      try {
        await stream(url(`${taskPath(id)}:subscribe`), {
          lastEventId,
          onOpen: () => {
            attempt = 0;
            connection.textContent = 'Live: following the task’s event stream.';
          },
          onEvent: (event) => {
            if (event.event === 'error') throw new Error(`stream error: ${event.data}`);
            if (event.id) lastEventId = event.id;
            apply(JSON.parse(event.data));
          },
        });
        if (TERMINAL.has(taskState(task))) break;
        // The stream ended before the task did (the server drained or restarted): reopen it.
      } catch (error) {
        if (error.status === 404) {
          connection.textContent = 'Task gone: the server no longer knows it (a restart with the memory store forgets tasks).';
          return;
        }
        if (error.reason === 'UNSUPPORTED_OPERATION') break; // finished meanwhile: GetTask tells
        if (error.status && error.status < 500) {
          connection.textContent = `The server refused the stream: ${errorText(error)}`;
          return;
        }
        // A network failure, or 5xx (a draining server): try again.
      }
      attempt += 1;
      const delay = Math.min(500 * 2 ** (attempt - 1), MAX_BACKOFF_MS);
      connection.textContent = `Connection lost; reconnecting in ${Math.round(delay / 100) / 10} s (attempt ${attempt})`
        + `${lastEventId ? `, resuming after event ${lastEventId}` : ''}…`;
      await sleep(delay);
      if (attempt > 1) {
        // Between attempts, learn whether it finished while we were away.
        try {
          setTask(await getTask(id));
        } catch (error) {
          if (error.status === 404) {
            connection.textContent = 'Task gone: the server no longer knows it (a restart with the memory store forgets tasks).';
            return;
          }
        }
      }
    }
    try {
      setTask(await getTask(id));
    } catch (error) {
      say(`Final state: ${errorText(error)}`);
    }
    connection.textContent = `Finished: ${taskState(task)} (final state from GetTask).`;
  }

  async function loadPushConfigs() {
    if (!(await pushEnabled())) {
      pushBox.replaceChildren(h('p', { class: 'hint' }, 'Push notifications are off on this server.'));
      return;
    }
    try {
      const configs = (await listPushConfigs(id)).configs || [];
      pushBox.replaceChildren(configs.length
        ? h('ul', {}, configs.map((c) => h('li', {}, h('code', {}, c.url || '?'), ` (id ${c.id || '?'}`,
          c.authentication ? `, auth ${c.authentication.scheme || ''}` : '', ')')))
        : h('p', { class: 'hint' }, 'None.'));
    } catch (error) {
      pushBox.replaceChildren(h('p', {}, errorText(error)));
    }
  }

  // ---- acting ----

  async function onCancel() {
    cancel.disabled = true;
    try {
      const canceled = await cancelTask(id);
      if (canceled && canceled.id) setTask(canceled);
      say('Cancel requested.');
    } catch (error) {
      say(`Not canceled: ${errorText(error)}`);
    }
    cancel.disabled = false;
  }

  function answerForm() {
    const text = h('input', { id: 'answer-text', name: 'text', required: true, spellcheck: 'false' });
    const form = h('form', { id: 'answer', class: 'card send', hidden: true, onsubmit: async (e) => {
      e.preventDefault();
      const button = form.querySelector('button');
      button.disabled = true;
      try {
        await sendMessage(text.value, { taskId: id, contextId: task && task.contextId });
        text.value = '';
        say('Answer sent.');
      } catch (error) {
        say(`Answer not sent: ${errorText(error)}`);
      }
      button.disabled = false;
    } },
    h('h2', {}, 'The agent needs input'),
    h('label', { for: 'answer-text' }, 'Your answer'), text,
    h('div', { class: 'row' }, h('button', { type: 'submit' }, 'Send answer')));
    return form;
  }

  follow();
}

function partItem(part) {
  return h('li', { class: 'part' }, partText(part));
}
