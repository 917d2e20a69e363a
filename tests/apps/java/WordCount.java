import java.util.Arrays;
import java.util.Locale;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.KeyValueStore;

/**
 * The word count tests/apps/test_streams.py runs against Gregor and Apache Kafka: lines from the
 * input topic are split into words, re-keyed by word (the "counts-repartition" topic) and counted
 * in the state store "counts", whose changelog topic ("counts-changelog") is compacted; every new
 * count goes to the output topic as (word, count as a big-endian long).
 *
 * Usage: WordCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR [GUARANTEE]. GUARANTEE is
 * Streams' processing.guarantee: at_least_once (the default) or exactly_once_v2. It prints
 * "STATE <new state>" on each state change, and closes cleanly (committing) on SIGTERM.
 */
public final class WordCount {
    public static void main(String[] args) throws InterruptedException {
        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.length > 5 ? args[5] : StreamsConfig.AT_LEAST_ONCE);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 500);
        // Committed repartition records are deleted (DeleteRecords) every second, not every 30 s.
        props.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 1000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        // Streams does not leave its group on close, so a restarted instance waits for the old
        // member's session to expire (45 s by default) before it gets partitions again.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1500);

        // Small segments and a low dirty ratio let either broker compact the changelog within a test.
        Map<String, String> changelog = Map.of("segment.ms", "2000", "min.cleanable.dirty.ratio", "0.01");
        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(args[2], Consumed.with(Serdes.String(), Serdes.String()))
            .flatMapValues(line -> Arrays.asList(line.toLowerCase(Locale.ROOT).split("\\W+")))
            .filter((key, word) -> !word.isEmpty())
            .groupBy((key, word) -> word, Grouped.with("counts", Serdes.String(), Serdes.String()))
            .count(Materialized.<String, Long, KeyValueStore<Bytes, byte[]>>as("counts")
                .withLoggingEnabled(changelog))
            .toStream()
            .to(args[3], Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch closed = new CountDownLatch(1);
        streams.setStateListener((now, before) -> System.out.println("STATE " + now));
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            closed.countDown();
        }));
        streams.start();
        closed.await();
    }
}
