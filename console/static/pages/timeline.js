import {html} from '../vendor/preact-htm.mjs';

// TimelinePage shows the cluster's events as they happen.
export function TimelinePage() {
  return html`<h1>Timeline</h1>`;
}
