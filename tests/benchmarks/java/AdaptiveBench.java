// The Java producer's side of tests/benchmarks/adaptive_bench.py: keyless records of `valueSize` bytes sent as fast
// as buffer.memory lets for `beforeMs` + `duringMs` (the orchestrator slows or stops one broker from the line "START"
// on plus `beforeMs`), then flushed. A warm-up pass of `warmupMs` comes first, untimed. Prints one JSON line: records
// acknowledged in each window, leaving out its first second (the partitioner needs a moment to notice). The extra
// arguments are producer settings, key=value (e.g. partitioner.availability.timeout.ms=300).
import java.util.Properties;
import java.util.Random;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class AdaptiveBench {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String topic = args[1];
        int valueSize = Integer.parseInt(args[2]);
        long warmupMs = Long.parseLong(args[3]);
        long beforeMs = Long.parseLong(args[4]);
        long duringMs = Long.parseLong(args[5]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        for (int i = 6; i < args.length; i++) {
            String[] pair = args[i].split("=", 2);
            props.put(pair[0], pair[1]);
        }
        byte[][] values = new byte[1024][];
        Random random = new Random(7);
        for (int i = 0; i < values.length; i++) {
            values[i] = new byte[valueSize];
            random.nextBytes(values[i]);
        }
        AtomicLong failed = new AtomicLong();
        long[] windows = new long[2];
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            long end = System.nanoTime() + warmupMs * 1_000_000L;
            int n = 0;
            while (System.nanoTime() < end) {
                producer.send(new ProducerRecord<>(topic, values[n++ % values.length]));
            }
            producer.flush();
            System.out.println("START");
            System.out.flush();
            long started = System.nanoTime();
            long before = started + beforeMs * 1_000_000L;
            long stop = before + duringMs * 1_000_000L;
            while (System.nanoTime() < stop) {
                producer.send(new ProducerRecord<>(topic, values[n++ % values.length]), (metadata, error) -> {
                    if (error != null) {
                        failed.incrementAndGet();
                        return;
                    }
                    long at = System.nanoTime();
                    synchronized (windows) {
                        if (at >= started + 1_000_000_000L && at < before) {
                            windows[0]++;
                        } else if (at >= before + 1_000_000_000L && at < stop) {
                            windows[1]++;
                        }
                    }
                });
            }
            producer.flush();
        }
        double beforeS = (beforeMs - 1000) / 1000.0;
        double duringS = (duringMs - 1000) / 1000.0;
        System.out.println("{\"before\": " + (windows[0] / beforeS) + ", \"during\": " + (windows[1] / duringS)
                + ", \"failed\": " + failed.get() + "}");
    }
}
