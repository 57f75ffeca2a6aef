/*
 * strata_perf: a native load generator for Strata's benchmarks (bench/native_client.py), on
 * Debian's librdkafka-dev, so that the client's own cost per record (well under a microsecond)
 * does not hide the broker's as confluent-kafka driven from Python (~2 us/record) does.
 *
 * Two modes, each against a topic that already exists (the Python side creates it):
 *
 *   produce  --records N, --record-size B, --acks, --linger-ms, --batch-size,
 *            --idempotence, --partitioner sticky|rr|key (sticky, the default: no key, so
 *            librdkafka's sticky partitioner fills one partition's batch at a time, as Kafka's
 *            kafka-producer-perf-test and rdkafka_performance do; rr: record i to partition
 *            i mod P, P from Metadata; key: the record's index as its key, murmur2 as Java's),
 *            --throughput R (records/s cap, Kafka's ThroughputThrottler; -1 none),
 *            --transactional-id X --transaction-records N (one transaction per N records, the
 *            latency of each commit_transaction() recorded: the call first waits for the
 *            transaction's outstanding records to be acknowledged, then for EndTxn).
 *   consume  --records N, --isolation-level, group-less: the legacy queue consumer started on
 *            every partition of the topic at the beginning offset (no group, no rebalance).
 *
 * Output, on stdout: Kafka's perf-test lines (kafka-producer-perf-test's progress line every 5 s
 * and its final line; kafka-consumer-perf-test's CSV lines and the "records consumed" line, as
 * bench/produce.py and bench/consume.py print them) and, last, one line holding a JSON object
 * with every figure (bench/native_perf.py parses it). Per-record latency is librdkafka's
 * rd_kafka_message_latency() in the delivery report: from produce() to the acknowledgement,
 * client batching included, like Kafka's tool. Exit code 0 only if every record was delivered
 * (or consumed) and every transaction committed.
 *
 * Invariants: the payload is one constant buffer handed to librdkafka without copying; every
 * latency is kept (4 bytes per record) so the percentiles are exact; elapsed time runs from the
 * first produce() (or the consumer's start) to the last delivery report (or record).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <librdkafka/rdkafka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MIB (1024.0 * 1024.0)
#define REPORT_INTERVAL_S 5.0

struct options {
    const char *mode, *bootstrap, *topic, *acks, *partitioner, *transactional_id;
    const char *isolation_level;
    long long records, transaction_records, throughput;
    int record_size, linger_ms, batch_size, idempotence;
    double timeout_s;
    const char *extra[32];
    int n_extra;
};

struct stats {
    long long delivered, failed, window_count;
    int32_t *latencies_us; /* one per delivered record with a latency, in delivery order */
    long long n_latencies, window_lat_first;
    double start, window_start;
};

static struct stats stats;
static volatile sig_atomic_t stopping;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void on_signal(int sig) {
    (void)sig;
    stopping = 1;
}

static void die(const char *what, const char *why) {
    fprintf(stderr, "strata_perf: %s: %s\n", what, why);
    exit(2);
}

static void set(rd_kafka_conf_t *conf, const char *name, const char *value) {
    char err[512];
    if (rd_kafka_conf_set(conf, name, value, err, sizeof err) != RD_KAFKA_CONF_OK)
        die(name, err);
}

static void set_extra(rd_kafka_conf_t *conf, const struct options *o) {
    for (int i = 0; i < o->n_extra; i++) {
        char buf[512];
        snprintf(buf, sizeof buf, "%s", o->extra[i]);
        char *eq = strchr(buf, '=');
        if (!eq)
            die("-X expects name=value", o->extra[i]);
        *eq = '\0';
        set(conf, buf, eq + 1);
    }
}

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    (void)rk;
    (void)opaque;
    if (m->err) {
        if (stats.failed++ < 5)
            fprintf(stderr, "delivery failed: %s\n", rd_kafka_err2str(m->err));
        return;
    }
    stats.delivered++;
    stats.window_count++;
    int64_t lat = rd_kafka_message_latency(m);
    if (lat >= 0)
        stats.latencies_us[stats.n_latencies++] = (int32_t)(lat > INT32_MAX ? INT32_MAX : lat);
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Kafka's percentile: the value at index (int)(p * n) of the sorted values. */
static double pct_i32(const int32_t *sorted, long long n, double p) {
    if (n == 0)
        return 0.0;
    long long i = (long long)(p * (double)n);
    return sorted[i < n ? i : n - 1] / 1000.0;
}

static double pct_double(const double *sorted, long long n, double p) {
    if (n == 0)
        return 0.0;
    long long i = (long long)(p * (double)n);
    return sorted[i < n ? i : n - 1];
}

static void maybe_print_window(int record_size) {
    double now = now_s();
    double elapsed = now - stats.window_start;
    if (elapsed < REPORT_INTERVAL_S)
        return;
    double sum = 0, max = 0;
    for (long long i = stats.window_lat_first; i < stats.n_latencies; i++) {
        sum += stats.latencies_us[i];
        if (stats.latencies_us[i] > max)
            max = stats.latencies_us[i];
    }
    long long nlat = stats.n_latencies - stats.window_lat_first;
    long long n = stats.window_count;
    printf("%lld records sent, %.1f records/sec (%.2f MB/sec), %.1f ms avg latency, "
           "%.1f ms max latency.\n",
           n, n / elapsed, n * (double)record_size / MIB / elapsed, nlat ? sum / nlat / 1000.0 : 0.0, max / 1000.0);
    fflush(stdout);
    stats.window_start = now;
    stats.window_count = 0;
    stats.window_lat_first = stats.n_latencies;
}

/* The topic's partition count, once every partition has a leader (so the timed run does not
 * include a new topic's leader elections). */
static int partition_count(rd_kafka_t *rk, const char *topic, double timeout_s) {
    double deadline = now_s() + timeout_s;
    while (now_s() < deadline && !stopping) {
        rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
        const struct rd_kafka_metadata *md;
        rd_kafka_resp_err_t err = rd_kafka_metadata(rk, 0, rkt, &md, 5000);
        rd_kafka_topic_destroy(rkt);
        if (!err) {
            int n = -1;
            if (md->topic_cnt == 1 && !md->topics[0].err) {
                n = md->topics[0].partition_cnt;
                for (int p = 0; p < md->topics[0].partition_cnt; p++)
                    if (md->topics[0].partitions[p].leader < 0)
                        n = -1; /* not every partition has a leader yet: not timed */
            }
            rd_kafka_metadata_destroy(md);
            if (n > 0)
                return n;
        }
        struct timespec pause = {0, 100 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
    die("metadata", "the topic has no partitions with leaders (does it exist?)");
    return 0;
}

static int run_produce(const struct options *o) {
    char err[512], buf[64];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    set(conf, "acks", o->acks);
    snprintf(buf, sizeof buf, "%d", o->linger_ms);
    set(conf, "linger.ms", buf);
    snprintf(buf, sizeof buf, "%d", o->batch_size);
    set(conf, "batch.size", buf);
    set(conf, "queue.buffering.max.messages", "1000000");
    set(conf, "queue.buffering.max.kbytes", "1048576");
    set(conf, "partitioner", "murmur2_random");
    if (o->idempotence || o->transactional_id)
        set(conf, "enable.idempotence", "true");
    if (o->transactional_id)
        set(conf, "transactional.id", o->transactional_id);
    set_extra(conf, o);
    rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new", err);

    int by_key = strcmp(o->partitioner, "key") == 0;
    int sticky = strcmp(o->partitioner, "sticky") == 0;
    int partitions = partition_count(rk, o->topic, o->timeout_s);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    char *payload = malloc((size_t)o->record_size);
    for (int i = 0; i < o->record_size; i++)
        payload[i] = (char)('A' + i % 26);
    stats.latencies_us = malloc(sizeof(int32_t) * (size_t)(o->records > 0 ? o->records : 1));

    long long per_txn = o->transactional_id ? o->transaction_records : 0;
    long long max_txns = per_txn > 0 ? (o->records + per_txn - 1) / per_txn : 0;
    double *commit_ms = malloc(sizeof(double) * (size_t)(max_txns > 0 ? max_txns : 1));
    long long txns = 0, txn_failed = 0;
    rd_kafka_error_t *error;
    if (per_txn > 0) {
        if ((error = rd_kafka_init_transactions(rk, (int)(o->timeout_s * 1000))))
            die("init_transactions", rd_kafka_error_string(error));
    }

    stats.start = stats.window_start = now_s();
    double deadline = stats.start + o->timeout_s;
    long long sent = 0;
    char key[24];
    while (sent < o->records && !stopping) {
        if (per_txn > 0 && sent % per_txn == 0) {
            if ((error = rd_kafka_begin_transaction(rk)))
                die("begin_transaction", rd_kafka_error_string(error));
        }
        int32_t partition = by_key || sticky ? RD_KAFKA_PARTITION_UA
                                             : (int32_t)(sent % partitions);
        size_t key_len = 0;
        if (by_key)
            key_len = (size_t)snprintf(key, sizeof key, "%lld", sent);
        while (rd_kafka_produce(rkt, partition, 0, payload, (size_t)o->record_size,
                                by_key ? key : NULL, key_len, NULL) == -1) {
            rd_kafka_resp_err_t e = rd_kafka_last_error();
            if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
                die("produce", rd_kafka_err2str(e));
            rd_kafka_poll(rk, 1);
            if (now_s() > deadline)
                die("produce", "timed out with the queue full");
        }
        sent++;
        if (per_txn > 0 && (sent % per_txn == 0 || sent == o->records)) {
            double t0 = now_s();
            error = rd_kafka_commit_transaction(rk, (int)(o->timeout_s * 1000));
            commit_ms[txns++] = (now_s() - t0) * 1000.0;
            if (error) {
                fprintf(stderr, "commit_transaction: %s\n", rd_kafka_error_string(error));
                txn_failed++;
                int abortable = rd_kafka_error_txn_requires_abort(error);
                rd_kafka_error_destroy(error);
                if (!abortable)
                    break;
                if ((error = rd_kafka_abort_transaction(rk, (int)(o->timeout_s * 1000))))
                    die("abort_transaction", rd_kafka_error_string(error));
            }
        }
        if ((sent & 1023) == 0) {
            rd_kafka_poll(rk, 0);
            maybe_print_window(o->record_size);
            if (now_s() > deadline)
                break;
        }
        if (o->throughput > 0) {
            /* Kafka's ThroughputThrottler: sleep while ahead of the target rate. */
            double ahead = (double)sent / (double)o->throughput - (now_s() - stats.start);
            if (ahead > 0.001) {
                struct timespec pause = {(time_t)ahead, (long)((ahead - (time_t)ahead) * 1e9)};
                rd_kafka_poll(rk, 0);
                nanosleep(&pause, NULL);
            }
        }
    }
    while (rd_kafka_outq_len(rk) > 0 && now_s() < deadline && !stopping) {
        rd_kafka_poll(rk, 10);
        maybe_print_window(o->record_size);
    }
    rd_kafka_poll(rk, 0);
    double elapsed = now_s() - stats.start;

    qsort(stats.latencies_us, (size_t)stats.n_latencies, sizeof(int32_t), cmp_i32);
    double sum = 0;
    for (long long i = 0; i < stats.n_latencies; i++)
        sum += stats.latencies_us[i];
    long long n = stats.delivered, nl = stats.n_latencies;
    double avg = nl ? sum / nl / 1000.0 : 0.0;
    double max = nl ? stats.latencies_us[nl - 1] / 1000.0 : 0.0;
    double rate = n / elapsed, mb = n * (double)o->record_size / MIB / elapsed;
    printf("%lld records sent, %.1f records/sec (%.2f MB/sec), %.2f ms avg latency, "
           "%.2f ms max latency, %d ms 50th, %d ms 95th, %d ms 99th, %d ms 99.9th.\n",
           n, rate, mb, avg, max, (int)pct_i32(stats.latencies_us, nl, 0.5),
           (int)pct_i32(stats.latencies_us, nl, 0.95), (int)pct_i32(stats.latencies_us, nl, 0.99),
           (int)pct_i32(stats.latencies_us, nl, 0.999));
    if (stats.failed)
        printf("%lld records failed\n", stats.failed);
    qsort(commit_ms, (size_t)txns, sizeof(double), cmp_double);
    if (per_txn > 0)
        printf("%lld transactions of %lld records committed (%lld failed), commit latency "
               "%.2f ms 50th, %.2f ms 99th, %.2f ms max.\n",
               txns - txn_failed, per_txn, txn_failed, pct_double(commit_ms, txns, 0.5),
               pct_double(commit_ms, txns, 0.99), txns ? commit_ms[txns - 1] : 0.0);
    printf("{\"mode\": \"produce\", \"records\": %lld, \"failed\": %lld, \"requested\": %lld, "
           "\"record_size\": %d, \"seconds\": %.6f, \"records_per_s\": %.1f, \"mb_per_s\": %.3f, "
           "\"latency_ms\": {\"avg\": %.3f, \"max\": %.3f, \"p50\": %.3f, \"p95\": %.3f, "
           "\"p99\": %.3f, \"p999\": %.3f}, \"transactions\": %lld, "
           "\"transactions_failed\": %lld, \"commit_ms\": {\"p50\": %.3f, \"p99\": %.3f, "
           "\"max\": %.3f}}\n",
           n, stats.failed, o->records, o->record_size, elapsed, rate, mb, avg, max,
           pct_i32(stats.latencies_us, nl, 0.5), pct_i32(stats.latencies_us, nl, 0.95),
           pct_i32(stats.latencies_us, nl, 0.99), pct_i32(stats.latencies_us, nl, 0.999),
           txns - txn_failed, txn_failed, pct_double(commit_ms, txns, 0.5),
           pct_double(commit_ms, txns, 0.99), txns ? commit_ms[txns - 1] : 0.0);
    fflush(stdout);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    free(payload);
    free(commit_ms);
    free(stats.latencies_us);
    return (n == o->records && stats.failed == 0 && txn_failed == 0) ? 0 : 1;
}

static void stamp(char *out, size_t size, struct timespec *wall) {
    struct tm tm;
    gmtime_r(&wall->tv_sec, &tm);
    size_t len = strftime(out, size, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(out + len, size - len, ":%03ld", wall->tv_nsec / 1000000);
}

static int run_consume(const struct options *o) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    set(conf, "bootstrap.servers", o->bootstrap);
    set(conf, "isolation.level", o->isolation_level);
    set(conf, "enable.partition.eof", "false");
    set(conf, "queued.max.messages.kbytes", "262144");
    set_extra(conf, o);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk)
        die("rd_kafka_new", err);
    int partitions = partition_count(rk, o->topic, o->timeout_s);
    rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, o->topic, NULL);
    rd_kafka_queue_t *queue = rd_kafka_queue_new(rk);

    struct timespec wall_start, wall_end;
    clock_gettime(CLOCK_REALTIME, &wall_start);
    double start = now_s(), last = start, last_progress = start;
    for (int p = 0; p < partitions; p++)
        if (rd_kafka_consume_start_queue(rkt, p, RD_KAFKA_OFFSET_BEGINNING, queue) == -1)
            die("consume_start", rd_kafka_err2str(rd_kafka_last_error()));

    enum { BATCH = 10000 };
    rd_kafka_message_t **batch = malloc(sizeof(*batch) * BATCH);
    long long records = 0, bytes = 0, errors = 0;
    while (records < o->records && !stopping) {
        ssize_t got = rd_kafka_consume_batch_queue(queue, 100, batch, BATCH);
        double now = now_s();
        for (ssize_t i = 0; i < got; i++) {
            if (batch[i]->err) {
                if (errors++ < 5)
                    fprintf(stderr, "consume: %s\n", rd_kafka_message_errstr(batch[i]));
            } else {
                records++;
                bytes += (long long)batch[i]->len;
            }
            rd_kafka_message_destroy(batch[i]);
        }
        if (got > 0)
            last = last_progress = now;
        else if (now - last_progress > o->timeout_s)
            break;
    }
    clock_gettime(CLOCK_REALTIME, &wall_end);
    for (int p = 0; p < partitions; p++)
        rd_kafka_consume_stop(rkt, p);
    double elapsed = last - start > 1e-9 ? last - start : 1e-9;
    double mb = bytes / MIB;
    char s0[64], s1[64];
    stamp(s0, sizeof s0, &wall_start);
    stamp(s1, sizeof s1, &wall_end);
    printf("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
           "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n");
    printf("%s, %s, %.4f, %.4f, %lld, %.4f, 0, %lld, %.4f, %.4f\n", s0, s1, mb, mb / elapsed,
           records, records / elapsed, (long long)(elapsed * 1000), mb / elapsed,
           records / elapsed);
    printf("%lld records consumed, %.1f records/sec (%.2f MB/sec)\n", records, records / elapsed,
           mb / elapsed);
    printf("{\"mode\": \"consume\", \"records\": %lld, \"failed\": %lld, \"requested\": %lld, "
           "\"bytes\": %lld, \"seconds\": %.6f, \"records_per_s\": %.1f, \"mb_per_s\": %.3f}\n",
           records, errors, o->records, bytes, elapsed, records / elapsed, mb / elapsed);
    fflush(stdout);
    free(batch);
    rd_kafka_queue_destroy(queue);
    rd_kafka_topic_destroy(rkt);
    rd_kafka_destroy(rk);
    return records >= o->records ? 0 : 1;
}

static void usage(void) {
    fprintf(stderr,
            "usage: strata_perf produce|consume --bootstrap HOST:PORT --topic T --records N\n"
            "  [--record-size 100] [--acks 1] [--linger-ms 5] [--batch-size 1000000]\n"
            "  [--idempotence] [--partitioner sticky|rr|key] [--throughput -1]\n"
            "  [--transactional-id X --transaction-records 1000]\n"
            "  [--isolation-level read_uncommitted|read_committed] [--timeout-s 600]\n"
            "  [-X name=value ...]\n");
    exit(2);
}

int main(int argc, char **argv) {
    struct options o = {.acks = "1", .partitioner = "sticky", .isolation_level = "read_uncommitted",
                        .records = 1000000, .transaction_records = 1000, .throughput = -1,
                        .record_size = 100, .linger_ms = 5, .batch_size = 1000000,
                        .timeout_s = 600.0};
    static const struct option longs[] = {
        {"bootstrap", 1, 0, 'b'},       {"topic", 1, 0, 't'},
        {"records", 1, 0, 'n'},         {"record-size", 1, 0, 's'},
        {"acks", 1, 0, 'a'},            {"linger-ms", 1, 0, 'l'},
        {"batch-size", 1, 0, 'B'},      {"idempotence", 0, 0, 'I'},
        {"partitioner", 1, 0, 'p'},     {"throughput", 1, 0, 'r'},
        {"transactional-id", 1, 0, 'x'}, {"transaction-records", 1, 0, 'N'},
        {"isolation-level", 1, 0, 'i'}, {"timeout-s", 1, 0, 'T'},
        {0, 0, 0, 0}};
    if (argc < 2)
        usage();
    o.mode = argv[1];
    optind = 2;
    int c;
    while ((c = getopt_long(argc, argv, "X:", longs, NULL)) != -1) {
        switch (c) {
        case 'b': o.bootstrap = optarg; break;
        case 't': o.topic = optarg; break;
        case 'n': o.records = atoll(optarg); break;
        case 's': o.record_size = atoi(optarg); break;
        case 'a': o.acks = optarg; break;
        case 'l': o.linger_ms = atoi(optarg); break;
        case 'B': o.batch_size = atoi(optarg); break;
        case 'I': o.idempotence = 1; break;
        case 'p': o.partitioner = optarg; break;
        case 'r': o.throughput = atoll(optarg); break;
        case 'x': o.transactional_id = optarg; break;
        case 'N': o.transaction_records = atoll(optarg); break;
        case 'i': o.isolation_level = optarg; break;
        case 'T': o.timeout_s = atof(optarg); break;
        case 'X':
            if (o.n_extra == 32)
                die("-X", "too many");
            o.extra[o.n_extra++] = optarg;
            break;
        default: usage();
        }
    }
    if (!o.bootstrap || !o.topic || o.records < 0 || o.record_size < 1)
        usage();
    if (strcmp(o.partitioner, "rr") != 0 && strcmp(o.partitioner, "key") != 0 &&
        strcmp(o.partitioner, "sticky") != 0)
        usage();
    if (o.transactional_id && o.transaction_records < 1)
        usage();
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (strcmp(o.mode, "produce") == 0)
        return run_produce(&o);
    if (strcmp(o.mode, "consume") == 0)
        return run_consume(&o);
    usage();
    return 2;
}
