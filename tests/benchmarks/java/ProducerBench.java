/*
 * The Java producer (org.apache.kafka:kafka-clients) as a benchmark peer: one run of one throughput workload, timed
 * as the Python workers time theirs, with one result line on stdout. Compiled at bench time by run.py.
 *
 *   java -cp '<kafka libs>/*:<classes>' ProducerBench BOOTSTRAP TOPIC COUNT VALUES KEYS|- COMPRESSION IDEMPOTENT LINGER_MS
 *
 * VALUES and KEYS are pools written by the orchestrator (int32 big-endian length, then the bytes, repeated): the same
 * payloads the Python clients send, cycled the same way. The idiom is the documented one: send() with a callback in
 * a loop, then flush(); send() blocks when buffer.memory is full. One warm-up record is sent and acknowledged first,
 * as for every client. Then, unlike the Python clients, which have no JIT, the whole workload runs once untimed (the
 * "cold" pass, reported apart) so that the timed pass measures the compiled producer a long-running service gets.
 * The result line reports both passes; the independent count afterwards expects 1 + 2 x COUNT records.
 */

import java.io.DataInputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class ProducerBench {
    private static final String RESULT_MARK = "BENCH-RESULT ";

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        List<byte[]> valuePool = readPool(Path.of(args[3]));
        List<byte[]> keyPool = args[4].equals("-") ? null : readPool(Path.of(args[4]));
        String compression = args[5];
        boolean idempotent = Boolean.parseBoolean(args[6]);

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(ProducerConfig.LINGER_MS_CONFIG, args[7]);
        config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        // Java defaults to acks=all with idempotence; the other workloads run acks=1 without it, as for every peer.
        config.put(ProducerConfig.ACKS_CONFIG, idempotent ? "all" : "1");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());

        // Prepared references cycling through the pools, like the Python workers' records_for().
        byte[][] values = new byte[count][];
        byte[][] keys = keyPool == null ? null : new byte[count][];
        for (int i = 0; i < count; i++) {
            values[i] = valuePool.get(i % valuePool.size());
            if (keys != null) {
                keys[i] = keyPool.get(i % keyPool.size());
            }
        }

        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(config)) {
            producer.send(new ProducerRecord<>(topic, "warm-up".getBytes())).get();
            AtomicLong failed = new AtomicLong();
            Callback callback = (metadata, error) -> {
                if (error != null) {
                    failed.incrementAndGet();
                }
            };
            double rssBefore = statusMb("VmRSS:");
            long[] cold = pass(producer, topic, keys, values, callback);
            long[] timed = pass(producer, topic, keys, values, callback);
            System.out.println(RESULT_MARK + String.format(
                java.util.Locale.ROOT,
                "{\"records\": %d, \"elapsed_s\": %.6f, \"cpu_s\": %.6f, \"cold_elapsed_s\": %.6f, "
                    + "\"cold_cpu_s\": %.6f, \"untimed_records\": %d, \"rss_before_mb\": %.1f, "
                    + "\"peak_rss_mb\": %.1f, \"failed\": %d, \"java\": \"%s\"}",
                count, timed[0] / 1e9, timed[1] / 1e9, cold[0] / 1e9, cold[1] / 1e9, count, rssBefore,
                statusMb("VmHWM:"), failed.get(), System.getProperty("java.version")));
        }
    }

    /** Send every record, then flush: {wall-clock ns, process CPU ns}. */
    private static long[] pass(
        KafkaProducer<byte[], byte[]> producer, String topic, byte[][] keys, byte[][] values, Callback callback
    ) {
        long cpu0 = processCpuNanos();
        long t0 = System.nanoTime();
        for (int i = 0; i < values.length; i++) {
            producer.send(new ProducerRecord<>(topic, keys == null ? null : keys[i], values[i]), callback);
        }
        producer.flush();
        return new long[] {System.nanoTime() - t0, processCpuNanos() - cpu0};
    }

    private static List<byte[]> readPool(Path path) throws IOException {
        List<byte[]> pool = new ArrayList<>();
        try (DataInputStream in = new DataInputStream(Files.newInputStream(path))) {
            while (in.available() > 0) {
                byte[] item = new byte[in.readInt()];
                in.readFully(item);
                pool.add(item);
            }
        }
        return pool;
    }

    /** User + system CPU of the whole JVM, every thread included (the sender, GC and JIT threads). */
    private static long processCpuNanos() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getProcessCpuTime();
    }

    private static double statusMb(String field) throws IOException {
        for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
            if (line.startsWith(field)) {
                return Long.parseLong(line.replaceAll("[^0-9]", "")) / 1024.0;
            }
        }
        return Double.NaN;
    }
}
