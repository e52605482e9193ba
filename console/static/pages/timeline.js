import {html, useState} from '../vendor/preact-htm.mjs';
import {useStream, Live, time} from './live.js';

const kinds = [
  ['', 'All'],
  ['election', 'Leader elections'],
  ['isr', 'ISR shrink and expand'],
  ['failover', 'Failovers'],
  ['broker', 'Brokers registered and gone'],
  ['controller', 'Controller changes'],
  ['reassignment', 'Reassignments'],
];

// maxShown bounds the events drawn: the server keeps the last 1000.
const maxShown = 1000;

// TimelinePage shows the cluster's events as the console sees them
// happen, newest first: every event the server still holds on connect
// (?since=0), then each new one; after a reconnection the browser asks
// from the last it had (Last-Event-ID).
export function TimelinePage() {
  const [events, setEvents] = useState([]);
  const [kind, setKind] = useState('');
  const connected = useStream('/api/stream?since=0', ['event'], (_, ev) =>
    setEvents((evs) => evs.length && evs[0].seq >= ev.seq ? evs : [ev, ...evs].slice(0, maxShown)));
  const shown = events.filter((ev) => !kind || ev.kind === kind);
  return html`
    <h1>Timeline</h1>
    <div class="toolbar">
      <label for="timeline-kind">Show</label>
      <select id="timeline-kind" value=${kind} onChange=${(e) => setKind(e.target.value)}>
        ${kinds.map(([k, label]) => html`<option value=${k}>${label}</option>`)}
      </select>
      <${Live} connected=${connected} />
    </div>
    <p class="muted">What the console saw change between two reads of the cluster's metadata (one every refresh
      interval), so each time is at most one interval after the change. A failover's detection runs from the
      failed broker's last answer to the console until the console saw the controller act (the broker gone, or a
      partition of it with a new leader); its unavailability until the last of its partitions had a new leader.${' '}
      <code>tripod bench failover</code> measures from the SIGKILL it sends, and unavailability from the last
      acknowledged write to the first after.</p>
    ${shown.length === 0 ? html`<p class="muted">No event yet${kind ? ' of this kind' : ''}.</p>` : html`
    <ol class="timeline" id="timeline" reversed>
      ${shown.map((ev) => html`
        <li key=${ev.seq} data-kind=${ev.kind}>
          <time datetime=${ev.at}>${time(ev.at)}</time>
          <span class=${'badge kind-' + ev.kind}>${ev.kind}</span>
          ${ev.topic !== undefined
            ? html`<a href=${'#/topics/' + encodeURIComponent(ev.topic)}>${ev.text}</a>`
            : html`<span>${ev.text}</span>`}
        </li>`)}
    </ol>`}`;
}
