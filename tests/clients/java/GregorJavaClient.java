/*
 * Command-line harness around the Java Kafka client (org.apache.kafka:kafka-clients) for Gregor's
 * client tests. Every result is one JSON object per line on stdout; client logs and errors go to
 * stderr. Exit codes: 0 ok, 1 client error, 2 usage error, 3 hard deadline passed.
 * It only drives the client: it never decides whether the broker's answer is right.
 */
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.DescribeClusterResult;
import org.apache.kafka.clients.admin.ListOffsetsOptions;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.IsolationLevel;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeaders;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class GregorJavaClient {
    static final String USAGE = String.join("\n",
        "usage: GregorJavaClient <command> --bootstrap HOST:PORT [options]",
        "common options: --timeout-ms T (default 30000) --prop key=value (any client config, repeatable)",
        "  produce --topic T --count N [--acks all|1|0] [--compression none|gzip|snappy|lz4|zstd]",
        "          [--idempotence true|false] [--partition P] [--key-prefix K] [--value-prefix V]",
        "          [--value-size S] [--headers k=v[,k=v]] [--timestamp MS [--timestamp-step MS]] [--sync]",
        "          [--input FILE]   FILE: one record per line, tab-separated partition, timestamp, key,",
        "          value, headers; empty partition/timestamp = unset, key/value base64 or '-' for null,",
        "          headers name:base64 joined by ',' (the other record options are then ignored)",
        "          record i: key K+i (null without --key-prefix), value V+i (default 'value-'+i) padded",
        "          with '.' or cut to S bytes, {i} in header values becomes i, timestamp MS + i * step;",
        "          prints {index, partition, offset, timestamp} per acknowledged record",
        "  consume-assign --topic T [--partitions 0,1] [--from earliest|latest|OFFSET|time:MS]",
        "          [--max N] [--to-end]   reads until N records, the end offsets seen at start, or T ms",
        "  consume-group --group G --topic T[,T2] [--from earliest|latest] [--max N] [--no-commit]",
        "          subscribes, commits consumed offsets with commitSync after every poll",
        "  spark-read --topic T --partition P --from O --until U [--poll-ms 512]",
        "          Spark's executor read loop: assign, then seek + poll + position per fetch, and on an",
        "          empty poll seekToBeginning/seekToEnd + position; auto.offset.reset=none",
        "          records print {topic, partition, offset, timestamp, timestamp_type, key, key_b64,",
        "          value, value_b64, headers: [[k, v_utf8]]}; group events print {event, partitions}",
        "  admin create-topic --topic T [--partitions P] [--replication-factor R] [--config k=v]",
        "  admin create-partitions --topic T --partitions TOTAL | admin delete-topic --topic T",
        "  admin list-topics | admin describe-topics --topic T[,T2]",
        "  txn-producer --transactional-id X   initTransactions, then one command per stdin line, each",
        "          answered by {done: CMD} or {failed: CMD, error} (the producer stays usable):",
        "          begin | send<TAB>TOPIC<TAB>an --input line (answered at the next flush) | flush |",
        "          commit | abort | close | halt (exits at once: no abort, no close, as a crash would)",
        "  txn-transform --group G --topic IN --output OUT --transactional-id X --max N",
        "          [--end commit|abort] [--value-prefix V]   the consume-transform-produce loop: reads N",
        "          records of IN with G (read_committed), sends V+value to OUT's same partition in one",
        "          transaction with the consumed offsets (sendOffsetsToTransaction with the consumer's",
        "          group metadata), then commits or aborts; prints the records read, then {done: END}",
        "  admin list-offsets --topic T [--partitions 0,1] --spec earliest|latest|max-timestamp|time:MS",
        "          [--isolation read_uncommitted|read_committed]",
        "  admin describe-configs (--topic T | --broker ID) | admin describe-cluster",
        "  admin list-groups | admin describe-group --group G | admin group-offsets --group G",
        "  serve   runs the commands above (but txn-producer) one per stdin line, each argument",
        "          base64-encoded, separated by spaces; answers each with one line: exit code, stdout",
        "          and stderr, the last two base64-encoded, separated by spaces");

    static final Set<String> FLAGS = Set.of("--sync", "--to-end", "--no-commit", "--explicit", "--hold");
    static final Object OUT_LOCK = new Object();

    public static void main(String[] argv) throws Exception {
        if (argv.length == 1 && argv[0].equals("serve")) {
            serve();
            return;
        }
        startDeadline(deadlineMs(argv));
        System.exit(run(argv));
    }

    /** How long a command may run before it counts as hung: --deadline-ms, by default --timeout-ms
     * + 15 s; 45 s for arguments that do not parse (run() reports them at once). */
    static long deadlineMs(String[] argv) {
        try {
            Args a = new Args(argv);
            return a.longOpt("--deadline-ms", a.timeoutMs + 15_000);
        } catch (RuntimeException e) {
            return 45_000;
        }
    }

    /** One command, as main runs it; returns the exit code instead of exiting. */
    static int run(String[] argv) {
        if (argv.length == 0 || argv[0].equals("help") || argv[0].equals("--help")) {
            (argv.length == 0 ? System.err : System.out).println(USAGE);
            return argv.length == 0 ? 2 : 0;
        }
        try {
            Args a = new Args(argv);
            switch (a.command) {
                case "produce": produce(a); break;
                case "consume-assign": consumeAssign(a); break;
                case "consume-group": consumeGroup(a); break;
                case "spark-read": sparkRead(a); break;
                case "txn-producer": txnProducer(a); break;
                case "txn-transform": txnTransform(a); break;
                case "admin": admin(a); break;
                default: throw new UsageError("unknown command " + a.command);
            }
            synchronized (OUT_LOCK) { System.out.flush(); }
            return 0;
        } catch (UsageError e) {
            System.err.println("ERROR: " + e.getMessage() + "\n" + USAGE);
            return 2;
        } catch (Throwable e) {
            synchronized (OUT_LOCK) { System.out.flush(); }
            String hint = root(e) instanceof org.apache.kafka.common.errors.TimeoutException
                ? "\n  (no usable answer from the --bootstrap broker within --timeout-ms)" : "";
            System.err.println("ERROR: " + describe(e) + hint);
            return 1;
        }
    }

    /**
     * One JVM for many commands, so that each does not pay the JVM's start and the client's class
     * loading (about 2 s a call on a small machine). Each stdin line is one command, its arguments
     * base64-encoded and separated by spaces; each gets one stdout line: the exit code, then its
     * stdout and its stderr, base64-encoded, separated by spaces. Commands run one at a time, each
     * with System.out and System.err of its own. A command that outlives its hard deadline is
     * answered with exit code 3 and ends the JVM, as it would end its own. txn-producer reads
     * stdin, so it is not served.
     */
    static void serve() throws Exception {
        PrintStream answers = System.out;
        PrintStream between = System.err;  // client logs between commands
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null; ) {
            String[] argv = line.isEmpty() ? new String[0]
                : Arrays.stream(line.split(" ", -1)).map(w -> new String(Base64.getDecoder().decode(w),
                    StandardCharsets.UTF_8)).toArray(String[]::new);
            ByteArrayOutputStream out = new ByteArrayOutputStream(), err = new ByteArrayOutputStream();
            PrintStream callOut = new PrintStream(out, false, StandardCharsets.UTF_8);
            PrintStream callErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            long deadlineMs = deadlineMs(argv);
            int[] rc = {1};
            synchronized (OUT_LOCK) { System.setOut(callOut); }
            System.setErr(callErr);
            Thread call = new Thread(() -> {
                if (argv.length > 0 && argv[0].equals("txn-producer")) {
                    System.err.println("ERROR: txn-producer reads stdin; run it in a JVM of its own");
                    rc[0] = 2;
                } else {
                    rc[0] = run(argv);
                }
            }, "command");
            call.setDaemon(true);
            call.start();
            call.join(deadlineMs);
            boolean hung = call.isAlive();
            if (hung) callErr.println("ERROR: hard deadline of " + deadlineMs + " ms passed; the client hung");
            synchronized (OUT_LOCK) {
                callOut.flush();
                System.setOut(between);
            }
            System.setErr(between);
            Base64.Encoder b64 = Base64.getEncoder();
            answers.println((hung ? 3 : rc[0]) + " " + b64.encodeToString(out.toByteArray()) + " "
                + b64.encodeToString(err.toByteArray()));
            answers.flush();
            if (hung) Runtime.getRuntime().halt(3);
        }
    }

    // ---- produce -------------------------------------------------------------------------

    static void produce(Args a) throws Exception {
        String topic = a.required("--topic");
        int count = a.intOpt("--count", 1);
        Properties p = a.clientProps();
        p.putIfAbsent("acks", a.opt("--acks", "all"));
        p.putIfAbsent("compression.type", a.opt("--compression", "none"));
        if (a.has("--idempotence")) p.putIfAbsent("enable.idempotence", a.opt("--idempotence", "true"));
        p.putIfAbsent("max.block.ms", String.valueOf(a.timeoutMs));
        p.putIfAbsent("request.timeout.ms", String.valueOf(Math.min(a.timeoutMs, 30_000)));
        p.putIfAbsent("linger.ms", "5");
        // The producer refuses delivery.timeout.ms < linger.ms + request.timeout.ms.
        long floor = Long.parseLong(p.getProperty("request.timeout.ms"))
            + Long.parseLong(p.getProperty("linger.ms"));
        p.putIfAbsent("delivery.timeout.ms", String.valueOf(Math.max(a.timeoutMs, floor)));
        Integer partition = a.has("--partition") ? a.intOpt("--partition", 0) : null;
        String keyPrefix = a.opt("--key-prefix", null);
        String valuePrefix = a.opt("--value-prefix", "value-");
        int valueSize = a.intOpt("--value-size", -1);
        Long ts0 = a.has("--timestamp") ? a.longOpt("--timestamp", 0) : null;
        long tsStep = a.longOpt("--timestamp-step", 0);
        List<String[]> headers = pairs(a.all("--headers"));
        List<String> input = a.has("--input")
            ? java.nio.file.Files.readAllLines(java.nio.file.Path.of(a.required("--input"))) : null;
        if (input != null) count = input.size();
        AtomicReference<Exception> failure = new AtomicReference<>();
        try (KafkaProducer<byte[], byte[]> producer =
                 new KafkaProducer<>(p, new ByteArraySerializer(), new ByteArraySerializer())) {
            for (int i = 0; i < count && failure.get() == null; i++) {
                final int index = i;
                ProducerRecord<byte[], byte[]> record;
                if (input != null) {
                    record = inputRecord(topic, input.get(i));
                } else {
                    RecordHeaders hs = new RecordHeaders();
                    for (String[] h : headers) hs.add(h[0], utf8(h[1].replace("{i}", String.valueOf(i))));
                    byte[] key = keyPrefix == null ? null : utf8(keyPrefix + i);
                    byte[] value = sized(utf8(valuePrefix + i), valueSize);
                    Long ts = ts0 == null ? null : ts0 + i * tsStep;
                    record = new ProducerRecord<>(topic, partition, ts, key, value, hs);
                }
                var future = producer.send(record, (RecordMetadata m, Exception e) -> {
                    if (e != null) { failure.compareAndSet(null, e); return; }
                    emit("index", index, "partition", m.partition(), "offset", m.offset(),
                         "timestamp", m.timestamp());
                });
                if (a.has("--sync")) future.get();
            }
            producer.flush();
        }
        if (failure.get() != null) throw failure.get();
    }

    /** One --input line: partition, timestamp, key, value, headers (see USAGE). */
    static ProducerRecord<byte[], byte[]> inputRecord(String topic, String line) {
        String[] f = line.split("\t", -1);
        if (f.length != 5) throw new UsageError("--input lines need 5 tab-separated fields, got: " + line);
        RecordHeaders hs = new RecordHeaders();
        if (!f[4].isEmpty())
            for (String h : f[4].split(",")) {
                int colon = h.indexOf(':');
                hs.add(h.substring(0, colon), nullableB64(h.substring(colon + 1)));
            }
        return new ProducerRecord<>(topic, f[0].isEmpty() ? null : Integer.valueOf(f[0]),
            f[1].isEmpty() ? null : Long.valueOf(f[1]), nullableB64(f[2]), nullableB64(f[3]), hs);
    }

    static byte[] nullableB64(String s) { return s.equals("-") ? null : Base64.getDecoder().decode(s); }

    // ---- consumers -----------------------------------------------------------------------

    static Properties consumerProps(Args a, String group, String reset) {
        Properties p = a.clientProps();
        if (group != null) p.putIfAbsent("group.id", group);
        p.putIfAbsent("enable.auto.commit", "false");
        p.putIfAbsent("auto.offset.reset", reset);
        p.putIfAbsent("default.api.timeout.ms", String.valueOf(a.timeoutMs));
        p.putIfAbsent("request.timeout.ms", String.valueOf(Math.min(a.timeoutMs, 30_000)));
        return p;
    }

    static void consumeAssign(Args a) {
        String topic = a.required("--topic");
        String from = a.opt("--from", "earliest");
        String reset = from.equals("earliest") || from.equals("latest") ? from : "none";
        long deadline = System.currentTimeMillis() + a.timeoutMs;
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(a, null, reset),
                 new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = partitions(a, topic, c);
            c.assign(tps);
            if (from.equals("earliest")) c.seekToBeginning(tps);
            else if (from.equals("latest")) c.seekToEnd(tps);
            else if (from.startsWith("time:")) {
                long ts = Long.parseLong(from.substring(5));
                Map<TopicPartition, OffsetAndTimestamp> found =
                    c.offsetsForTimes(tps.stream().collect(Collectors.toMap(tp -> tp, tp -> ts)));
                for (TopicPartition tp : tps) {
                    OffsetAndTimestamp o = found.get(tp);
                    if (o == null) c.seekToEnd(List.of(tp)); else c.seek(tp, o.offset());
                }
            } else {
                long offset = Long.parseLong(from);
                for (TopicPartition tp : tps) c.seek(tp, offset);
            }
            Map<TopicPartition, Long> end = a.has("--to-end") ? c.endOffsets(tps) : null;
            int max = a.intOpt("--max", Integer.MAX_VALUE);
            int seen = 0;
            while (seen < max && System.currentTimeMillis() < deadline) {
                if (end != null && tps.stream().allMatch(tp -> c.position(tp) >= end.get(tp))) break;
                long wait = Math.max(1, Math.min(200, deadline - System.currentTimeMillis()));
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(wait))) {
                    if (seen++ >= max) break;
                    emitRecord(r);
                }
            }
        }
    }

    static void consumeGroup(Args a) {
        List<String> topics = Arrays.asList(a.required("--topic").split(","));
        long deadline = System.currentTimeMillis() + a.timeoutMs;
        Properties p = consumerProps(a, a.required("--group"), a.opt("--from", "earliest"));
        try (KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            for (String t : topics) partitionInfos(t, c);
            c.subscribe(topics, new ConsumerRebalanceListener() {
                public void onPartitionsAssigned(Collection<TopicPartition> tps) { event("assigned", tps); }
                public void onPartitionsRevoked(Collection<TopicPartition> tps) { event("revoked", tps); }
            });
            int max = a.intOpt("--max", Integer.MAX_VALUE);
            int seen = 0;
            while (seen < max && System.currentTimeMillis() < deadline) {
                long wait = Math.max(1, Math.min(200, deadline - System.currentTimeMillis()));
                Map<TopicPartition, OffsetAndMetadata> consumed = new HashMap<>();
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(wait))) {
                    if (seen++ >= max) break;
                    emitRecord(r);
                    consumed.put(new TopicPartition(r.topic(), r.partition()),
                                 new OffsetAndMetadata(r.offset() + 1));
                }
                if (!consumed.isEmpty() && !a.has("--no-commit")) c.commitSync(consumed);
            }
        }
    }

    /**
     * Reads [from, until) of one partition the way Spark 4.x's KafkaDataConsumer does; records print
     * like consume-assign's, each empty poll prints {event: "range", earliest, latest}.
     */
    static void sparkRead(Args a) {
        TopicPartition tp = new TopicPartition(a.required("--topic"), a.intOpt("--partition", 0));
        long offset = a.longOpt("--from", 0);
        long until = a.longOpt("--until", Long.MAX_VALUE);
        long deadline = System.currentTimeMillis() + a.timeoutMs;
        Properties p = consumerProps(a, "spark-kafka-source-gregor-executor", "none");
        try (KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.assign(List.of(tp));
            while (offset < until && System.currentTimeMillis() < deadline) {
                c.seek(tp, offset);
                List<ConsumerRecord<byte[], byte[]>> records =
                    c.poll(Duration.ofMillis(a.longOpt("--poll-ms", 512))).records(tp);
                long after = c.position(tp);
                if (records.isEmpty()) {
                    c.seekToBeginning(List.of(tp));
                    long earliest = c.position(tp);
                    c.seekToEnd(List.of(tp));
                    long latest = c.position(tp);
                    emit("event", "range", "earliest", earliest, "latest", latest,
                         "position_after_poll", after);
                    if (offset < earliest || offset > latest)
                        throw new IllegalStateException("offset " + offset + " outside [" + earliest + ", "
                            + latest + "]: Spark reports data loss here");
                    continue;
                }
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    if (r.offset() >= until) break;
                    emitRecord(r);
                    offset = r.offset() + 1;
                }
            }
        }
    }

    /** Also proves the broker answers: an unreachable bootstrap fails here with a TimeoutException. */
    static List<PartitionInfo> partitionInfos(String topic, KafkaConsumer<?, ?> c) {
        List<PartitionInfo> infos = c.partitionsFor(topic);
        if (infos == null || infos.isEmpty())
            throw new IllegalStateException("topic " + topic + " not found");
        return infos;
    }

    static List<TopicPartition> partitions(Args a, String topic, KafkaConsumer<?, ?> c) {
        List<PartitionInfo> infos = partitionInfos(topic, c);
        if (!a.has("--partitions"))
            return infos.stream().map(i -> new TopicPartition(topic, i.partition())).sorted(
                (x, y) -> Integer.compare(x.partition(), y.partition())).collect(Collectors.toList());
        return Arrays.stream(a.required("--partitions").split(","))
            .map(s -> new TopicPartition(topic, Integer.parseInt(s.trim()))).collect(Collectors.toList());
    }

    // ---- transactions --------------------------------------------------------------------

    static Properties txnProducerProps(Args a) {
        Properties p = a.clientProps();
        p.putIfAbsent("transactional.id", a.required("--transactional-id"));
        p.putIfAbsent("max.block.ms", String.valueOf(a.timeoutMs));
        p.putIfAbsent("linger.ms", "5");
        return p;
    }

    static void txnProducer(Args a) throws Exception {
        KafkaProducer<byte[], byte[]> producer =
            new KafkaProducer<>(txnProducerProps(a), new ByteArraySerializer(), new ByteArraySerializer());
        producer.initTransactions();
        emit("done", "init");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        List<Future<RecordMetadata>> pending = new ArrayList<>();
        Exception sendFailure = null;  // a send that threw is reported by the next flush
        for (String line; (line = in.readLine()) != null; ) {
            String[] f = line.split("\t", 3);
            String command = f[0];
            try {
                switch (command) {
                    case "begin": producer.beginTransaction(); break;
                    case "send":
                        try { pending.add(producer.send(inputRecord(f[1], f[2]))); }
                        catch (KafkaException e) { if (sendFailure == null) sendFailure = e; }
                        continue;
                    case "flush":
                        producer.flush();
                        if (sendFailure != null) throw sendFailure;
                        for (Future<RecordMetadata> sent : pending) sent.get();
                        break;
                    case "commit": producer.commitTransaction(); break;
                    case "abort": producer.abortTransaction(); break;
                    case "halt":
                        synchronized (OUT_LOCK) { System.out.flush(); }
                        Runtime.getRuntime().halt(0);
                        break;
                    case "close": producer.close(); emit("done", "close"); return;
                    default: throw new UsageError("unknown txn-producer command " + command);
                }
                emit("done", command);
            } catch (UsageError e) {
                throw e;
            } catch (Exception e) {
                emit("failed", command, "error", describe(e));
            } finally {
                if (!command.equals("send")) { pending.clear(); sendFailure = null; }
            }
        }
        producer.close();
    }

    static void txnTransform(Args a) throws Exception {
        String output = a.required("--output");
        byte[] prefix = utf8(a.opt("--value-prefix", ""));
        int max = a.intOpt("--max", 1);
        long deadline = System.currentTimeMillis() + a.timeoutMs;
        Properties cp = consumerProps(a, a.required("--group"), "earliest");
        cp.put("isolation.level", "read_committed");
        try (KafkaConsumer<byte[], byte[]> c =
                 new KafkaConsumer<>(cp, new ByteArrayDeserializer(), new ByteArrayDeserializer());
             KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(
                 txnProducerProps(a), new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            c.subscribe(List.of(a.required("--topic")));
            List<ConsumerRecord<byte[], byte[]>> read = new ArrayList<>();
            while (read.size() < max && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200)))
                    if (read.size() < max) read.add(r);
            if (read.size() < max)
                throw new IllegalStateException("read " + read.size() + " of " + max + " records in time");
            producer.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<byte[], byte[]> r : read) {
                byte[] value = Arrays.copyOf(prefix, prefix.length + r.value().length);
                System.arraycopy(r.value(), 0, value, prefix.length, r.value().length);
                producer.send(new ProducerRecord<>(output, r.partition(), r.key(), value));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
                emitRecord(r);
            }
            producer.flush();  // abortTransaction drops what is still unsent; the output must reach the log
            producer.sendOffsetsToTransaction(offsets, c.groupMetadata());
            if (a.opt("--end", "commit").equals("commit")) producer.commitTransaction();
            else producer.abortTransaction();
            emit("done", a.opt("--end", "commit"));
        }
    }

    static void event(String name, Collection<TopicPartition> tps) {
        emit("event", name, "partitions", pairsOf(tps));
    }

    static void emitRecord(ConsumerRecord<byte[], byte[]> r) {
        List<Object> hs = new ArrayList<>();
        for (Header h : r.headers()) hs.add(Arrays.asList(h.key(), text(h.value())));
        emit("topic", r.topic(), "partition", r.partition(), "offset", r.offset(),
             "timestamp", r.timestamp(), "timestamp_type", r.timestampType().name,
             "key", text(r.key()), "key_b64", b64(r.key()),
             "value", text(r.value()), "value_b64", b64(r.value()), "headers", hs,
             "leader_epoch", r.leaderEpoch().orElse(null));
    }

    // ---- admin ---------------------------------------------------------------------------

    static void admin(Args a) throws Exception {
        Properties p = a.clientProps();
        p.putIfAbsent("default.api.timeout.ms", String.valueOf(a.timeoutMs));
        p.putIfAbsent("request.timeout.ms", String.valueOf(Math.min(a.timeoutMs, 30_000)));
        try (Admin admin = Admin.create(p)) {
            switch (a.sub) {
                case "create-topic": {
                    int n = a.intOpt("--partitions", 1);
                    short rf = (short) a.intOpt("--replication-factor", 1);
                    // -1 asks for the broker's default
                    Optional<Integer> partitions = n < 0 ? Optional.empty() : Optional.of(n);
                    Optional<Short> replication = rf < 0 ? Optional.empty() : Optional.of(rf);
                    NewTopic t = new NewTopic(a.required("--topic"), partitions, replication);
                    Map<String, String> configs = new LinkedHashMap<>();
                    for (String[] kv : pairs(a.all("--config"))) configs.put(kv[0], kv[1]);
                    var result = admin.createTopics(List.of(t.configs(configs)));
                    result.all().get();
                    emit("topic", t.name(), "created", true,
                         "partitions", result.numPartitions(t.name()).get(),
                         "replication_factor", result.replicationFactor(t.name()).get());
                    break;
                }
                case "create-partitions": {
                    String topic = a.required("--topic");
                    int total = Integer.parseInt(a.required("--partitions"));
                    admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(total))).all().get();
                    emit("topic", topic, "partitions", total);
                    break;
                }
                case "delete-topic":
                    admin.deleteTopics(List.of(a.required("--topic"))).all().get();
                    emit("topic", a.required("--topic"), "deleted", true);
                    break;
                case "list-topics":
                    for (String name : admin.listTopics().names().get().stream().sorted().toList())
                        emit("topic", name);
                    break;
                case "describe-topics": {
                    Map<String, TopicDescription> ds =
                        admin.describeTopics(List.of(a.required("--topic").split(","))).allTopicNames().get();
                    for (TopicDescription d : ds.values()) {
                        List<Object> parts = new ArrayList<>();
                        for (TopicPartitionInfo i : d.partitions())
                            parts.add(map("partition", i.partition(), "leader", nodeId(i.leader()),
                                "replicas", ids(i.replicas()), "isr", ids(i.isr())));
                        emit("topic", d.name(), "internal", d.isInternal(),
                             "topic_id", String.valueOf(d.topicId()), "partitions", parts);
                    }
                    break;
                }
                case "list-offsets": listOffsets(a, admin); break;
                case "describe-configs": {
                    ConfigResource res = a.has("--broker")
                        ? new ConfigResource(ConfigResource.Type.BROKER, a.required("--broker"))
                        : new ConfigResource(ConfigResource.Type.TOPIC, a.required("--topic"));
                    Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
                    for (var e : cfg.entries())
                        emit("resource", res.name(), "name", e.name(), "value", e.value(),
                             "source", e.source().name(), "read_only", e.isReadOnly(),
                             "sensitive", e.isSensitive());
                    break;
                }
                case "describe-cluster": {
                    DescribeClusterResult r = admin.describeCluster();
                    emit("cluster_id", r.clusterId().get(), "controller", nodeId(r.controller().get()),
                         "nodes", r.nodes().get().stream().map(n -> map("id", n.id(), "host", n.host(),
                             "port", n.port())).collect(Collectors.toList()));
                    break;
                }
                case "list-groups":
                    for (var g : admin.listConsumerGroups().all().get())
                        emit("group", g.groupId(), "simple", g.isSimpleConsumerGroup(),
                             "state", g.state().map(Object::toString).orElse(null));
                    break;
                case "describe-group": {
                    String g = a.required("--group");
                    ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(g)).all().get().get(g);
                    List<Object> members = new ArrayList<>();
                    for (var m : d.members())
                        members.add(map("member_id", m.consumerId(), "client_id", m.clientId(),
                            "host", m.host(), "partitions", pairsOf(m.assignment().topicPartitions())));
                    emit("group", d.groupId(), "state", String.valueOf(d.state()),
                         "assignor", d.partitionAssignor(), "coordinator", nodeId(d.coordinator()),
                         "members", members);
                    break;
                }
                case "group-offsets": {
                    var offsets = admin.listConsumerGroupOffsets(a.required("--group"))
                        .partitionsToOffsetAndMetadata().get();
                    for (var e : offsets.entrySet())
                        emit("topic", e.getKey().topic(), "partition", e.getKey().partition(),
                             "offset", e.getValue() == null ? null : e.getValue().offset(),
                             "metadata", e.getValue() == null ? null : e.getValue().metadata());
                    break;
                }
                default: throw new UsageError("unknown admin command " + a.sub);
            }
        }
    }

    static void listOffsets(Args a, Admin admin) throws Exception {
        String topic = a.required("--topic");
        String spec = a.required("--spec");
        OffsetSpec os = spec.equals("earliest") ? OffsetSpec.earliest()
            : spec.equals("latest") ? OffsetSpec.latest()
            : spec.equals("max-timestamp") ? OffsetSpec.maxTimestamp()
            : OffsetSpec.forTimestamp(Long.parseLong(spec.startsWith("time:") ? spec.substring(5) : spec));
        List<Integer> parts;
        if (a.has("--partitions"))
            parts = Arrays.stream(a.required("--partitions").split(",")).map(s -> Integer.parseInt(s.trim()))
                .collect(Collectors.toList());
        else
            parts = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions()
                .stream().map(TopicPartitionInfo::partition).sorted().collect(Collectors.toList());
        Map<TopicPartition, OffsetSpec> req = new LinkedHashMap<>();
        for (int pt : parts) req.put(new TopicPartition(topic, pt), os);
        IsolationLevel isolation = IsolationLevel.valueOf(a.opt("--isolation", "read_uncommitted").toUpperCase());
        Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> res =
            admin.listOffsets(req, new ListOffsetsOptions(isolation)).all().get();
        for (TopicPartition tp : req.keySet()) {
            var info = res.get(tp);
            emit("partition", tp.partition(), "offset", info.offset(), "timestamp", info.timestamp(),
                 "leader_epoch", info.leaderEpoch().orElse(null));
        }
    }

    // ---- plumbing ------------------------------------------------------------------------

    static final class UsageError extends RuntimeException {
        UsageError(String m) { super(m); }
    }

    /** argv after the command: --name value pairs (repeatable) and the FLAGS without a value. */
    static final class Args {
        final String command;
        final String sub;
        final Map<String, List<String>> opts = new HashMap<>();
        final long timeoutMs;

        Args(String[] argv) {
            command = argv[0];
            int i = 1;
            sub = command.equals("admin") && argv.length > 1 && !argv[1].startsWith("--") ? argv[i++] : null;
            if (command.equals("admin") && sub == null) throw new UsageError("admin needs a subcommand");
            for (; i < argv.length; i++) {
                String k = argv[i];
                if (!k.startsWith("--")) throw new UsageError("unexpected argument " + k);
                String v = FLAGS.contains(k) ? "true" : null;
                if (v == null) {
                    if (i + 1 >= argv.length) throw new UsageError(k + " needs a value");
                    v = argv[++i];
                }
                opts.computeIfAbsent(k, x -> new ArrayList<>()).add(v);
            }
            required("--bootstrap");
            timeoutMs = longOpt("--timeout-ms", 30_000);
        }

        boolean has(String k) { return opts.containsKey(k); }
        List<String> all(String k) { return opts.getOrDefault(k, List.of()); }
        String opt(String k, String dflt) { return has(k) ? all(k).get(all(k).size() - 1) : dflt; }
        String required(String k) {
            if (!has(k)) throw new UsageError(command + (sub == null ? "" : " " + sub) + " needs " + k);
            return opt(k, null);
        }
        int intOpt(String k, int dflt) { return (int) longOpt(k, dflt); }
        long longOpt(String k, long dflt) {
            try { return has(k) ? Long.parseLong(opt(k, null)) : dflt; }
            catch (NumberFormatException e) {
                throw new UsageError(k + " needs a number, got " + opt(k, null));
            }
        }

        Properties clientProps() {
            Properties p = new Properties();
            for (String[] kv : pairs(all("--prop"))) p.put(kv[0], kv[1]);
            p.putIfAbsent("bootstrap.servers", required("--bootstrap"));
            p.putIfAbsent("client.id", "gregor-java-" + command);
            return p;
        }
    }

    /** "k=v" items, each possibly a comma-separated list. */
    static List<String[]> pairs(List<String> items) {
        List<String[]> out = new ArrayList<>();
        for (String item : items)
            for (String kv : item.split(",")) {
                int eq = kv.indexOf('=');
                if (eq <= 0) throw new UsageError("expected key=value, got " + kv);
                out.add(new String[] {kv.substring(0, eq), kv.substring(eq + 1)});
            }
        return out;
    }

    /** A client that hangs (for example on a broker that never answers) still ends. */
    static void startDeadline(long ms) {
        Thread t = new Thread(() -> {
            try { Thread.sleep(ms); } catch (InterruptedException e) { return; }
            synchronized (OUT_LOCK) { System.out.flush(); }
            System.err.println("ERROR: hard deadline of " + ms + " ms passed; the client hung");
            Runtime.getRuntime().halt(3);
        }, "deadline");
        t.setDaemon(true);
        t.start();
    }

    static Throwable root(Throwable e) {
        return e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
    }

    static String describe(Throwable e) {
        e = root(e);
        StringBuilder sb = new StringBuilder(e.getClass().getName() + ": " + e.getMessage());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause())
            sb.append("\n  caused by ").append(c.getClass().getName()).append(": ").append(c.getMessage());
        return sb.toString();
    }

    static byte[] utf8(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    static byte[] sized(byte[] b, int size) {
        if (size < 0) return b;
        byte[] out = Arrays.copyOf(b, size);
        Arrays.fill(out, Math.min(b.length, size), size, (byte) '.');
        return out;
    }

    static String text(byte[] b) {
        if (b == null) return null;
        try {
            return StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(b)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    static String b64(byte[] b) { return b == null ? null : Base64.getEncoder().encodeToString(b); }

    static Integer nodeId(Node n) { return n == null ? null : n.id(); }

    static List<Integer> ids(List<Node> nodes) {
        return nodes.stream().map(Node::id).collect(Collectors.toList());
    }

    static List<Object> pairsOf(Collection<TopicPartition> tps) {
        return tps.stream().map(tp -> List.of(tp.topic(), tp.partition())).collect(Collectors.toList());
    }

    static Map<String, Object> map(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static void emit(Object... kv) {
        String line = json(map(kv));
        synchronized (OUT_LOCK) { System.out.println(line); }
    }

    static String json(Object v) {
        if (v == null) return "null";
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        if (v instanceof Map) {
            StringBuilder sb = new StringBuilder("{");
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet())
                sb.append(sb.length() > 1 ? ", " : "").append(json(e.getKey().toString()))
                  .append(": ").append(json(e.getValue()));
            return sb.append('}').toString();
        }
        if (v instanceof Collection) {
            return "[" + ((Collection<?>) v).stream().map(GregorJavaClient::json)
                .collect(Collectors.joining(", ")) + "]";
        }
        StringBuilder sb = new StringBuilder("\"");
        for (char ch : v.toString().toCharArray()) {
            switch (ch) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch)); else sb.append(ch);
            }
        }
        return sb.append('"').toString();
    }
}
