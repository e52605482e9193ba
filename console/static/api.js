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
export function stream(path, names, onEvent, onState) {
  const es = new EventSource(path);
  for (const name of names) {
    es.addEventListener(name, (ev) => onEvent(name, JSON.parse(ev.data)));
  }
  if (onState) {
    es.onopen = () => onState(true);
    es.onerror = () => onState(false);
  }
  return () => es.close();
}
