package binlake.peer;

import io.debezium.embedded.Connect;
import io.debezium.engine.DebeziumEngine;
import io.debezium.engine.RecordChangeEvent;
import io.debezium.engine.format.ChangeEventFormat;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.source.SourceRecord;

/**
 * Debezium's embedded engine (MariaDB connector) with a consumer that only counts change records of one table: the bench's Debezium
 * peer. Capture only, nothing is written anywhere, so its rate bounds what a JVM binlog reader does here.
 *
 * <p>Two phases, each its own process, sharing the offset and schema history files of one work directory:
 * {@code snapshot} reads the table (snapshot.mode=initial) until {@code expected} snapshot records arrived, then
 * waits for an insert into the marker table (written by the bench once the snapshot is counted) so the offsets
 * it stores are past the snapshot; {@code stream} resumes from those offsets and counts inserts, updates and
 * deletes until {@code expected}. Each prints one line {@code RESULT <phase> <records> <seconds> <fromFirst>}: the
 * seconds from the engine's start (the JVM's start excluded) and from the first counted record to the last one.
 *
 * <p>Usage: CountingPeer phase expected port user password workDir database table markerTable serverId
 */
public final class CountingPeer {
  private CountingPeer() {}

  public static void main(String[] args) throws Exception {
    String phase = args[0];
    long expected = Long.parseLong(args[1]);
    String database = args[6];
    String topic = "peer." + database + "." + args[7];
    String markerTopic = "peer." + database + "." + args[8];
    Properties props = new Properties();
    props.setProperty("name", "binlake-bench-peer");
    props.setProperty("connector.class", "io.debezium.connector.mariadb.MariaDbConnector");
    props.setProperty("offset.storage", "org.apache.kafka.connect.storage.FileOffsetBackingStore");
    props.setProperty("offset.storage.file.filename", args[5] + "/offsets.dat");
    props.setProperty("offset.flush.interval.ms", "1000");
    props.setProperty("schema.history.internal", "io.debezium.storage.file.history.FileSchemaHistory");
    props.setProperty("schema.history.internal.file.filename", args[5] + "/schema-history.dat");
    props.setProperty("database.hostname", "127.0.0.1");
    props.setProperty("database.port", args[2]);
    props.setProperty("database.user", args[3]);
    props.setProperty("database.password", args[4]);
    props.setProperty("database.server.id", args[9]);
    props.setProperty("topic.prefix", "peer");
    props.setProperty("database.include.list", database);
    props.setProperty("table.include.list", database + "." + args[7] + "," + database + "." + args[8]);
    props.setProperty("snapshot.mode", "initial");
    // The bench's CDC user has binlake's grants (no RELOAD/LOCK TABLES) and nothing writes during the snapshot.
    props.setProperty("snapshot.locking.mode", "none");
    props.setProperty("tombstones.on.delete", "false");
    props.setProperty("include.schema.changes", "false");
    props.setProperty("connect.timeout.ms", "30000");
    // Larger batches and a short idle poll than the defaults (2048, 500 ms): the peer is tuned for throughput,
    // as binlake's bench config is (max_events 200,000).
    props.setProperty("max.batch.size", "8192");
    props.setProperty("max.queue.size", "32768");
    props.setProperty("poll.interval.ms", "50");

    AtomicLong counted = new AtomicLong();
    AtomicLong snapshotRecords = new AtomicLong();
    AtomicLong doneNanos = new AtomicLong();
    AtomicLong firstNanos = new AtomicLong();
    CountDownLatch reached = new CountDownLatch(1);
    CountDownLatch markerSeen = new CountDownLatch(1);
    boolean snapshotPhase = phase.equals("snapshot");

    long started = System.nanoTime();
    DebeziumEngine<RecordChangeEvent<SourceRecord>> engine =
        DebeziumEngine.create(ChangeEventFormat.of(Connect.class))
            .using(props)
            .notifying(event -> {
              SourceRecord record = event.record();
              if (!(record.value() instanceof Struct value)) {
                return;
              }
              String op = value.getString("op");
              if (record.topic().equals(markerTopic)) {
                if ("c".equals(op)) {
                  markerSeen.countDown();
                }
                return;
              }
              if (!record.topic().equals(topic)) {
                return;
              }
              if ("r".equals(op)) {
                snapshotRecords.incrementAndGet();
              }
              boolean wanted = snapshotPhase ? "r".equals(op) : !"r".equals(op);
              if (wanted) {
                firstNanos.compareAndSet(0, System.nanoTime());
              }
              if (wanted && counted.incrementAndGet() == expected) {
                doneNanos.set(System.nanoTime());
                reached.countDown();
              }
            })
            .using((success, message, error) -> {
              if (!success) {
                System.err.println("engine stopped: " + message + (error == null ? "" : " " + error));
                reached.countDown();
                markerSeen.countDown();
              }
            })
            .build();
    ExecutorService executor = Executors.newSingleThreadExecutor();
    executor.execute(engine);
    boolean inTime = reached.await(Long.parseLong(System.getProperty("peer.timeout.s", "1800")), TimeUnit.SECONDS);
    int status = 0;
    if (!inTime || doneNanos.get() == 0) {
      System.err.println("counted " + counted.get() + " of " + expected + " records");
      status = 2;
    } else {
      double seconds = (doneNanos.get() - started) / 1e9;
      double fromFirst = (doneNanos.get() - firstNanos.get()) / 1e9;
      System.out.println("RESULT " + phase + " " + counted.get() + " " + seconds + " " + fromFirst);
      System.out.flush();
      if (snapshotPhase && !markerSeen.await(300, TimeUnit.SECONDS)) {
        System.err.println("the marker insert never arrived");
        status = 3;
      }
    }
    if (!snapshotPhase && snapshotRecords.get() > 0) {
      // The binlog phase must resume from the stored offsets, not snapshot the table again.
      System.err.println("the stream phase re-read " + snapshotRecords.get() + " snapshot records");
      status = 4;
    }
    try {
      engine.close();
      executor.shutdown();
      executor.awaitTermination(60, TimeUnit.SECONDS);
    } catch (IllegalStateException alreadyStopped) {
      // The engine stopped itself after an error (reported above); nothing is left to close.
    }
    System.out.println("COUNTED " + counted.get());
    System.exit(status);
  }
}
