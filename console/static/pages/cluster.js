import {html} from '../vendor/preact-htm.mjs';

// ClusterPage shows the brokers, the controller and the coordination
// backend.
export function ClusterPage() {
  return html`<h1>Cluster</h1>`;
}
