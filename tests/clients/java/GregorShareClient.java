/*
 * Command-line harness around the Java Kafka client's KafkaShareConsumer (kafka-clients 4.x, KIP-932)
 * for Gregor's client tests: one share-group member per JVM. Compiled beside GregorJavaClient.java
 * (whose Args, emit and deadline it uses) against kafka-clients 4.x only; bin/setup-clients builds it.
 * Every delivery is one JSON line on stdout; client logs and errors go to stderr. Exit codes: 0 ok,
 * 1 client error, 2 usage error, 3 hard deadline passed. It only drives the client: it never decides
 * whether the broker's answer is right.
 */
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

public final class GregorShareClient {
    static final String USAGE = String.join("\n",
        "usage: GregorShareClient share-member --bootstrap HOST:PORT --group G --topic T [options]",
        "  subscribes to T as a member of share group G and polls until --max deliveries (then",
        "  --linger-ms more of polling), the --timeout-ms deadline, or SIGTERM; prints",
        "  {value, delivery_count, partition, offset} per delivery and {event: done, deliveries} at the end",
        "  --explicit          share.acknowledgement.mode=explicit: each record acknowledged as below,",
        "                      then commitSync after each poll (otherwise implicit: ACCEPT on next poll)",
        "  --reject V,..       REJECT these values; --release V,.. RELEASE them on their first delivery;",
        "  --release-always V,..  RELEASE them every time; everything else ACCEPT",
        "  --renew V,..        RENEW these on first delivery, twice, --renew-wait-ms apart (default 1400),",
        "                      then ACCEPT them: held past the lock without losing it",
        "  --hold              acquire the first records polled and never acknowledge them: stop",
        "                      polling and wait (for the locks to run out) until the deadline",
        "  --prop key=value    any client config");

    public static void main(String[] argv) throws Exception {
        GregorJavaClient.startDeadline(GregorJavaClient.deadlineMs(argv));
        System.exit(run(argv));
    }

    static int run(String[] argv) {
        if (argv.length == 0 || !argv[0].equals("share-member")) {
            System.err.println(USAGE);
            return 2;
        }
        try {
            shareMember(new GregorJavaClient.Args(argv));
            return 0;
        } catch (GregorJavaClient.UsageError e) {
            System.err.println("usage error: " + e.getMessage() + "\n" + USAGE);
            return 2;
        } catch (Exception e) {
            System.err.println("ERROR: " + GregorJavaClient.describe(e));
            return 1;
        }
    }

    static Set<String> values(GregorJavaClient.Args a, String option) {
        return a.has(option) ? new HashSet<>(Arrays.asList(a.opt(option, "").split(","))) : Set.of();
    }

    static void shareMember(GregorJavaClient.Args a) throws InterruptedException {
        boolean explicit = a.has("--explicit");
        Set<String> reject = values(a, "--reject"), release = values(a, "--release"),
            releaseAlways = values(a, "--release-always"), renew = values(a, "--renew");
        long renewWait = a.longOpt("--renew-wait-ms", 1400);
        int max = a.intOpt("--max", Integer.MAX_VALUE);
        long linger = a.longOpt("--linger-ms", 0);
        long deadline = System.currentTimeMillis() + a.timeoutMs;
        Properties p = a.clientProps();
        p.putIfAbsent("group.id", a.required("--group"));
        p.putIfAbsent("share.acknowledgement.mode", explicit ? "explicit" : "implicit");
        int seen = 0;
        Map<Long, Integer> renewed = new HashMap<>();  // offset -> RENEWs sent
        try (KafkaShareConsumer<byte[], byte[]> c =
                 new KafkaShareConsumer<>(p, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            c.subscribe(Arrays.asList(a.required("--topic").split(",")));
            long end = deadline;
            while (System.currentTimeMillis() < end) {
                long wait = Math.max(1, Math.min(200, end - System.currentTimeMillis()));
                var records = c.poll(Duration.ofMillis(wait));
                for (ConsumerRecord<byte[], byte[]> r : records) {
                    String value = GregorJavaClient.text(r.value());
                    int renewals = renewed.getOrDefault(r.offset(), 0);
                    if (renewals > 0) {  // the client hands a renewed record back to be acknowledged again
                        GregorJavaClient.emit("event", "returned", "value", value, "offset", r.offset());
                    } else {
                        seen++;
                        GregorJavaClient.emit("value", value, "delivery_count", r.deliveryCount().orElse((short) -1),
                                              "partition", r.partition(), "offset", r.offset());
                    }
                    if (a.has("--hold") || !explicit) continue;
                    boolean first = r.deliveryCount().orElse((short) 1) == 1;
                    if (reject.contains(value)) c.acknowledge(r, AcknowledgeType.REJECT);
                    else if (releaseAlways.contains(value) || release.contains(value) && first)
                        c.acknowledge(r, AcknowledgeType.RELEASE);
                    else if (renew.contains(value) && first && renewals < 2) {
                        c.acknowledge(r, AcknowledgeType.RENEW);
                        c.commitSync();
                        renewed.put(r.offset(), renewals + 1);
                        GregorJavaClient.emit("event", "renewed", "value", value);
                        Thread.sleep(renewWait);
                    } else c.acknowledge(r, AcknowledgeType.ACCEPT);
                }
                if (a.has("--hold") && !records.isEmpty()) {
                    // acquired and never acknowledged: another poll would acknowledge (implicit) or
                    // refuse (explicit), so this member just stays in the group until the deadline
                    while (System.currentTimeMillis() < deadline) Thread.sleep(100);
                    break;
                }
                if (explicit && !records.isEmpty()) c.commitSync();
                if (seen >= max && end == deadline) end = Math.min(deadline, System.currentTimeMillis() + linger);
            }
            GregorJavaClient.emit("event", "done", "deliveries", seen);
        }
    }
}
