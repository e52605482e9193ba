"""confluent-kafka (librdkafka) transactions against a tripod broker.

Usage: confluent_txn.py BOOTSTRAP TOPIC (TOPIC has 3 partitions). Prints
one JSON object a line, one per step: a committed transaction, an aborted
one, a producer fenced by a newer instance with its transactional.id (its
open transaction aborted by the coordinator), the replacement's commit,
then what a read_committed and a read_uncommitted consumer read.
"""
import json
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

bootstrap, topic = sys.argv[1], sys.argv[2]
PARTITIONS = 3
TIMEOUT = 60


def out(**kw):
    print(json.dumps(kw), flush=True)


def producer(txid):
    return Producer({
        'bootstrap.servers': bootstrap,
        'transactional.id': txid,
        'transaction.timeout.ms': 60000,
        'linger.ms': 5,
    })


def produce(p, prefix, n):
    for i in range(n):
        p.produce(topic, key=str(i), value='%s-%d' % (prefix, i), partition=i % PARTITIONS)


p = producer('confluent-txn')
p.init_transactions(TIMEOUT)

p.begin_transaction()
produce(p, 'committed', 10)
p.commit_transaction(TIMEOUT)
out(step='committed', n=10)

p.begin_transaction()
produce(p, 'aborted', 5)
p.flush(TIMEOUT)
p.abort_transaction(TIMEOUT)
out(step='aborted', n=5)

# A zombie: its transaction is open and written when a new instance with
# the same transactional.id starts; the new instance's init fences it and
# has the coordinator abort what it wrote.
p.begin_transaction()
produce(p, 'zombie', 3)
p.flush(TIMEOUT)
p2 = producer('confluent-txn')
p2.init_transactions(TIMEOUT)
try:
    produce(p, 'zombie-late', 1)
    p.commit_transaction(TIMEOUT)
    out(step='fenced', fenced=False)
except KafkaException as e:
    err = e.args[0]
    out(step='fenced', fenced=True, fatal=err.fatal(), error=err.name())

p2.begin_transaction()
produce(p2, 'replacement', 4)
p2.commit_transaction(TIMEOUT)
out(step='replacement', n=4)


def read(isolation):
    c = Consumer({
        'bootstrap.servers': bootstrap,
        'group.id': 'confluent-txn-' + isolation,
        'isolation.level': isolation,
        'enable.auto.commit': False,
        'enable.partition.eof': True,
    })
    tps = [TopicPartition(topic, i, 0) for i in range(PARTITIONS)]
    c.assign(tps)
    # The end of each partition as this isolation level sees it: the last
    # stable offset for read_committed, the high watermark otherwise.
    ends = {}
    for tp in tps:
        _, high = c.get_watermark_offsets(tp, timeout=TIMEOUT, cached=False)
        ends[tp.partition] = high
    values, positions = [], {tp.partition: 0 for tp in tps}
    deadline = time.monotonic() + TIMEOUT
    while any(positions[i] < ends[i] for i in ends) and time.monotonic() < deadline:
        m = c.poll(1.0)
        if m is None:
            continue
        if m.error():
            if m.error().code() == -191:  # _PARTITION_EOF
                positions[m.partition()] = max(positions[m.partition()], m.offset())
                continue
            raise KafkaException(m.error())
        values.append(m.value().decode())
        positions[m.partition()] = m.offset() + 1
    c.close()
    return sorted(values), ends


for isolation in ('read_committed', 'read_uncommitted'):
    values, ends = read(isolation)
    out(step=isolation, values=values, ends=ends)
