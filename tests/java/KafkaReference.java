// Kafka's own answers for the suite, from the kafka-clients jar on the classpath (compiled and run by
// tests/kafka_reference.py). Prints JSON on stdout:
//   errors        every org.apache.kafka.common.protocol.Errors constant: code, name, default message, and whether
//                 its exception is retriable (RetriableException) or means stale metadata (InvalidMetadataException)
//   murmur2 N...  for each hex-encoded key on stdin: Utils.murmur2(key) and BuiltInPartitioner.partitionForKey(key, n)
//                 for each partition count n
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.errors.ApiException;
import org.apache.kafka.common.errors.InvalidMetadataException;
import org.apache.kafka.common.errors.RetriableException;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.utils.Utils;

public final class KafkaReference {
    public static void main(String[] args) throws Exception {
        if (args.length >= 1 && args[0].equals("errors")) {
            errors();
        } else if (args.length >= 2 && args[0].equals("murmur2")) {
            murmur2(args);
        } else {
            System.err.println("usage: KafkaReference errors | murmur2 N [N...] < hex keys");
            System.exit(2);
        }
    }

    private static void errors() {
        StringBuilder out = new StringBuilder("[");
        for (Errors error : Errors.values()) {
            ApiException exception = error.exception();
            if (out.length() > 1) out.append(",\n");
            out.append("{\"code\": ").append(error.code())
                .append(", \"name\": ").append(quote(error.name()))
                .append(", \"message\": ").append(exception == null ? "null" : quote(exception.getMessage()))
                .append(", \"exception\": ").append(exception == null ? "null" : quote(exception.getClass().getSimpleName()))
                .append(", \"retriable\": ").append(exception instanceof RetriableException)
                .append(", \"invalid_metadata\": ").append(exception instanceof InvalidMetadataException)
                .append("}");
        }
        System.out.println(out.append("]"));
    }

    private static void murmur2(String[] args) throws Exception {
        int[] counts = new int[args.length - 1];
        for (int i = 1; i < args.length; i++) counts[i - 1] = Integer.parseInt(args[i]);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        List<String> rows = new ArrayList<>();
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            String hex = line.trim();
            byte[] key = new byte[hex.length() / 2];
            for (int i = 0; i < key.length; i++) key[i] = (byte) Integer.parseInt(hex.substring(2 * i, 2 * i + 2), 16);
            StringBuilder row = new StringBuilder("{\"key_hex\": ").append(quote(hex))
                .append(", \"murmur2\": ").append(Utils.murmur2(key))
                .append(", \"partition\": {");
            for (int i = 0; i < counts.length; i++) {
                if (i > 0) row.append(", ");
                row.append(quote(Integer.toString(counts[i]))).append(": ")
                    .append(BuiltInPartitioner.partitionForKey(key, counts[i]));
            }
            rows.add(row.append("}}").toString());
        }
        System.out.println("[" + String.join(",\n", rows) + "]");
    }

    private static String quote(String text) {
        StringBuilder out = new StringBuilder("\"");
        for (char c : text.toCharArray()) {
            if (c == '"' || c == '\\') out.append('\\').append(c);
            else if (c < 0x20 || c > 0x7e) out.append(String.format("\\u%04x", (int) c));
            else out.append(c);
        }
        return out.append('"').toString();
    }
}
