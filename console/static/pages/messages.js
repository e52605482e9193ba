// messages.js: the message browser. It reads one partition from an
// offset or a time, newest or oldest first, filters records by a
// substring within the server's scan bounds, and produces test records
// after a confirmation.
import {html, useState, useEffect, useMemo} from '../vendor/preact-htm.mjs';
import {getJSON, postJSON} from '../api.js';
import {ConfirmDialog} from './confirm.js';

// bytesOf decodes a payload's base64 into bytes.
function bytesOf(p) {
  return Uint8Array.from(atob(p.base64), (c) => c.charCodeAt(0));
}

// textOf returns a UTF-8 payload's text.
function textOf(p) {
  return new TextDecoder().decode(bytesOf(p));
}

// hexOf formats bytes as hex pairs, sixteen to a line.
function hexOf(p) {
  const bytes = bytesOf(p);
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    lines.push(Array.from(bytes.slice(i, i + 16), (b) => b.toString(16).padStart(2, '0')).join(' '));
  }
  return lines.join('\n');
}

// Payload shows a key, value or header value as text, JSON or hex. A
// payload that is not UTF-8 is always shown as hex, and JSON that does
// not parse is shown as text; both say so.
function Payload({p, view}) {
  if (p === null || p === undefined) {
    return html`<span class="muted">null</span>`;
  }
  if (p.size === 0) {
    return html`<span class="muted">empty</span>`;
  }
  if (view === 'hex' || !p.utf8) {
    return html`<pre class="payload">${hexOf(p)}</pre>
      ${view !== 'hex' && html`<span class="badge warn">not UTF-8: hex</span>`}`;
  }
  const text = textOf(p);
  if (view === 'json') {
    try {
      return html`<pre class="payload">${JSON.stringify(JSON.parse(text), null, 2)}</pre>`;
    } catch {
      return html`<pre class="payload" title="not JSON: shown as text">${text}</pre>`;
    }
  }
  return html`<pre class="payload">${text}</pre>`;
}

// browseParams returns the API query of the form's fields.
function browseParams(f, from) {
  const q = new URLSearchParams({topic: f.topic, partition: f.partition, order: f.order, limit: f.limit, scan: f.scan});
  if (f.q) {
    q.set('q', f.q);
  }
  if (from !== undefined) {
    q.set('offset', from);
  } else if (f.start === 'offset' && f.offset !== '') {
    q.set('offset', f.offset);
  } else if (f.start === 'time' && f.time !== '') {
    q.set('time', new Date(f.time).toISOString());
  }
  return q;
}

// stoppedText explains why a browse stopped.
const stoppedText = {
  limit: 'the page is full',
  end: 'reached the end of the log',
  scan: 'reached the scan bound',
  time: 'reached the time bound',
};

// MessagesPage browses a partition's records.
export function MessagesPage({query}) {
  const [form, setForm] = useState(() => ({
    topic: query.get('topic') || '',
    partition: query.get('partition') || '0',
    order: query.get('order') || 'newest',
    start: query.get('offset') ? 'offset' : 'edge',
    offset: query.get('offset') || '',
    time: '',
    limit: query.get('limit') || '50',
    scan: query.get('scan') || '10000',
    q: query.get('q') || '',
  }));
  const [view, setView] = useState('text');
  const [topics, setTopics] = useState([]);
  const [result, setResult] = useState(null);
  const [error, setError] = useState(null);
  const [loading, setLoading] = useState(false);

  useEffect(() => {
    getJSON('/api/messages/topics').then(setTopics, (e) => setError(e.message));
  }, []);
  const partitions = useMemo(() => {
    const t = topics.find((t) => t.topic === form.topic);
    return t ? t.partitions : 0;
  }, [topics, form.topic]);

  const set = (name) => (ev) => setForm({...form, [name]: ev.target.value});

  // A link to #/messages?topic=T&partition=P opens on that partition's
  // records.
  useEffect(() => {
    if (form.topic) {
      browse();
    }
  }, []);

  async function browse(from) {
    setLoading(true);
    setError(null);
    const q = browseParams(form, from);
    history.replaceState(null, '', '#/messages?' + q.toString());
    try {
      setResult(await getJSON('/api/messages?' + q.toString()));
    } catch (e) {
      setError(e.message);
      setResult(null);
    } finally {
      setLoading(false);
    }
  }

  const submit = (ev) => {
    ev.preventDefault();
    browse();
  };

  return html`
    <h1>Messages</h1>
    <form class="panel data-form browse-form" onSubmit=${submit} aria-label="Browse a partition">
      <div class="toolbar">
        <label>Topic <input id="topic" list="topic-names" required value=${form.topic} onInput=${set('topic')} autocomplete="off" /></label>
        <datalist id="topic-names">${topics.map((t) => html`<option value=${t.topic} />`)}</datalist>
        <label>Partition <input id="partition" type="number" min="0" max=${partitions ? partitions - 1 : undefined}
          required value=${form.partition} onInput=${set('partition')} class="narrow" /></label>
        <label>Order <select id="order" value=${form.order} onChange=${set('order')}>
          <option value="newest">Newest first</option>
          <option value="oldest">Oldest first</option>
        </select></label>
        <label>Start <select id="start" value=${form.start} onChange=${set('start')}>
          <option value="edge">${form.order === 'newest' ? 'at the newest record' : 'at the oldest record'}</option>
          <option value="offset">at an offset</option>
          <option value="time">${form.order === 'newest' ? 'before a time' : 'at or after a time'}</option>
        </select></label>
        ${form.start === 'offset' && html`<label>Offset <input id="offset" type="number" min="0" required value=${form.offset} onInput=${set('offset')} class="narrow" /></label>`}
        ${form.start === 'time' && html`<label>Time <input id="time" type="datetime-local" step="1" required value=${form.time} onInput=${set('time')} /></label>`}
      </div>
      <div class="toolbar">
        <label>Filter <input id="filter" type="search" value=${form.q} onInput=${set('q')} placeholder="substring of key, value or a header value" size="32" /></label>
        <label>Page <input id="limit" type="number" min="1" max="500" value=${form.limit} onInput=${set('limit')} class="narrow" /> records</label>
        <label>Scan at most <input id="scan" type="number" min="1" max="1000000" value=${form.scan} onInput=${set('scan')} class="narrow" /> records</label>
        <button type="submit" class="primary" id="browse" disabled=${loading}>${loading ? 'Reading…' : 'Browse'}</button>
      </div>
    </form>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${result && html`<${BrowseResult} result=${result} view=${view} setView=${setView} onContinue=${browse} loading=${loading} />`}
    <${ProduceForm} browsed=${result && result.topic} />`;
}

// BrowseResult shows a page of records and how far the browse got.
function BrowseResult({result, view, setView, onContinue, loading}) {
  const r = result;
  const scanned = r.scanned === 0 ? 'no records scanned'
    : `scanned offsets ${r.scannedFrom}..${r.scannedTo} (${r.scanned} records)`;
  const summary = `${r.topic}[${r.partition}], log ${r.logStartOffset}..${r.highWatermark}: ${scanned}, ` +
    `${r.records.length} ${r.records.length === 1 ? 'match' : 'matches'}; ${stoppedText[r.stoppedBy] || r.stoppedBy}` +
    (r.next !== null ? `; next from ${r.next}.` : '.');
  return html`
    <div class="toolbar data-form scan-status" role="status">
      <span id="scan-summary">${summary}</span>
      ${r.next !== null && html`<button type="button" id="continue" onClick=${() => onContinue(r.next)} disabled=${loading}>Continue from ${r.next}</button>`}
      <label class="view-as">Show as <select id="view" value=${view} onChange=${(ev) => setView(ev.target.value)}>
        <option value="text">text</option>
        <option value="json">JSON</option>
        <option value="hex">hex</option>
      </select></label>
    </div>
    <div class="table-wrap">
      <table class="messages">
        <thead><tr><th class="num">Offset</th><th>Timestamp</th><th class="num">Partition</th><th>Key</th><th>Value</th><th>Headers</th></tr></thead>
        <tbody>
          ${r.records.map((m) => html`
            <tr key=${m.offset} data-offset=${m.offset}>
              <td class="num mono">${m.offset}</td>
              <td class="mono">${new Date(m.timestamp).toISOString()}</td>
              <td class="num">${m.partition}</td>
              <td><${Payload} p=${m.key} view=${view} /></td>
              <td><${Payload} p=${m.value} view=${view} /></td>
              <td>${m.headers.length === 0 ? html`<span class="muted">none</span>` : html`
                <dl class="headers">${m.headers.map((h) => html`<dt class="mono">${h.key}</dt><dd><${Payload} p=${h.value} view=${view} /></dd>`)}</dl>`}</td>
            </tr>`)}
          ${r.records.length === 0 && html`<tr><td colspan="6" class="muted">No records${r.next !== null ? ' yet: continue the scan' : ''}.</td></tr>`}
        </tbody>
      </table>
    </div>`;
}

// parseHeaders reads "key=value" lines into headers.
function parseHeaders(text) {
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => {
    const i = l.indexOf('=');
    return i < 0 ? {key: l.trim(), value: ''} : {key: l.slice(0, i).trim(), value: l.slice(i + 1)};
  });
}

// ProduceForm writes a test record after the user confirms it.
function ProduceForm({browsed}) {
  const [f, setF] = useState({topic: '', partition: '', key: '', noKey: false, value: '', headers: ''});
  // The topic browsed last is the one to write to, until the user names
  // another.
  useEffect(() => {
    if (browsed && f.topic === '') {
      setF({...f, topic: browsed});
    }
  }, [browsed]);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState(null);
  const [error, setError] = useState(null);
  const set = (name) => (ev) => setF({...f, [name]: ev.target.type === 'checkbox' ? ev.target.checked : ev.target.value});
  const record = () => ({
    topic: f.topic,
    partition: f.partition === '' ? -1 : Number(f.partition),
    key: f.noKey ? null : f.key,
    value: f.value,
    headers: parseHeaders(f.headers),
  });
  async function produce() {
    setBusy(true);
    setError(null);
    try {
      setDone(await postJSON('/api/messages', record()));
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  }
  const ask = (ev) => {
    ev.preventDefault();
    setDone(null);
    setConfirming(true);
  };
  const r = record();
  return html`
    <h2>Produce a test record</h2>
    <form class="panel data-form produce-form" onSubmit=${ask} aria-label="Produce a test record">
      <div class="toolbar">
        <label>Topic <input id="produce-topic" list="topic-names" required value=${f.topic} onInput=${set('topic')} autocomplete="off" /></label>
        <label>Partition <input id="produce-partition" type="number" min="0" value=${f.partition} onInput=${set('partition')} placeholder="any" class="narrow" /></label>
        <label>Key <input id="produce-key" value=${f.key} onInput=${set('key')} disabled=${f.noKey} /></label>
        <label><input type="checkbox" id="produce-no-key" checked=${f.noKey} onChange=${set('noKey')} /> no key</label>
      </div>
      <div class="toolbar">
        <label class="grow">Value <textarea id="produce-value" rows="3" value=${f.value} onInput=${set('value')}></textarea></label>
        <label class="grow">Headers, one key=value a line <textarea id="produce-headers" rows="3" value=${f.headers} onInput=${set('headers')}></textarea></label>
      </div>
      <button type="submit" id="produce">Produce…</button>
      ${done && html`<p role="status" id="produced">Written to ${done.topic}[${done.partition}] at offset <span class="mono">${done.offset}</span>.</p>`}
      ${error && html`<p class="error" role="alert">${error}</p>`}
    </form>
    <${ConfirmDialog} id="confirm-produce" open=${confirming} title="Produce this record?" confirmLabel="Produce"
      busy=${busy} onConfirm=${produce} onCancel=${() => setConfirming(false)}>
      <p>This writes a record to the cluster; consumers of the topic will read it.</p>
      <dl class="summary">
        <dt>Topic</dt><dd class="mono">${r.topic}</dd>
        <dt>Partition</dt><dd>${r.partition < 0 ? 'any (the partitioner chooses)' : r.partition}</dd>
        <dt>Key</dt><dd class="mono">${r.key === null ? 'null' : r.key || '(empty)'}</dd>
        <dt>Value</dt><dd class="mono">${r.value || '(empty)'}</dd>
        <dt>Headers</dt><dd class="mono">${r.headers.length ? r.headers.map((h) => `${h.key}=${h.value}`).join(', ') : 'none'}</dd>
      </dl>
    <//>`;
}
