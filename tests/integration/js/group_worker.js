#!/usr/bin/env node
// One kafkajs consumer-group member as its own process: the kafkajs twin of
// tests/integration/groups/group_worker.py, speaking the same line protocol (see that file).
//
// Usage: node group_worker.js SPEC_JSON, where the spec holds bootstrap, group, name and either
// topics or pattern (a JavaScript RegExp source). The member processes each batch, then commits
// the batch's next offsets and waits for the answer (commit-after-processing, no auto-commit).
// Events go to stdout as JSON lines; kafkajs's log goes to stderr. A line "stop" on stdin (or
// EOF) disconnects gracefully (LeaveGroup) and exits 0.
//
// kafkajs resolves a pattern subscription once, when `subscribe` is called: topics created
// later are not picked up (kafkajs's documented behaviour, not the broker's).
'use strict'

const readline = require('readline')
const { Kafka, logLevel } = require('kafkajs')

const SESSION_TIMEOUT_MS = 6000
const HEARTBEAT_INTERVAL_MS = 500
const REBALANCE_TIMEOUT_MS = 20000
const FETCH_MAX_WAIT_MS = 100
const METADATA_MAX_AGE_MS = 1000

const emit = event => process.stdout.write(JSON.stringify(event) + '\n')

const logCreator = () => ({ namespace, label, log }) => {
  process.stderr.write(JSON.stringify({ level: label, namespace, ...log }) + '\n')
}

async function main () {
  const spec = JSON.parse(process.argv[2])
  const kafka = new Kafka({
    clientId: spec.name || 'worker',
    brokers: spec.bootstrap.split(','),
    connectionTimeout: 3000,
    requestTimeout: 10000,
    retry: { retries: 10, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.INFO,
    logCreator,
  })
  const consumer = kafka.consumer({
    groupId: spec.group,
    sessionTimeout: SESSION_TIMEOUT_MS,
    heartbeatInterval: HEARTBEAT_INTERVAL_MS,
    rebalanceTimeout: REBALANCE_TIMEOUT_MS,
    maxWaitTimeInMs: FETCH_MAX_WAIT_MS,
    metadataMaxAge: METADATA_MAX_AGE_MS,
    allowAutoTopicCreation: false,
  })
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    const tps = []
    for (const [topic, partitions] of Object.entries(payload.memberAssignment)) {
      for (const partition of partitions) tps.push([topic, partition])
    }
    tps.sort((a, b) => (a[0] === b[0] ? a[1] - b[1] : a[0] < b[0] ? -1 : 1))
    emit({ e: 'assigned', tps, incremental: false })
  })
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    // kafkajs restarts the consumer itself after a retriable crash (e.g. no broker reachable
    // while one restarts); only a crash it gives up on is fatal.
    const error = String(payload.error && payload.error.stack)
    emit(payload.restart ? { e: 'client_error', error } : { e: 'fatal', error })
  })

  let stopping = null
  const stop = () => {
    if (stopping === null) {
      stopping = consumer.disconnect().then(() => {
        emit({ e: 'closed' })
        process.exit(0)
      })
    }
    return stopping
  }
  readline.createInterface({ input: process.stdin }).on('line', line => {
    if (line.trim() === 'stop') stop()
  }).on('close', stop)

  await consumer.connect()
  const topics = spec.pattern ? [new RegExp(spec.pattern)] : spec.topics
  await consumer.subscribe({ topics, fromBeginning: true })
  emit({ e: 'subscribed' })

  let count = 0
  await consumer.run({
    autoCommit: false,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset }) => {
      if (batch.messages.length === 0) return
      const records = batch.messages.map(m => [batch.topic, batch.partition, Number(m.offset)])
      const id = ++count
      emit({ e: 'batch', id, records })
      if (spec.work_ms) await new Promise(resolve => setTimeout(resolve, spec.work_ms))
      const last = batch.messages[batch.messages.length - 1].offset
      const next = String(Number(last) + 1)
      const offsets = [[batch.topic, batch.partition, Number(next)]]
      try {
        await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }])
        // kafkajs silently skips a commit once disconnect() has begun ("consumer not running"):
        // report it as not committed rather than claim a commit that may not have happened.
        if (stopping !== null) throw new Error('consumer stopping: kafkajs may have skipped the commit')
        emit({ e: 'commit', id, ok: true, offsets, error: null })
      } catch (error) {
        emit({ e: 'commit', id, ok: false, offsets, error: `${error.name}: ${error.message}` })
      }
      resolveOffset(last)
    },
  })
}

main().catch(error => {
  emit({ e: 'fatal', error: String(error && error.stack) })
  process.exit(1)
})
