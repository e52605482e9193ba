import {html} from '../vendor/preact-htm.mjs';

// TopicsPage lists the topics, paginated and searchable.
export function TopicsPage() {
  return html`<h1>Topics</h1>`;
}

// TopicPage shows one topic's partitions, live.
export function TopicPage({args}) {
  return html`<h1>Topic ${args[0]}</h1>`;
}
