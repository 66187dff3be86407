// The Agent Card, rendered: who the agent is, its interfaces, capabilities and skills.
import { agentCard } from './api.js';
import { errorText, h } from './dom.js';
import { useExample } from './list.js';

export async function cardView(main) {
  const section = h('section', { id: 'agent-card', class: 'card', 'aria-labelledby': 'card-title' },
    h('h2', { id: 'card-title' }, 'Agent card'));
  main.append(section);
  let card;
  try {
    card = await agentCard();
  } catch (error) {
    section.append(h('p', {}, `Not available: ${errorText(error)}`));
    return;
  }
  const caps = card.capabilities || {};
  const yes = (v) => (v ? 'yes' : 'no');
  const parts = [
    h('p', {}, h('strong', {}, card.name || '(unnamed)'), card.version ? ` — version ${card.version}` : ''),
    card.description ? h('p', {}, card.description) : null,
    card.provider ? h('p', {}, `Provider: ${card.provider.organization || ''} ${card.provider.url || ''}`) : null,
    h('h3', {}, 'Interfaces'),
    h('ul', {}, (card.supportedInterfaces || []).map((i) =>
      h('li', {}, h('span', { class: 'tag' }, i.protocolBinding || '?'), ' ',
        h('code', {}, i.url || ''), i.protocolVersion ? ` (v${i.protocolVersion})` : ''))),
    h('h3', {}, 'Capabilities'),
    h('dl', { class: 'facts' },
      h('dt', {}, 'Streaming'), h('dd', {}, yes(caps.streaming)),
      h('dt', {}, 'Push notifications'), h('dd', {}, yes(caps.pushNotifications)),
      h('dt', {}, 'Extended card'), h('dd', {}, yes(caps.extendedAgentCard)),
      h('dt', {}, 'Extensions'), h('dd', { class: 'mono' }, (caps.extensions || []).map((x) => x.uri).join(', ') || 'none'),
      h('dt', {}, 'Input modes'), h('dd', {}, (card.defaultInputModes || []).join(', ') || '—'),
      h('dt', {}, 'Output modes'), h('dd', {}, (card.defaultOutputModes || []).join(', ') || '—')),
    h('h3', {}, 'Skills'),
    h('ul', { class: 'skills' }, (card.skills || []).map((skill) =>
      h('li', {},
        h('strong', {}, skill.name || skill.id), skill.description ? `: ${skill.description}` : '',
        (skill.tags || []).length ? h('div', {}, skill.tags.map((t) => h('span', { class: 'tag' }, t))) : null,
        (skill.examples || []).length ? h('div', { class: 'row' }, 'Try: ', skill.examples.map((example) =>
          h('button', { type: 'button', class: 'link', onclick: () => useExample(example) }, example))) : null))),
  ];
  section.append(...parts.filter(Boolean));
}

/** Whether the server takes push configs (so the task view only asks when it does). */
export async function pushEnabled() {
  try {
    const card = await agentCard();
    return Boolean(card.capabilities && card.capabilities.pushNotifications);
  } catch {
    return false;
  }
}
