import {html, useState} from '../vendor/preact-htm.mjs';
import {useStream, Live, ago, ids} from './live.js';

const stateBadge = {live: 'ok', fenced: 'warn', gone: 'bad'};
const healthBadge = {ok: 'ok', degraded: 'warn', unreachable: 'bad'};

// ClusterPage shows the brokers, the controller and the coordination
// backend, and on embedded Raft the quorum, as the console's last poll
// saw them.
export function ClusterPage() {
  const [c, setCluster] = useState(null);
  const connected = useStream('/api/stream', ['cluster'], (_, data) => setCluster(data));
  return html`
    <h1>Cluster</h1>
    <div class="toolbar"><${Live} connected=${connected} /></div>
    ${c ? html`<${ClusterView} c=${c} />` : html`<p class="muted">Reading the cluster…</p>`}`;
}

function ClusterView({c}) {
  const now = Date.parse(c.at);
  return html`
    ${c.error && html`<p class="error" role="alert">The cluster did not answer the console: ${c.error}. What follows is its last view.</p>`}
    <div class="cards">
      <div class="card"><div class="label">Health</div>
        <div class="value"><span class=${'badge ' + healthBadge[c.health]}>${c.health}</span></div>
        ${c.reasons.length > 0 && html`<div class="muted">${c.reasons.join('; ')}</div>`}</div>
      <div class="card"><div class="label">Coordination backend</div>
        <div class="value" id="backend">${c.backend || 'unknown'}</div>
        ${!c.backend && html`<div class="muted">no broker described coordination.backend</div>`}
        <${Coordination} cv=${c.coordination} /></div>
      <div class="card"><div class="label">Controller</div>
        <div class="value" id="controller">${c.controllerId >= 0 ? `broker ${c.controllerId}` : 'none'}</div>
        <div class="muted" id="controller-epoch">${c.controllerEpoch != null ? `epoch ${c.controllerEpoch}`
          : c.coordination ? 'epoch unknown: the coordination service did not answer'
          : 'epoch not told to clients (no Kafka response carries it)'}</div></div>
      <div class="card"><div class="label">Topics / partitions</div>
        <div class="value">${c.topics} / ${c.partitions}</div></div>
      <div class="card"><div class="label">Under-replicated / offline</div>
        <div class="value">${c.underReplicated} / ${c.offline}</div></div>
      <div class="card"><div class="label">Cluster id</div>
        <div class="value mono">${c.clusterId || 'unknown'}</div></div>
    </div>
    <h2>Brokers</h2>
    <div class="table-wrap"><table id="brokers">
      <thead><tr><th class="num">Id</th><th>Address</th><th>Rack</th><th>State</th><th>Last answer</th></tr></thead>
      <tbody>${c.brokers.map((b) => html`
        <tr data-broker=${b.id} class=${b.state !== 'live' ? 'offline' : ''}>
          <td class="num">${b.id}</td>
          <td class="mono">${b.host}:${b.port}</td>
          <td>${b.rack || html`<span class="muted">none</span>`}</td>
          <td><span class=${'badge ' + stateBadge[b.state]}>${b.state}</span>
            ${b.controller && html` <span class="badge ok">controller</span>`}</td>
          <td>${ago(b.lastAnswer, now)}${b.goneAt && html` <span class="muted">(gone since ${ago(b.goneAt, now)})</span>`}</td>
        </tr>`)}</tbody>
    </table></div>
    <p class="muted">A broker is live while the cluster lists it, gone when it no longer does (its session in the
      coordination backend ended and the controller fenced it). Last answer is when it last answered the console's
      probe, sent every ${c.refreshMs} ms.</p>
    ${c.quorum && html`<${Quorum} q=${c.quorum} />`}`;
}

// Coordination is the coordination service's health as the console
// read it: the controller epoch and who is controller come from it, since
// no Kafka response carries them.
function Coordination({cv}) {
  if (!cv) {
    return html`<div class="muted" id="coordination">service not read by this console: start the console with
      --coord (tripod console) or inside a broker (tripod serve --console-listen)</div>`;
  }
  if (cv.error) {
    return html`<div class="muted" id="coordination"><span class="badge bad">bad</span> ${cv.error}
      (after ${Math.round(cv.latencyMs)} ms)</div>`;
  }
  return html`<div class="muted" id="coordination"><span class="badge ok">ok</span>
    answered in ${cv.latencyMs < 10 ? cv.latencyMs.toFixed(1) : Math.round(cv.latencyMs)} ms</div>`;
}

function Quorum({q}) {
  if (q.error) {
    return html`<h2>Raft quorum</h2><p class="error">DescribeQuorum: ${q.error}</p>`;
  }
  return html`
    <h2>Raft quorum</h2>
    <p>Leader <strong>broker ${q.leaderId}</strong>, epoch ${q.leaderEpoch}, high watermark ${q.highWatermark};
      voters ${ids(q.members.filter((m) => m.voter).map((m) => m.id))}.</p>
    <div class="table-wrap"><table id="quorum">
      <thead><tr><th class="num">Member</th><th>Role</th><th class="num">Log end offset</th><th class="num">Lag</th><th>Last fetch</th></tr></thead>
      <tbody>${q.members.map((m) => html`
        <tr><td class="num">${m.id}</td>
          <td>${m.id === q.leaderId ? 'leader' : m.voter ? 'voter' : 'observer'}</td>
          <td class="num">${m.logEndOffset}</td><td class="num">${m.lag}</td>
          <td>${m.lastFetchMs > 0 ? ago(new Date(m.lastFetchMs).toISOString()) : 'unknown'}</td></tr>`)}</tbody>
    </table></div>`;
}
