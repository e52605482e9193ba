import {html} from '../vendor/preact-htm.mjs';

// GroupsPage lists the consumer groups.
export function GroupsPage() {
  return html`<h1>Consumer groups</h1>`;
}

// GroupPage shows one group: members, offsets and lag.
export function GroupPage({args}) {
  return html`<h1>Group ${args[0]}</h1>`;
}
