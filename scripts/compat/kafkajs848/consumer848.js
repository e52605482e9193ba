// consumer848.js: a KIP-848 consumer group of @confluentinc/kafka-javascript
// (librdkafka with group.protocol=consumer) against a tripod cluster.
//
// It creates a topic of 6 partitions, produces keyed records in rounds,
// starts three consumers of one group one after the other, stops one, and
// checks what a user of the group relies on: each member gets a share of
// the partitions and no partition is owned by two members at once, the
// others take over a member's partitions when it leaves, every record is
// consumed, and the committed offsets reach the end of the log. It also
// reads the group back with librdkafka's admin API (ListGroups,
// DescribeGroups, fetchOffsets) and with `tripod groups describe`, and
// deletes it with DeleteGroups: refused while it has members, done once
// it is empty.
//
// Each check is printed to stdout as go test -json events (Action, Test,
// Output, Elapsed), which scripts/compat reads as it reads a Go suite's,
// and as a PASS or FAIL line on stderr. Exit status: 0 when every check
// passed, 1 otherwise.
//
// Environment: BOOTSTRAP (default 127.0.0.1:25092,127.0.0.1:25093,127.0.0.1:25094),
// TRIPOD (the tripod binary, for `groups describe`; default tripod),
// RECORDS (records per round, default 1000), ASSIGNOR (group.remote.assignor;
// default: the broker's), BROKER_PIDS (broker id:pid,... of the cluster: the
// group's coordinator is killed with SIGKILL after the member left, and the
// group must go on), DEBUG (librdkafka debug contexts, e.g. cgrp).
'use strict';

const { execFileSync } = require('child_process');
const { KafkaJS, librdkafkaVersion } = require('@confluentinc/kafka-javascript');
const { Kafka, logLevel } = KafkaJS;

const bootstrap = process.env.BOOTSTRAP || '127.0.0.1:25092,127.0.0.1:25093,127.0.0.1:25094';
const tripod = process.env.TRIPOD || 'tripod';
const perRound = parseInt(process.env.RECORDS || '1000', 10);
const assignor = process.env.ASSIGNOR || '';
// BROKER_PIDS (id:pid,...) enables the failover checks: the group's
// coordinator is killed.
const brokerPids = new Map((process.env.BROKER_PIDS || '').split(',').filter((x) => x).map((x) => {
  const [id, pid] = x.split(':');
  return [parseInt(id, 10), parseInt(pid, 10)];
}));
const partitions = 6;
const suffix = `${Date.now().toString(36)}-${process.pid}`;
const topic = `kjs848-${suffix}`;
const groupId = `kjs848-group-${suffix}`;
const ASSIGN = -175; // ERR__ASSIGN_PARTITIONS
const REVOKE = -174; // ERR__REVOKE_PARTITIONS
const NON_EMPTY_GROUP = 68;

const started = Date.now();
let failures = 0;

function event(e) {
  process.stdout.write(JSON.stringify(e) + '\n');
}

// check records one check's outcome.
function check(name, ok, detail, since) {
  const elapsed = (Date.now() - (since || started)) / 1000;
  event({ Action: 'run', Test: name });
  event({ Action: 'output', Test: name, Output: `${detail}\n` });
  event({ Action: ok ? 'pass' : 'fail', Test: name, Elapsed: elapsed });
  process.stderr.write(`${ok ? 'PASS' : 'FAIL'} ${name}: ${detail}\n`);
  if (!ok) failures++;
  return ok;
}

function log(msg) {
  process.stderr.write(`[${((Date.now() - started) / 1000).toFixed(1)}s] ${msg}\n`);
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// waitFor polls cond every 100 ms until it is true or timeoutMs passed.
// A cond that throws (an admin request that timed out while the group's
// coordinator moves) is tried again; the last error is logged.
async function waitFor(cond, timeoutMs) {
  const deadline = Date.now() + timeoutMs;
  let lastErr;
  for (;;) {
    try {
      if (await cond()) return true;
    } catch (e) {
      if (`${e}` !== `${lastErr}`) log(`retrying after: ${e}`);
      lastErr = e;
    }
    if (Date.now() > deadline) return false;
    await sleep(100);
  }
}

const kafka = new Kafka({
  kafkaJS: { brokers: bootstrap.split(','), clientId: 'tripod-kjs848', logLevel: logLevel.WARN },
});

// State shared by the consumers.
const seen = new Map(); // key -> times consumed
let badValues = 0;
const doubleOwned = []; // partitions assigned to a member while another owned them
const members = [];

function describeAssignment(m) {
  return `${m.name}:[${[...m.owned].sort((a, b) => a - b).join(',')}]`;
}

function assignmentLine() {
  return members.filter((m) => m.running).map(describeAssignment).join(' ');
}

async function startMember(name) {
  const m = { name, owned: new Set(), running: true, events: [], consumed: 0 };
  const config = {
    kafkaJS: { groupId, fromBeginning: true, autoCommit: true, autoCommitInterval: 500 },
    'group.protocol': 'consumer',
    'client.id': name,
    rebalance_cb: (err, assignment) => {
      const ps = assignment.filter((tp) => tp.topic === topic).map((tp) => tp.partition);
      if (err.code === ASSIGN) {
        for (const p of ps) {
          const other = members.find((o) => o !== m && o.running && o.owned.has(p));
          if (other) doubleOwned.push(`${topic}-${p} to ${m.name} while ${other.name} owned it`);
          m.owned.add(p);
        }
        m.events.push(`+${ps.join(',')}`);
      } else if (err.code === REVOKE) {
        for (const p of ps) m.owned.delete(p);
        m.events.push(`-${ps.join(',')}`);
      }
      log(`${name} ${err.code === ASSIGN ? 'assigned' : 'revoked'} [${ps.join(',')}]; now ${assignmentLine()}`);
    },
  };
  if (assignor) config['group.remote.assignor'] = assignor;
  if (process.env.DEBUG) config.debug = process.env.DEBUG;
  const consumer = kafka.consumer(config);
  m.consumer = consumer;
  await consumer.connect();
  await consumer.subscribe({ topics: [topic] });
  await consumer.run({
    eachMessage: async ({ message }) => {
      const key = message.key.toString();
      if (message.value.toString() !== `value-of-${key}`) badValues++;
      seen.set(key, (seen.get(key) || 0) + 1);
      m.consumed++;
    },
  });
  members.push(m);
  return m;
}

async function stopMember(m) {
  await m.consumer.disconnect();
  m.running = false;
  m.owned.clear();
}

let produced = 0;
async function produceRound(producer, round) {
  const messages = [];
  for (let i = 0; i < perRound; i++) {
    const key = `r${round}-k${i}`;
    messages.push({ key, value: `value-of-${key}` });
  }
  for (let i = 0; i < messages.length; i += 500) {
    await producer.send({ topic, messages: messages.slice(i, i + 500) });
  }
  produced += messages.length;
}

// shares checks that the running members' assignments are disjoint,
// cover every partition and give each member at least one.
function shares(running) {
  const all = new Set();
  let total = 0;
  for (const m of running) {
    if (m.owned.size === 0) return false;
    total += m.owned.size;
    for (const p of m.owned) all.add(p);
  }
  return all.size === partitions && total === partitions;
}

async function logEnds(admin) {
  let offs;
  try {
    offs = await admin.fetchTopicOffsets(topic);
  } catch (e) {
    throw new Error(`fetchTopicOffsets: ${e}`);
  }
  const ends = new Map();
  for (const o of offs) ends.set(o.partition, Number(o.high));
  return ends;
}

async function committed(admin) {
  let res;
  try {
    res = await admin.fetchOffsets({ groupId, topics: [topic] });
  } catch (e) {
    throw new Error(`fetchOffsets: ${e}`);
  }
  const out = new Map();
  for (const t of res) {
    if (t.topic !== topic) continue;
    for (const p of t.partitions) out.set(p.partition, Number(p.offset));
  }
  return out;
}

function offsetsLine(m) {
  return [...m.entries()].sort((a, b) => a[0] - b[0]).map(([p, o]) => `${p}:${o}`).join(' ');
}

async function committedAtEnd(admin, name, timeoutMs) {
  const since = Date.now();
  let ends = new Map();
  let got = new Map();
  const ok = await waitFor(async () => {
    ends = await logEnds(admin);
    got = await committed(admin);
    for (let p = 0; p < partitions; p++) {
      if (got.get(p) !== ends.get(p)) return false;
    }
    return true;
  }, timeoutMs);
  return check(name, ok, `committed ${offsetsLine(got)}; log end ${offsetsLine(ends)}`, since);
}

function tripodDescribe(args) {
  return execFileSync(tripod, ['groups', 'describe', groupId, '--bootstrap', bootstrap, ...args],
    { encoding: 'utf8', timeout: 30000 });
}

// table parses tripod's column output into rows of {COLUMN: value}.
function table(text) {
  const lines = text.split('\n').filter((l) => l.trim() !== '');
  if (lines.length === 0) return [];
  const header = lines[0].split(/\s{2,}/);
  return lines.slice(1).map((l) => {
    const cells = l.split(/\s{2,}/);
    const row = {};
    header.forEach((h, i) => { row[h] = cells[i]; });
    return row;
  });
}

async function main() {
  log(`librdkafka ${librdkafkaVersion}, bootstrap ${bootstrap}, topic ${topic}, group ${groupId}`);
  let admin = kafka.admin();
  let staleAdmin = null;
  await admin.connect();
  const producer = kafka.producer({ 'linger.ms': 5, acks: -1 });
  await producer.connect();

  let since = Date.now();
  try {
    await admin.createTopics({ topics: [{ topic, numPartitions: partitions, replicationFactor: 3 }] });
    const md = await admin.fetchTopicMetadata({ topics: [topic] });
    const n = md[0].partitions.length;
    check('CreateTopic', n === partitions, `${topic}: ${n} partitions`, since);
  } catch (e) {
    check('CreateTopic', false, `${e}`, since);
    throw e;
  }

  since = Date.now();
  await produceRound(producer, 1);

  // One member, then a second, then a third: each gets a share.
  const c1 = await startMember('c1');
  let ok = await waitFor(() => shares([c1]), 60000);
  check('Join/1', ok, `one member owns every partition: ${assignmentLine()}`, since);

  since = Date.now();
  const c2 = await startMember('c2');
  ok = await waitFor(() => shares([c1, c2]), 60000);
  check('Join/2', ok, `two members share the partitions: ${assignmentLine()}`, since);
  await produceRound(producer, 2);

  since = Date.now();
  const c3 = await startMember('c3');
  ok = await waitFor(() => shares([c1, c2, c3]), 60000);
  check('Join/3', ok, `three members share the partitions: ${assignmentLine()}`, since);
  await produceRound(producer, 3);

  since = Date.now();
  ok = await waitFor(() => seen.size === produced, 60000);
  check('Consume/before-leave', ok, `${seen.size} of ${produced} records consumed (c1 ${c1.consumed}, c2 ${c2.consumed}, c3 ${c3.consumed})`, since);
  // Let auto-commit write what was consumed so far.
  await committedAtEnd(admin, 'Commit/before-leave', 30000);

  // The group as librdkafka's admin client and tripod's tool see it.
  since = Date.now();
  try {
    const listed = await admin.listGroups();
    const g = listed.groups.find((x) => x.groupId === groupId);
    check('Admin/ListGroups', g && g.type === KafkaJS.ConsumerGroupTypes.CONSUMER,
      g ? `type ${g.type} (CONSUMER is ${KafkaJS.ConsumerGroupTypes.CONSUMER}), state ${g.state}, protocolType ${g.protocolType}` : 'group not listed', since);
  } catch (e) {
    check('Admin/ListGroups', false, `${e}`, since);
  }
  since = Date.now();
  try {
    const d = await admin.describeGroups([groupId]);
    const g = d.groups[0];
    const assigned = g.members.map((mm) => `${mm.clientId}:[${mm.assignment.topicPartitions.map((tp) => tp.partition).sort((a, b) => a - b).join(',')}]`);
    const total = g.members.reduce((s, mm) => s + mm.assignment.topicPartitions.length, 0);
    check('Admin/DescribeGroups/stable',
      !g.error && g.type === KafkaJS.ConsumerGroupTypes.CONSUMER && g.members.length === 3 && total === partitions &&
        g.state === KafkaJS.ConsumerGroupStates.STABLE,
      `type ${g.type}, state ${g.state}, assignor ${g.partitionAssignor}, members ${assigned.join(' ')}${g.error ? `, error ${g.error.message}` : ''}`, since);
  } catch (e) {
    check('Admin/DescribeGroups/stable', false, `${e}`, since);
  }
  since = Date.now();
  try {
    const state = table(tripodDescribe(['--state']));
    const mem = table(tripodDescribe(['--members', '--verbose']));
    const s = state[0] || {};
    const epochs = mem.map((r) => `${r['CLIENT-ID']}@${r['CURRENT-EPOCH']}/${r['TARGET-EPOCH']}`);
    const epochOK = mem.length === 3 && mem.every((r) => parseInt(r['CURRENT-EPOCH'], 10) > 0 &&
      r['CURRENT-EPOCH'] === r['TARGET-EPOCH'] && r.UPGRADED === 'true');
    check('TripodGroupsDescribe',
      'GROUP-EPOCH' in s && parseInt(s['GROUP-EPOCH'], 10) > 0 && s.STATE === 'Stable' && s['#MEMBERS'] === '3' && epochOK,
      `state ${s.STATE}, assignor ${s['ASSIGNMENT-STRATEGY']}, group epoch ${s['GROUP-EPOCH']}, target epoch ${s['TARGET-ASSIGNMENT-EPOCH']}, members ${epochs.join(' ')}`, since);
  } catch (e) {
    check('TripodGroupsDescribe', false, `${e}`, since);
  }

  // DeleteGroups refuses a group with members.
  since = Date.now();
  try {
    await admin.deleteGroups([groupId]);
    check('Admin/DeleteGroups/non-empty', false, 'the group with three members was deleted', since);
  } catch (e) {
    const report = e.groups && e.groups[0];
    const code = report && report.error ? report.error.code : undefined;
    check('Admin/DeleteGroups/non-empty', code === NON_EMPTY_GROUP,
      `refused: ${report && report.error ? `${report.error.message} (code ${code})` : e}`, since);
  }

  // The third member leaves: the two others take over its partitions and
  // consume what is produced to them afterwards.
  since = Date.now();
  const left = [...c3.owned];
  await stopMember(c3);
  ok = await waitFor(() => shares([c1, c2]), 60000);
  check('Leave/takeover', ok, `c3 left owning [${left.sort((a, b) => a - b).join(',')}]; now ${assignmentLine()}`, since);
  await produceRound(producer, 4);

  since = Date.now();
  ok = await waitFor(() => seen.size === produced, 60000);
  let dups = 0;
  for (const v of seen.values()) if (v > 1) dups += v - 1;
  check('Consume/all', ok && badValues === 0,
    `${seen.size} of ${produced} distinct records consumed, ${dups} consumed again after a rebalance, ${badValues} with a wrong value (c1 ${c1.consumed}, c2 ${c2.consumed}, c3 ${c3.consumed})`, since);
  await committedAtEnd(admin, 'Commit/after-leave', 30000);

  if (brokerPids.size > 0) {
    // The group's coordinator dies (SIGKILL): another broker loads the
    // group from __consumer_offsets, and the members go on with it.
    since = Date.now();
    let coordinator;
    try {
      const d = await admin.describeGroups([groupId]);
      coordinator = d.groups[0].coordinator && d.groups[0].coordinator.id;
    } catch (e) {
      log(`describeGroups: ${e}`);
    }
    const pid = brokerPids.get(coordinator);
    if (pid === undefined) {
      check('Failover/coordinator-killed', false, `coordinator ${coordinator} has no pid in BROKER_PIDS`, since);
    } else {
      process.kill(pid, 'SIGKILL');
      log(`killed broker ${coordinator} (pid ${pid}), the group's coordinator`);
      // librdkafka's admin client keeps the leaders and coordinator it
      // cached: for about a minute it sends its requests for them to the
      // dead broker and times out, without asking the live brokers
      // (tripod's request trace shows none from it), where a new client
      // asks Metadata and FindCoordinator and is answered at once. The
      // checks below use a new one, as a tool started after the failure
      // would.
      staleAdmin = admin;
      admin = kafka.admin();
      await admin.connect();
      await produceRound(producer, 5);
      ok = await waitFor(() => seen.size === produced, 90000);
      check('Failover/consume', ok, `${seen.size} of ${produced} records consumed after broker ${coordinator} was killed; now ${assignmentLine()}`, since);
      await committedAtEnd(admin, 'Failover/commit', 60000);
      since = Date.now();
      let d;
      ok = await waitFor(async () => {
        try {
          d = (await admin.describeGroups([groupId])).groups[0];
        } catch (e) {
          return false;
        }
        return !d.error && d.members.length === 2 && d.state === KafkaJS.ConsumerGroupStates.STABLE &&
          d.coordinator && d.coordinator.id !== coordinator;
      }, 60000);
      check('Failover/group', ok && shares([c1, c2]),
        d ? `coordinator ${d.coordinator && d.coordinator.id}, state ${d.state}, ${d.members.length} members; ${assignmentLine()}` : 'not described', since);
    }
  }

  check('Assign/no-double-ownership', doubleOwned.length === 0,
    doubleOwned.length === 0 ? 'no partition was assigned to a member while another owned it'
      : doubleOwned.join('; '), started);

  since = Date.now();
  await stopMember(c1);
  await stopMember(c2);
  check('Close', true, `c1 ${c1.events.join(' ')}; c2 ${c2.events.join(' ')}; c3 ${c3.events.join(' ')}`, since);
  await committedAtEnd(admin, 'Commit/after-close', 10000);
  since = Date.now();
  try {
    const d = await admin.describeGroups([groupId]);
    const g = d.groups[0];
    check('Admin/DescribeGroups/empty', g.members.length === 0 && g.state === KafkaJS.ConsumerGroupStates.EMPTY,
      `state ${g.state}, ${g.members.length} members`, since);
  } catch (e) {
    check('Admin/DescribeGroups/empty', false, `${e}`, since);
  }

  // DeleteGroups deletes the Empty group and its offsets.
  since = Date.now();
  try {
    await admin.deleteGroups([groupId]);
    const listed = await admin.listGroups();
    const still = listed.groups.filter((x) => x.groupId === groupId);
    const left = await committed(admin);
    const kept = [...left.values()].filter((o) => o >= 0).length;
    check('Admin/DeleteGroups/empty', still.length === 0 && kept === 0,
      `deleted; listed ${still.length} times after, ${kept} committed offsets left`, since);
  } catch (e) {
    const report = e.groups && e.groups[0];
    check('Admin/DeleteGroups/empty', false, `${report && report.error ? report.error.message : e}`, since);
  }

  await producer.disconnect();
  await admin.disconnect();
  if (staleAdmin) await staleAdmin.disconnect();
}

const overall = setTimeout(() => {
  check('Run', false, 'did not finish in 10 minutes');
  process.exit(1);
}, 10 * 60 * 1000);

main().then(() => {
  clearTimeout(overall);
  log(`${failures} checks failed`);
  process.exit(failures === 0 ? 0 : 1);
}, (e) => {
  clearTimeout(overall);
  check('Run', false, `${e && e.stack ? e.stack : e}`);
  process.exit(1);
});
