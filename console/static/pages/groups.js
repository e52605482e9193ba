// groups.js: the consumer groups: a searchable, paginated list, and a
// group's page with its members, committed offsets and lag, its lag over
// time, and the reset of its offsets (a dry run first, then a confirmed
// execute), as `tripod groups reset-offsets` does.
import {html, useState, useEffect} from '../vendor/preact-htm.mjs';
import {getJSON, postJSON} from '../api.js';
import {ConfirmDialog} from './confirm.js';

const pageSize = 50;

// stateBadge shows a group's state: Stable is well, Empty is idle, a
// rebalance is a warning, Dead is bad.
function StateBadge({state}) {
  const cls = {Stable: 'ok', Empty: '', Dead: 'bad'}[state] ?? 'warn';
  return html`<span class="badge ${cls}">${state || 'unknown'}</span>`;
}

// n shows a number that may be missing.
const n = (v) => (v === null || v === undefined ? html`<span class="muted">-</span>` : v.toLocaleString('en'));

// GroupsPage lists the consumer groups, searchable by name, a page at a
// time.
export function GroupsPage() {
  const [q, setQ] = useState('');
  const [offset, setOffset] = useState(0);
  const [page, setPage] = useState(null);
  const [error, setError] = useState(null);
  useEffect(() => {
    let live = true;
    const timer = setTimeout(() => {
      const params = new URLSearchParams({q, offset, limit: pageSize});
      getJSON('/api/groups?' + params).then(
        (p) => live && (setPage(p), setError(null)),
        (e) => live && setError(e.message));
    }, 200);
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [q, offset]);
  return html`
    <h1>Consumer groups</h1>
    <div class="toolbar data-form">
      <label>Search <input id="group-search" type="search" value=${q} placeholder="part of a group's name"
        onInput=${(ev) => (setQ(ev.target.value), setOffset(0))} /></label>
      ${page && html`<span class="muted" role="status">${page.total} ${page.total === 1 ? 'group' : 'groups'}</span>`}
    </div>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${page && html`
      <div class="table-wrap">
        <table class="groups">
          <thead><tr><th>Group</th><th>State</th><th>Protocol type</th><th class="num">Members</th><th class="num">Lag</th></tr></thead>
          <tbody>
            ${page.groups.map((g) => html`
              <tr key=${g.group}>
                <td><a href="#/groups/${encodeURIComponent(g.group)}">${g.group}</a></td>
                <td><${StateBadge} state=${g.state} /></td>
                <td>${g.protocolType || html`<span class="muted">none</span>`}</td>
                <td class="num">${g.members}</td>
                <td class="num">${g.lagError ? html`<span class="error" title=${g.lagError}>error</span>` : n(g.lag)}</td>
              </tr>`)}
            ${page.groups.length === 0 && html`<tr><td colspan="5" class="muted">No consumer groups${q ? ' match' : ''}.</td></tr>`}
          </tbody>
        </table>
      </div>
      <nav class="toolbar" aria-label="Pages of groups">
        <button type="button" disabled=${offset === 0} onClick=${() => setOffset(Math.max(0, offset - pageSize))}>Previous</button>
        <span class="muted">${page.total ? `${offset + 1}–${Math.min(offset + pageSize, page.total)} of ${page.total}` : ''}</span>
        <button type="button" disabled=${offset + pageSize >= page.total} onClick=${() => setOffset(offset + pageSize)}>Next</button>
      </nav>`}`;
}

// LagChart draws a group's total lag over time as a small line chart.
function LagChart({history}) {
  const w = 600, h = 120, pad = 4;
  if (history.length < 2) {
    return html`<p class="muted">The lag chart fills in as the console samples the group, every few seconds while this page is open.</p>`;
  }
  const t0 = history[0].at, t1 = history[history.length - 1].at;
  const max = Math.max(1, ...history.map((s) => s.lag));
  const x = (t) => pad + ((t - t0) / Math.max(1, t1 - t0)) * (w - 2 * pad);
  const y = (v) => h - pad - (v / max) * (h - 2 * pad);
  const points = history.map((s) => `${x(s.at).toFixed(1)},${y(s.lag).toFixed(1)}`).join(' ');
  const minutes = Math.max(1, Math.round((t1 - t0) / 60000));
  const last = history[history.length - 1].lag;
  return html`
    <figure class="lag-chart">
      <svg viewBox="0 0 ${w} ${h}" role="img" preserveAspectRatio="none"
        aria-label="Total lag over the last ${minutes} minutes: now ${last}, at most ${max}">
        <line x1="0" y1=${h - pad} x2=${w} y2=${h - pad} class="axis" />
        <polyline points=${points} class="lag-line" />
      </svg>
      <figcaption class="muted">Total lag, ${new Date(t0).toLocaleTimeString()} to ${new Date(t1).toLocaleTimeString()}: at most ${max.toLocaleString('en')}, now ${last.toLocaleString('en')}.</figcaption>
    </figure>`;
}

// GroupPage shows one group: members, offsets and lag, its lag over
// time, and the reset of its offsets. It reads the group again every
// few seconds, which also keeps the server sampling its lag.
export function GroupPage({args}) {
  const name = args[0];
  const [group, setGroup] = useState(null);
  const [error, setError] = useState(null);
  const [reloads, setReloads] = useState(0);
  useEffect(() => {
    let live = true;
    let timer;
    const load = () => getJSON('/api/groups/' + encodeURIComponent(name)).then(
      (g) => {
        if (live) {
          setGroup(g);
          setError(null);
          timer = setTimeout(load, g.sampleEvery);
        }
      },
      (e) => {
        if (live) {
          setError(e.message);
          timer = setTimeout(load, 5000);
        }
      });
    load();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [name, reloads]);
  const g = group;
  return html`
    <h1>Group ${name}</h1>
    <p><a href="#/groups">All consumer groups</a></p>
    ${error && html`<p class="error" role="alert">${error}</p>`}
    ${g && html`
      <div class="cards">
        <div class="card"><div class="label">State</div><div class="value"><${StateBadge} state=${g.state} /></div></div>
        <div class="card"><div class="label">Members</div><div class="value">${g.members.length}</div></div>
        <div class="card"><div class="label">Total lag</div><div class="value" id="total-lag">${g.totalLag.toLocaleString('en')}</div></div>
        <div class="card"><div class="label">Coordinator</div><div class="value">broker ${g.coordinator}</div></div>
        <div class="card"><div class="label">Protocol</div><div class="value">${g.protocolType || '-'} ${g.protocol ? '/ ' + g.protocol : ''}</div></div>
      </div>
      <h2>Lag over time</h2>
      <${LagChart} history=${g.history} />
      <h2>Members</h2>
      ${g.members.length === 0 ? html`<p class="muted">No active members: the group is ${g.state}.</p>` : html`
        <div class="table-wrap">
          <table class="members">
            <thead><tr><th>Client ID</th><th>Host</th><th>Member ID</th><th>Assignment</th></tr></thead>
            <tbody>${g.members.map((m) => html`
              <tr key=${m.memberId}>
                <td>${m.clientId}</td><td class="mono">${m.host}</td><td class="mono">${m.memberId}</td>
                <td>${m.assignment.length ? m.assignment.map((a) => `${a.topic}(${a.partitions.join(',')})`).join(', ') : html`<span class="muted">none</span>`}</td>
              </tr>`)}</tbody>
          </table>
        </div>`}
      <h2>Offsets</h2>
      <div class="table-wrap">
        <table class="offsets" id="offsets">
          <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Committed offset</th><th class="num">Log end offset</th><th class="num">Lag</th><th>Consumer</th></tr></thead>
          <tbody>${g.partitions.map((p) => html`
            <tr key=${p.topic + '/' + p.partition} data-topic=${p.topic} data-partition=${p.partition}>
              <td>${p.topic}</td><td class="num">${p.partition}</td>
              <td class="num committed">${n(p.committedOffset)}</td><td class="num">${n(p.logEndOffset)}</td>
              <td class="num">${p.error ? html`<span class="error" title=${p.error}>error</span>` : n(p.lag)}</td>
              <td>${p.clientId || html`<span class="muted">-</span>`}</td>
            </tr>`)}
            ${g.partitions.length === 0 && html`<tr><td colspan="6" class="muted">No committed offsets.</td></tr>`}
          </tbody>
        </table>
      </div>
      <${ResetOffsets} group=${g} onDone=${() => setReloads(reloads + 1)} />`}`;
}

// scenarios are reset-offsets' scenarios, by kafka-consumer-groups' names.
const scenarios = [
  ['to-earliest', 'to earliest (log start offset)'],
  ['to-latest', 'to latest (log end offset)'],
  ['to-offset', 'to an offset'],
  ['to-datetime', 'to a datetime'],
  ['shift-by', 'shift by'],
];

// ResetOffsets plans a reset of the group's committed offsets (a dry
// run), then commits it after the user confirms the plan shown.
function ResetOffsets({group, onDone}) {
  const topics = [...new Set(group.partitions.map((p) => p.topic))];
  const [f, setF] = useState({scenario: 'to-earliest', topic: '', offset: '', datetime: ''});
  const [plan, setPlan] = useState(null);
  const [confirming, setConfirming] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState(null);
  const set = (name) => (ev) => (setF({...f, [name]: ev.target.value}), setPlan(null));
  const body = (execute) => ({
    scenario: f.scenario,
    topic: f.topic,
    offset: f.offset === '' ? null : Number(f.offset),
    datetime: f.datetime === '' ? '' : new Date(f.datetime).toISOString(),
    execute,
    // The server commits only if its plan is still the one shown.
    confirmed: execute && plan ? plan.plan : null,
  });
  async function send(execute) {
    setBusy(true);
    setError(null);
    try {
      const a = await postJSON('/api/groups/' + encodeURIComponent(group.group) + '/reset-offsets', body(execute));
      setPlan(a);
      if (execute) {
        onDone();
      }
    } catch (e) {
      setError(e.message);
      if (execute) {
        setPlan(null);
      }
    } finally {
      setBusy(false);
      setConfirming(false);
    }
  }
  const dryRun = (ev) => {
    ev.preventDefault();
    send(false);
  };
  const label = scenarios.find(([s]) => s === f.scenario)[1];
  return html`
    <h2>Reset offsets</h2>
    <form class="panel data-form reset-form" onSubmit=${dryRun} aria-label="Reset offsets">
      <div class="toolbar">
        <label>Scenario <select id="reset-scenario" value=${f.scenario} onChange=${set('scenario')}>
          ${scenarios.map(([s, l]) => html`<option value=${s}>${l}</option>`)}
        </select></label>
        <label>Topics <select id="reset-topic" value=${f.topic} onChange=${set('topic')}>
          <option value="">all topics of the group</option>
          ${topics.map((t) => html`<option value=${t}>${t}</option>`)}
        </select></label>
        ${(f.scenario === 'to-offset' || f.scenario === 'shift-by') && html`
          <label>${f.scenario === 'to-offset' ? 'Offset' : 'Shift by'} <input id="reset-offset" type="number"
            min=${f.scenario === 'to-offset' ? 0 : undefined} required value=${f.offset} onInput=${set('offset')} class="narrow" /></label>`}
        ${f.scenario === 'to-datetime' && html`
          <label>Datetime <input id="reset-datetime" type="datetime-local" step="1" required value=${f.datetime} onInput=${set('datetime')} /></label>`}
        <button type="submit" id="reset-dry-run" disabled=${busy}>Dry run</button>
      </div>
      <p class="muted">Kafka resets a group's committed offsets only while it is Empty: stop its consumers first.</p>
      ${error && html`<p class="error" role="alert" id="reset-error">${error}</p>`}
      ${plan && html`
        <h3 id="reset-plan-title">${plan.executed ? 'Committed' : 'Dry run: nothing changed yet'}</h3>
        ${plan.notes.map((note) => html`<p class="notice">${note}</p>`)}
        <div class="table-wrap">
          <table class="reset-plan" id=${plan.executed ? 'reset-done' : 'reset-plan'} aria-labelledby="reset-plan-title">
            <thead><tr><th>Topic</th><th class="num">Partition</th><th class="num">Current offset</th><th class="num">New offset</th>${plan.executed && html`<th>Result</th>`}</tr></thead>
            <tbody>${plan.plan.map((l) => html`
              <tr key=${l.topic + '/' + l.partition} data-topic=${l.topic} data-partition=${l.partition}>
                <td>${l.topic}</td><td class="num">${l.partition}</td><td class="num">${n(l.currentOffset)}</td>
                <td class="num new-offset">${l.newOffset}</td>
                ${plan.executed && html`<td>${l.error ? html`<span class="error">${l.error}</span>` : html`<span class="badge ok">committed</span>`}</td>`}
              </tr>`)}</tbody>
          </table>
        </div>
        ${!plan.executed && plan.plan.length > 0 && html`
          <button type="button" class="danger" id="reset-execute" onClick=${() => setConfirming(true)} disabled=${busy}>Execute reset…</button>`}`}
    </form>
    <${ConfirmDialog} id="confirm-reset" open=${confirming} danger title="Reset the offsets of ${group.group}?"
      confirmLabel="Reset offsets" busy=${busy} onConfirm=${() => send(true)} onCancel=${() => setConfirming(false)}>
      <p>This commits new offsets for ${plan ? plan.plan.length : 0} partitions, ${label}${f.topic ? ` of ${f.topic}` : ''}:
        the group's consumers will start from them. If the logs moved since the dry run and the plan is no longer the one shown, nothing is committed.</p>
    <//>`;
}
