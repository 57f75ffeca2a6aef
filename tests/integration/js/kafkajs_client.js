#!/usr/bin/env node
// kafkajs side of Strata's real-client matrix (tests/integration/clients/drivers/kafkajs.py).
//
// One operation per run. Input: one JSON object on stdin,
//   {"brokers": ["127.0.0.1:9092"], "op": "produce", "args": {...}}
// Output: one JSON line on stdout, {"ok": true, "result": ...} or
// {"ok": false, "error": "...", "stack": "..."}; kafkajs's own log goes to stderr as JSON lines.
// Bytes (keys, values, header values) travel as base64; offsets and timestamps as numbers.
//
// Operations (args -> result):
//   createTopic      {topic, partitions}                      -> true
//   partitionCount   {topic}                                  -> number | null (no such topic)
//   deleteTopic      {topic}                                  -> true
//   produce          {topic, records, compression, idempotent, rounds}
//                                                            -> [{partition, offset}] per record
//   consume          {topic, endOffsets: {partition: offset}}  -> [{partition, offset, key, ...}]
//   offsetsForTimes  {topic, timestamps: {partition: ts}}      -> {partition: offset | null}
//
// kafkajs has no assign(): its Consumer always joins a group. `consume` therefore drives the
// same Fetch path the Consumer uses (Cluster -> Broker.fetch -> the v11 decoder, read_committed
// as the Consumer's default), minus group membership, from the pinned kafkajs's src/ modules.
'use strict'

const {
  Kafka,
  CompressionTypes,
  CompressionCodecs,
  Partitioners,
  logLevel,
} = require('kafkajs')
const Cluster = require('kafkajs/src/cluster')
const { createLogger } = require('kafkajs/src/loggers')
const defaultSocketFactory = require('kafkajs/src/network/socketFactory')
const ISOLATION_LEVEL = require('kafkajs/src/protocol/isolationLevel')

// Codecs kafkajs lacks out of the box (gzip is built in). A missing one fails loudly.
const SnappyCodec = require('kafkajs-snappy')
const LZ4Codec = require('kafkajs-lz4')
CompressionCodecs[CompressionTypes.Snappy] = SnappyCodec
CompressionCodecs[CompressionTypes.LZ4] = new LZ4Codec().codec
// No published kafkajs zstd codec builds here (@kafkajs/zstd needs cppzst, which does not
// compile against Node 20's headers): a kafkajs codec is just compress/decompress of a buffer.
const { Compressor, Decompressor } = require('zstd-napi')
CompressionCodecs[CompressionTypes.ZSTD] = () => ({
  async compress (encoder) { return new Compressor().compress(encoder.buffer) },
  async decompress (buffer) { return new Decompressor().decompress(buffer) },
})

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

// Scaled-down timeouts: a broker on loopback answers in milliseconds or not at all.
const CONNECTION_TIMEOUT_MS = 3000
const REQUEST_TIMEOUT_MS = 10000
const RETRY = { retries: 5, initialRetryTime: 100, maxRetryTime: 1000 }
const FETCH_MAX_WAIT_MS = 100
const CONSUME_DEADLINE_MS = 20000

const logCreator = () => ({ namespace, level, label, log }) => {
  process.stderr.write(JSON.stringify({ level: label, namespace, ...log }) + '\n')
}

const b64 = buffer => (buffer == null ? null : Buffer.from(buffer).toString('base64'))
const unb64 = text => (text == null ? null : Buffer.from(text, 'base64'))

function kafkaFor (brokers) {
  return new Kafka({
    clientId: 'strata-matrix-kafkajs',
    brokers,
    connectionTimeout: CONNECTION_TIMEOUT_MS,
    requestTimeout: REQUEST_TIMEOUT_MS,
    retry: RETRY,
    logLevel: logLevel.INFO,
    logCreator,
  })
}

async function withAdmin (brokers, fn) {
  const admin = kafkaFor(brokers).admin()
  await admin.connect()
  try {
    return await fn(admin)
  } finally {
    await admin.disconnect()
  }
}

const ops = {
  async createTopic (brokers, { topic, partitions }) {
    return withAdmin(brokers, async admin => {
      const created = await admin.createTopics({
        topics: [{ topic, numPartitions: partitions, replicationFactor: 1 }],
        waitForLeaders: true,
        timeout: REQUEST_TIMEOUT_MS,
      })
      if (!created) throw new Error(`createTopics answered that ${topic} already exists`)
      return true
    })
  },

  async partitionCount (brokers, { topic }) {
    return withAdmin(brokers, async admin => {
      const topics = await admin.listTopics()
      if (!topics.includes(topic)) return null
      const { topics: [metadata] } = await admin.fetchTopicMetadata({ topics: [topic] })
      return metadata.partitions.length
    })
  },

  async deleteTopic (brokers, { topic }) {
    return withAdmin(brokers, async admin => {
      await admin.deleteTopics({ topics: [topic], timeout: REQUEST_TIMEOUT_MS })
      return true
    })
  },

  async produce (brokers, { topic, records, compression, idempotent, rounds = 1 }) {
    if (!(compression in COMPRESSION)) throw new Error(`unknown compression ${compression}`)
    // Record the partition kafkajs's own default partitioner picks for each message.
    const chosen = new Map()
    const createPartitioner = () => {
      const partitioner = Partitioners.DefaultPartitioner()
      return args => {
        const partition = partitioner(args)
        chosen.set(args.message, partition)
        return partition
      }
    }
    const producer = kafkaFor(brokers).producer({
      createPartitioner,
      idempotent,
      maxInFlightRequests: idempotent ? 1 : undefined,
      allowAutoTopicCreation: false,
    })
    const messages = records.map(r => ({
      key: unb64(r.key),
      value: unb64(r.value),
      headers: Object.fromEntries(r.headers.map(([k, v]) => [k, unb64(v)])),
      timestamp: String(r.timestamp),
    }))
    await producer.connect()
    try {
      const deliveries = []
      const size = Math.ceil(messages.length / rounds)
      for (let start = 0; start < messages.length; start += size) {
        const round = messages.slice(start, start + size)
        const metadata = await producer.send({
          topic,
          messages: round,
          acks: -1,
          timeout: REQUEST_TIMEOUT_MS,
          compression: COMPRESSION[compression],
        })
        // One send = one batch per partition, in message order: record i of a partition got
        // that partition's baseOffset + i.
        const base = new Map(metadata.map(m => [m.partition, Number(m.baseOffset)]))
        const next = new Map()
        for (const message of round) {
          const partition = chosen.get(message)
          if (partition === undefined) throw new Error('partitioner was not asked for a message')
          if (!base.has(partition)) throw new Error(`no produce response for partition ${partition}`)
          const index = next.get(partition) || 0
          next.set(partition, index + 1)
          deliveries.push({ partition, offset: base.get(partition) + index })
        }
      }
      return deliveries
    } finally {
      await producer.disconnect()
    }
  },

  async consume (brokers, { topic, endOffsets }) {
    const cluster = new Cluster({
      logger: createLogger({ level: logLevel.INFO, logCreator }),
      socketFactory: defaultSocketFactory(),
      brokers,
      clientId: 'strata-matrix-kafkajs',
      connectionTimeout: CONNECTION_TIMEOUT_MS,
      requestTimeout: REQUEST_TIMEOUT_MS,
      enforceRequestTimeout: true,
      metadataMaxAge: 300000,
      retry: RETRY,
      allowAutoTopicCreation: false,
      isolationLevel: ISOLATION_LEVEL.READ_COMMITTED,
    })
    await cluster.connect()
    try {
      await cluster.addTargetTopic(topic)
      await cluster.refreshMetadata()
      const next = new Map(Object.keys(endOffsets).map(p => [Number(p), 0])) // from earliest
      const out = []
      const deadline = Date.now() + CONSUME_DEADLINE_MS
      const pending = () => [...next].filter(([p, offset]) => offset < endOffsets[p])
      while (pending().length > 0) {
        if (Date.now() > deadline) {
          throw new Error(`consume timed out: next offsets ${JSON.stringify([...next])}, ` +
            `wanted ${JSON.stringify(endOffsets)}`)
        }
        const byLeader = cluster.findLeaderForPartitions(topic, pending().map(([p]) => p))
        for (const [nodeId, partitions] of Object.entries(byLeader)) {
          const broker = await cluster.findBroker({ nodeId })
          const response = await broker.fetch({
            replicaId: -1,
            isolationLevel: ISOLATION_LEVEL.READ_COMMITTED,
            maxWaitTime: FETCH_MAX_WAIT_MS,
            minBytes: 1,
            maxBytes: 10485760,
            topics: [{
              topic,
              partitions: partitions.map(p => ({
                partition: p, fetchOffset: String(next.get(p)), maxBytes: 1048576,
              })),
            }],
          })
          for (const { partitions: results } of response.responses) {
            for (const { partition, messages } of results) {
              for (const m of messages) {
                const offset = Number(m.offset)
                // A fetch returns whole batches: skip what precedes the fetch offset, as the
                // Consumer does, and control records.
                if (offset < next.get(partition) || m.isControlRecord) continue
                out.push({
                  partition,
                  offset,
                  key: b64(m.key),
                  value: b64(m.value),
                  headers: Object.entries(m.headers).flatMap(([k, v]) =>
                    (Array.isArray(v) ? v : [v]).map(one => [k, b64(one)])),
                  timestamp: Number(m.timestamp),
                })
                next.set(partition, offset + 1)
              }
            }
          }
        }
      }
      return out
    } finally {
      await cluster.disconnect()
    }
  },

  async offsetsForTimes (brokers, { topic, timestamps }) {
    return withAdmin(brokers, async admin => {
      const high = new Map(
        (await admin.fetchTopicOffsets(topic)).map(p => [p.partition, Number(p.high)]))
      const result = {}
      for (const [partition, timestamp] of Object.entries(timestamps)) {
        const found = await admin.fetchTopicOffsetsByTimestamp(topic, timestamp)
        const entry = found.find(p => p.partition === Number(partition))
        if (entry === undefined) throw new Error(`no answer for partition ${partition}`)
        // kafkajs replaces "no such record" (offset -1) with the high watermark: undo that.
        const offset = Number(entry.offset)
        result[partition] = offset === high.get(Number(partition)) ? null : offset
      }
      return result
    })
  },
}

async function main () {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const { brokers, op, args } = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  if (!(op in ops)) throw new Error(`unknown op ${op}`)
  const result = await ops[op](brokers, args)
  process.stdout.write(JSON.stringify({ ok: true, result }) + '\n')
}

main().then(
  () => process.exit(0),
  error => {
    process.stdout.write(JSON.stringify({
      ok: false,
      error: `${error.name}: ${error.message}`,
      stack: String(error.stack),
    }) + '\n')
    process.exit(1)
  }
)
