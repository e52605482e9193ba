// live.js: what the live pages (cluster, topics, timeline) share: a
// stream hook, the live indicator, a pager and how brokers are named.
import {html, useState, useEffect, useRef} from '../vendor/preact-htm.mjs';
import {stream} from '../api.js';

// useStream follows the server-sent events of path (null: none) and
// calls onEvent(name, data) for each; it returns whether the stream is
// connected. The stream is reopened when path changes.
export function useStream(path, names, onEvent) {
  const [connected, setConnected] = useState(false);
  const handler = useRef(onEvent);
  handler.current = onEvent;
  useEffect(() => {
    if (!path) return undefined;
    setConnected(false);
    return stream(path, names, (name, data) => {
      setConnected(true);
      handler.current(name, data);
    }, setConnected);
  }, [path]);
  return connected;
}

// Live says whether the page is following the cluster.
export function Live({connected}) {
  return html`<span class=${connected ? 'live on' : 'live'} role="status">
    ${connected ? 'live' : 'disconnected'}</span>`;
}

// Pager moves between pages (from 0) of total items, size to a page.
export function Pager({page, size, total, onPage, label}) {
  const pages = Math.max(1, Math.ceil(total / size));
  if (pages <= 1) return null;
  return html`<nav class="pager" aria-label=${label || 'Pages'}>
    <button type="button" disabled=${page <= 0} onClick=${() => onPage(page - 1)}>Previous</button>
    <span>page ${page + 1} of ${pages}</span>
    <button type="button" disabled=${page >= pages - 1} onClick=${() => onPage(page + 1)}>Next</button>
  </nav>`;
}

// ids lists broker ids as "1, 2, 3" ("none" for an empty list).
export function ids(list) {
  return list && list.length ? list.join(', ') : 'none';
}

// ago is how long before now an ISO time was, as "1.2 s ago".
export function ago(iso, now) {
  if (!iso) return 'never';
  const ms = (now || Date.now()) - Date.parse(iso);
  if (ms < 1000) return `${Math.max(0, Math.round(ms))} ms ago`;
  if (ms < 120000) return `${(ms / 1000).toFixed(1)} s ago`;
  return `${Math.round(ms / 60000)} min ago`;
}

// time shows an ISO time as the local hh:mm:ss.mmm.
export function time(iso) {
  const d = new Date(iso);
  const pad = (n, w = 2) => String(n).padStart(w, '0');
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}
