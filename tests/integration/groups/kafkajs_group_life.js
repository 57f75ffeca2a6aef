#!/usr/bin/env node
// A kafkajs consumer group's whole life against one broker, for
// tests/integration/clients/test_group_versions.py (run with NODE_PATH at
// tests/integration/js/node_modules, where `make node-deps` installs the pinned kafkajs).
//
// Input: one JSON object on stdin, {"brokers": [...], "clientId", "topic", "group", "records"}.
// Steps: a consumer joins `group`, consumes `records` records of `topic`, heartbeats at least
// once, commits, leaves (disconnect); the admin client lists and describes groups, fetches the
// group's offsets and deletes the group.
// Output: one JSON line, {"ok": true, "committed": n, "newest": {ApiName: version}} — `newest`
// is the newest version kafkajs can send of each API (its request definitions), or
// {"ok": false, "error": "..."}. kafkajs's own log is off (stderr stays for errors).
'use strict'

const { Kafka, logLevel } = require('kafkajs')
const { requests } = require('kafkajs/src/protocol/requests')

const API_NAMES = ['GroupCoordinator', 'JoinGroup', 'SyncGroup', 'Heartbeat', 'LeaveGroup',
  'OffsetCommit', 'OffsetFetch', 'ListGroups', 'DescribeGroups', 'DeleteGroups']

async function readStdin () {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  return JSON.parse(Buffer.concat(chunks).toString())
}

async function main () {
  const input = await readStdin()
  const kafka = new Kafka({ clientId: input.clientId, brokers: input.brokers,
    logLevel: logLevel.NOTHING, retry: { retries: 10, initialRetryTime: 50 } })
  const consumer = kafka.consumer({ groupId: input.group, heartbeatInterval: 100,
    sessionTimeout: 6000, maxWaitTimeInMs: 100 })
  let consumed = 0
  let heartbeats = 0
  const next = {}
  consumer.on(consumer.events.HEARTBEAT, () => { heartbeats += 1 })
  await consumer.connect()
  await consumer.subscribe({ topic: input.topic, fromBeginning: true })
  const done = new Promise(resolve => {
    consumer.run({
      autoCommit: false,
      eachMessage: async ({ partition, message }) => {
        consumed += 1
        next[partition] = (BigInt(message.offset) + 1n).toString()
      },
    })
    const poll = setInterval(() => {
      if (consumed >= input.records && heartbeats > 0) { clearInterval(poll); resolve() }
    }, 50)
  })
  await done
  await consumer.commitOffsets(Object.entries(next).map(
    ([partition, offset]) => ({ topic: input.topic, partition: Number(partition), offset })))
  await consumer.disconnect()

  const admin = kafka.admin()
  await admin.connect()
  const listed = await admin.listGroups()
  if (!listed.groups.some(g => g.groupId === input.group)) throw new Error('group not listed')
  const described = await admin.describeGroups([input.group])
  if (described.groups[0].groupId !== input.group) throw new Error('group not described')
  const offsets = await admin.fetchOffsets({ groupId: input.group, topics: [input.topic] })
  const committed = offsets[0].partitions.reduce((sum, p) => sum + Number(p.offset), 0)
  await admin.deleteGroups([input.group])
  await admin.disconnect()

  const newest = {}
  for (const name of API_NAMES) {
    newest[name] = Math.max(...requests[name].versions.map(Number))
  }
  process.stdout.write(JSON.stringify({ ok: true, committed, newest }) + '\n')
}

main().then(() => process.exit(0), error => {
  process.stdout.write(JSON.stringify({ ok: false, error: String(error && error.stack) }) + '\n')
  process.exit(1)
})
