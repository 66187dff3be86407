// The dashboard's entry point: the sign-in field, then the task list or one task's live view,
// by the page's own URL (`…/ui/` or `…/ui/tasks/{id}`).
import { credential, setCredential } from './api.js';
import { cardView } from './card.js';
import { say } from './dom.js';
import { listView } from './list.js';
import { taskView } from './task.js';

function signIn() {
  const form = document.getElementById('signin-form');
  const kind = document.getElementById('signin-kind');
  const value = document.getElementById('signin-value');
  const summary = document.getElementById('signin-summary');
  const show = () => {
    const current = credential();
    kind.value = current.kind;
    summary.textContent = current.value ? `Signed in (${current.kind === 'apikey' ? 'API key' : 'token'})` : 'Sign in';
  };
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    setCredential(kind.value, value.value.trim());
    value.value = '';
    show();
    say(credential().value ? 'Credential set for this tab.' : 'No credential set.');
  });
  document.getElementById('signout').addEventListener('click', () => {
    setCredential('', '');
    value.value = '';
    show();
    say('Signed out.');
  });
  show();
}

signIn();
const main = document.getElementById('main');
const match = window.location.pathname.match(/\/ui\/tasks\/([^/]+)$/);
if (match) {
  taskView(main, decodeURIComponent(match[1]));
} else {
  listView(main);
  cardView(main);
}
