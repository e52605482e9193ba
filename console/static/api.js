// api.js: how pages talk to the console's server.

// getJSON fetches a JSON API path; a failed request throws an Error with
// the server's message.
export async function getJSON(path, options) {
  const resp = await fetch(path, options);
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    throw new Error(body.error || `${resp.status} ${resp.statusText}`);
  }
  return body;
}

// postJSON sends body as JSON to path and returns the JSON answer.
export function postJSON(path, body) {
  return getJSON(path, {
    method: 'POST',
    headers: {'Content-Type': 'application/json'},
    body: JSON.stringify(body),
  });
}

// stream follows the server-sent events of path: onEvent(name, data) for
// each, data parsed from JSON. It returns the function that stops it. The
// browser reconnects by itself when the connection drops.
//
// A page the browser keeps in its back/forward cache would keep its
// stream open: over HTTP/1.1 a browser opens at most six connections to
// one server, so a few such pages would leave none for the next page.
// The stream closes when the page is hidden and opens again when the
// page is shown from the cache.
export function stream(path, names, onEvent, onState) {
  let es = null;
  const open = () => {
    es = new EventSource(path);
    for (const name of names) {
      es.addEventListener(name, (ev) => onEvent(name, JSON.parse(ev.data)));
    }
    if (onState) {
      es.onopen = () => onState(true);
      es.onerror = () => onState(false);
    }
  };
  const hide = () => {
    if (es) {
      es.close();
      es = null;
      if (onState) onState(false);
    }
  };
  const show = (ev) => {
    if (ev.persisted && !es) open();
  };
  open();
  addEventListener('pagehide', hide);
  addEventListener('pageshow', show);
  return () => {
    removeEventListener('pagehide', hide);
    removeEventListener('pageshow', show);
    hide();
  };
}
