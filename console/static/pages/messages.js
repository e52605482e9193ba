import {html} from '../vendor/preact-htm.mjs';

// MessagesPage browses a partition's records.
export function MessagesPage() {
  return html`<h1>Messages</h1>`;
}
