/*
 * The Java producer (org.apache.kafka:kafka-clients) as a benchmark peer: one run of one throughput workload, timed
 * as the Python workers time theirs, with one result line on stdout. Compiled at bench time by java_peer.py.
 *
 *   java -cp '<kafka libs>/*:<classes>' ProducerBench BOOTSTRAP TOPIC COUNT VALUES KEYS|- COMPRESSION IDEMPOTENT
 *                                                     LINGER_MS|- BATCH_SIZE|- warm|cold HANDSHAKE
 *
 * VALUES and KEYS are pools written by the orchestrator (int32 big-endian length, then the bytes, repeated): the same
 * payloads the Python clients send, cycled the same way. The idiom is the documented one: send() with a callback in
 * a loop, then flush(); send() blocks when buffer.memory is full. LINGER_MS and BATCH_SIZE are left at the client's
 * defaults when "-". One warm-up record is sent and acknowledged first, as for every client. "warm": the whole
 * workload then runs once untimed in the same JVM, so that the timed pass measures the compiled producer a
 * long-running service has; "cold": the timed pass is the JVM's first, JIT compilation included, as a short job
 * gets. With HANDSHAKE "true" the harness prints "BENCH-READY" before the timed pass and waits for a line on stdin
 * (the orchestrator reads the broker's CPU and end offsets in between).
 */

import java.io.BufferedReader;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
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
        boolean warm = args[9].equals("warm");
        boolean handshake = Boolean.parseBoolean(args[10]);

        Properties config = new Properties();
        config.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (!args[7].equals("-")) {
            config.put(ProducerConfig.LINGER_MS_CONFIG, args[7]);
        }
        if (!args[8].equals("-")) {
            config.put(ProducerConfig.BATCH_SIZE_CONFIG, args[8]);
        }
        config.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, compression);
        // Java's defaults (acks=all with idempotence), written out as for every peer.
        config.put(ProducerConfig.ACKS_CONFIG, idempotent ? "all" : "1");
        config.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        config.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        config.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, ByteArraySerializer.class.getName());
        // Since 4.4 (KIP-1242) the client names the cluster and node in ApiVersions v5 once it knows them; Tansu drops
        // such a request, and the producer would retry forever. Off, as aioproducer stays with a broker that never
        // answered v5 (a real broker's answer is the same either way here: the cluster is the one asked for).
        config.put("metadata.cluster.check.enable", "false");

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
            long[] untimed = warm ? pass(producer, topic, keys, values, callback) : new long[] {0, 0};
            if (handshake) {
                System.out.println("BENCH-READY");
                System.out.flush();
                BufferedReader stdin = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
                if (stdin.readLine() == null) {
                    throw new IOException("the orchestrator went away before the timed pass");
                }
            }
            long[] timed = pass(producer, topic, keys, values, callback);
            System.out.println(RESULT_MARK + String.format(
                java.util.Locale.ROOT,
                "{\"records\": %d, \"elapsed_s\": %.6f, \"cpu_s\": %.6f, \"untimed_elapsed_s\": %.6f, "
                    + "\"untimed_cpu_s\": %.6f, \"untimed_records\": %d, \"rss_before_mb\": %.1f, "
                    + "\"peak_rss_mb\": %.1f, \"failed\": %d, \"java\": \"%s\"}",
                count, timed[0] / 1e9, timed[1] / 1e9, untimed[0] / 1e9, untimed[1] / 1e9, warm ? count : 0,
                rssBefore, statusMb("VmHWM:"), failed.get(), System.getProperty("java.version")));
            System.out.flush();
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
