// The Java producer's side of tests/benchmarks/txn_bench.py: `warmup` untimed transactions, then `transactions`
// timed ones of `perTransaction` records of `valueSize` bytes each, committed one after the other; prints one JSON
// line. Compiled by txn_bench.py against the Kafka jars the test fixture downloads.
import java.util.Properties;
import java.util.Random;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class TxnBench {
    public static void main(String[] args) {
        String bootstrap = args[0];
        String topic = args[1];
        String transactionalId = args[2];
        int perTransaction = Integer.parseInt(args[3]);
        int transactions = Integer.parseInt(args[4]);
        int valueSize = Integer.parseInt(args[5]);
        int warmup = Integer.parseInt(args[6]);
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        props.put(ProducerConfig.LINGER_MS_CONFIG, "5");
        byte[][] values = new byte[1024][];
        Random random = new Random(7);
        for (int i = 0; i < values.length; i++) {
            values[i] = new byte[valueSize];
            random.nextBytes(values[i]);
        }
        try (KafkaProducer<byte[], byte[]> producer =
                new KafkaProducer<>(props, new ByteArraySerializer(), new ByteArraySerializer())) {
            producer.initTransactions();
            int n = 0;
            for (int t = 0; t < warmup; t++) {
                producer.beginTransaction();
                for (int i = 0; i < perTransaction; i++) {
                    producer.send(new ProducerRecord<>(topic, values[n++ % values.length]));
                }
                producer.commitTransaction();
            }
            n = 0;
            long started = System.nanoTime();
            for (int t = 0; t < transactions; t++) {
                producer.beginTransaction();
                for (int i = 0; i < perTransaction; i++) {
                    producer.send(new ProducerRecord<>(topic, values[n++ % values.length]));
                }
                producer.commitTransaction();
            }
            double seconds = (System.nanoTime() - started) / 1e9;
            System.out.println("{\"seconds\": " + seconds + ", \"records\": " + n + "}");
        }
    }
}
