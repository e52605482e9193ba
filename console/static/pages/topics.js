import {html, useState, useEffect, useRef} from '../vendor/preact-htm.mjs';
import {getJSON} from '../api.js';
import {useStream, Live, Pager, ids} from './live.js';

const topicsPageSize = 50;
const partitionsPageSize = 100;

// TopicsPage lists the topics, searched and paginated by the server, and
// reloads the page it shows when the cluster's counts change.
export function TopicsPage() {
  const [q, setQ] = useState('');
  const [page, setPage] = useState(0);
  const [list, setList] = useState(null);
  const [error, setError] = useState(null);
  // The newest request's number: an older answer is dropped. A change of
  // the cluster's counts reloads the page unless a load is under way, so
  // a cluster that changes at every poll cannot starve the list.
  const issued = useRef(0);
  const inflight = useRef(false);
  const current = useRef({q, page});
  current.current = {q, page};
  const version = useRef('');
  const load = () => {
    const n = ++issued.current;
    inflight.current = true;
    const params = new URLSearchParams({q: current.current.q, page: current.current.page, size: topicsPageSize});
    getJSON(`/api/topics?${params}`)
      .then((l) => { if (n === issued.current) { setList(l); setError(null); } })
      .catch((e) => { if (n === issued.current) setError(e.message); })
      .finally(() => { if (n === issued.current) inflight.current = false; });
  };
  useEffect(load, [q, page]);
  const connected = useStream('/api/stream', ['cluster'], (_, c) => {
    const v = `${c.topics}/${c.partitions}/${c.underReplicated}/${c.offline}`;
    if (v !== version.current) {
      const first = version.current === '';
      version.current = v;
      if (!first && !inflight.current) load();
    }
  });
  return html`
    <h1>Topics</h1>
    <div class="toolbar">
      <label for="topic-search">Search</label>
      <input id="topic-search" type="search" placeholder="part of a name" value=${q}
        onInput=${(e) => { setQ(e.target.value); setPage(0); }} />
      ${list && html`<span class="muted">${list.total} ${list.total === 1 ? 'topic' : 'topics'}</span>`}
      <${Live} connected=${connected} />
    </div>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${list && html`
      <div class="table-wrap"><table id="topics">
        <thead><tr><th>Name</th><th class="num">Partitions</th><th class="num">RF</th>
          <th class="num">Under-replicated</th><th class="num">Offline</th></tr></thead>
        <tbody>${list.topics.map((t) => html`
          <tr class=${t.offline ? 'offline' : t.underReplicated ? 'under-replicated' : ''}>
            <td><a href=${'#/topics/' + encodeURIComponent(t.name)}>${t.name}</a>
              ${t.internal && html` <span class="badge">internal</span>`}</td>
            <td class="num">${t.partitions}</td><td class="num">${t.replicationFactor}</td>
            <td class="num">${t.underReplicated}</td><td class="num">${t.offline}</td></tr>`)}</tbody>
      </table></div>
      ${list.topics.length === 0 && html`<p class="muted">No topic${q ? ` has “${q}” in its name` : ''}.</p>`}
      <${Pager} page=${page} size=${topicsPageSize} total=${list.total} onPage=${setPage} label="Topic pages" />`}`;
}

// TopicPage shows one topic: its configs, and a page of its partitions
// with each replica's log drawn up to its LEO and the HW across, updated
// from the stream (which makes the console read those partitions'
// offsets while the page is open).
export function TopicPage({args}) {
  const name = args[0];
  const [page, setPage] = useState(0);
  const [topic, setTopic] = useState(null);
  const [parts, setParts] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    setTopic(null); setParts(null); setPage(0);
    getJSON(`/api/topics/${encodeURIComponent(name)}?size=1`)
      .then((t) => { setTopic(t); setError(null); })
      .catch((e) => setError(e.message));
  }, [name]);
  const path = `/api/stream?${new URLSearchParams({topic: name, page, size: partitionsPageSize})}`;
  const connected = useStream(path, ['partitions'], (_, data) => setParts(data));
  return html`
    <h1>Topic ${name}</h1>
    <div class="toolbar"><a href="#/topics">All topics</a><${Live} connected=${connected} /></div>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${parts && !parts.exists && html`<p class="error">The cluster lists no topic ${name}.</p>`}
    ${parts && parts.exists && html`<${Partitions} parts=${parts} page=${page} onPage=${setPage} />`}
    ${topic && html`<${Configs} topic=${topic} />`}`;
}

function Partitions({parts, page, onPage}) {
  const s = parts.summary;
  return html`
    <div class="cards">
      <div class="card"><div class="label">Partitions</div><div class="value">${s.partitions}</div></div>
      <div class="card"><div class="label">Replication factor</div><div class="value">${s.replicationFactor}</div></div>
      <div class="card"><div class="label">Under-replicated</div><div class="value">${s.underReplicated}</div></div>
      <div class="card"><div class="label">Offline</div><div class="value">${s.offline}</div></div>
    </div>
    <h2>Partitions</h2>
    <p class="muted">AR: assigned replicas; ISR: in-sync replicas; OSR: out-of-sync (AR minus ISR).
      Each replica's log is drawn up to its log end offset (LEO); the line across is the high watermark (HW),
      the end of what consumers may read.</p>
    <div class="table-wrap"><table id="partitions">
      <thead><tr><th class="num">Partition</th><th class="num">Leader</th><th class="num">Leader epoch</th>
        <th>AR</th><th>ISR</th><th>OSR</th><th class="num">HW</th><th>Replicas' logs</th></tr></thead>
      <tbody>${parts.partitions.map((p) => html`<${PartitionRow} key=${p.partition} p=${p} />`)}</tbody>
    </table></div>
    <${Pager} page=${page} size=${parts.size} total=${parts.total} onPage=${onPage} label="Partition pages" />`;
}

function PartitionRow({p}) {
  const cls = p.leader < 0 ? 'offline' : p.isr.length < p.replicas.length ? 'under-replicated' : '';
  return html`
    <tr data-partition=${p.partition} class=${cls}>
      <td class="num">${p.partition}</td>
      <td class="num leader">${p.leader >= 0 ? p.leader : 'none'}</td>
      <td class="num">${p.leaderEpoch}</td>
      <td class="ar">${ids(p.replicas)}</td>
      <td class="isr">${ids(p.isr)}</td>
      <td class="osr">${ids(p.osr)}</td>
      <td class="num hw">${p.hw >= 0 ? p.hw : '?'}</td>
      <td><${Logs} p=${p} /></td>
    </tr>`;
}

// Logs draws each replica of p as the replication documents do: a bar
// per replica up to its LEO, on one scale, and the HW as a line across
// them.
function Logs({p}) {
  const leos = p.replicas.map((r) => p.leo[r]);
  const top = Math.max(1, p.hw, ...leos.filter((v) => v !== undefined));
  const pct = (v) => `${(100 * v / top).toFixed(2)}%`;
  return html`
    <div class="logs" role="img" aria-label=${`partition ${p.partition}: ` + p.replicas.map((r, i) =>
      `replica ${r} LEO ${leos[i] ?? 'unknown'}`).join(', ') + `, HW ${p.hw >= 0 ? p.hw : 'unknown'}`}>
      ${p.replicas.map((r, i) => html`
        <div class="log-row" data-replica=${r}>
          <span class="log-label">${r}${r === p.leader ? '*' : ''}</span>
          <span class="log-track">
            ${leos[i] !== undefined
              ? html`<span class=${'log-bar' + (p.isr.includes(r) ? '' : ' osr')} style=${{width: pct(leos[i])}}></span>`
              : html`<span class="log-none">no answer</span>`}
            ${p.hw >= 0 && html`<span class="log-hw" style=${{left: pct(p.hw)}}></span>`}
          </span>
          <span class="log-leo">${leos[i] ?? '?'}</span>
        </div>`)}
    </div>`;
}

function Configs({topic}) {
  const [all, setAll] = useState(false);
  const shown = topic.configs.filter((c) => all || c.source === 'dynamic_topic_config');
  return html`
    <h2>Configs</h2>
    ${topic.configsError && html`<p class="error">DescribeConfigs: ${topic.configsError}</p>`}
    <div class="toolbar"><label><input type="checkbox" checked=${all} onChange=${(e) => setAll(e.target.checked)} />
      show defaults too</label></div>
    ${shown.length === 0 ? html`<p class="muted">No config set on the topic: every value is the broker's default.</p>` : html`
    <div class="table-wrap"><table id="configs">
      <thead><tr><th>Name</th><th>Value</th><th>Source</th></tr></thead>
      <tbody>${shown.map((c) => html`<tr><td class="mono">${c.name}</td>
        <td class="mono">${c.sensitive ? '(sensitive)' : c.value ?? ''}</td><td>${c.source.replaceAll('_', ' ')}</td></tr>`)}</tbody>
    </table></div>`}`;
}
