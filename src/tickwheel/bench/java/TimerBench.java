/*
 * tickwheel's driver of Kafka's SystemTimer for `tickwheel bench timer` (written for the
 * bench; no Kafka test code). It runs the Python bench's workloads on Kafka's classes,
 * compiled unmodified at bench time, with the same pre-drawn inputs:
 *
 *   (a) add n timers, then cancel all in the given random order: ns per add, per cancel;
 *   (b) add n timers, advance until all have fired: ns per timer, end to end;
 *   (c) `pending` timers, then `iterations` of cancel-one + add-one: ns per iteration;
 *   (d) bytes of heap per pending timer with n pending.
 *
 * Clock. SystemTimer has no Time parameter: it and its TimerTaskLists read Time.SYSTEM.
 * The bench compiles its own SystemTime (shim/SystemTime.java) in place of Kafka's, a
 * simulated clock that this driver moves, so nothing sleeps, as for every Python peer.
 * (b) moves it one tick (1 ms) at a time and calls advanceClock(0) at each, as Kafka's
 * reaper would with time passing; expired tasks run on SystemTimer's own executor thread,
 * and (b) ends when the last one has run.
 *
 * Time. CPU time of the whole process (every thread: driver, executor, GC, JIT), so that
 * moments when another process had the CPU are not counted, like the Python bench's
 * time.process_time: the driver thread's own clock plus the other threads'
 * /proc/self/task/TID/schedstat, in ns (see cpuNs). The MXBean's getProcessCpuTime ticks
 * in 10 ms on Linux, too coarse for short runs; it is the fallback without /proc.
 *
 * Protocol. Arguments: the inputs file (little-endian int32: n, pending, iterations,
 * then delays[n], cancelOrder[n], pendingDelays[pending], churnSlots[iterations],
 * churnDelays[iterations]) and the number of warm-up rounds of (a), (b), (c) to run
 * before answering. Then one command a line on stdin ("a", "b", "c", "d", "quit"), one
 * reply a line on stdout ("ok" and figures, or "error" and a message). One thread reads
 * commands and runs the workloads; SystemTimer's executor thread runs expired tasks.
 */
package tickwheel.bench;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryMXBean;
import java.lang.management.ThreadMXBean;
import java.lang.ref.Reference;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.kafka.common.utils.SystemTime;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.server.util.timer.SystemTimer;
import org.apache.kafka.server.util.timer.TimerTask;

public final class TimerBench {
    /** Kafka's defaults for the purgatory's timer (and the Python peer's). */
    private static final long TICK_MS = 1;
    private static final int WHEEL_SIZE = 20;
    /** Delays are at most this long: (b) has fired everything once the clock passed it. */
    private static final long MAX_DELAY_MS = 10_000;
    private static final Path TASKS = Paths.get("/proc/self/task");
    private static final Path THREAD_SELF = Paths.get("/proc/thread-self");
    private static final ThreadMXBean THREADS = ManagementFactory.getThreadMXBean();
    /** The driver's thread (it loads this class and runs every workload). */
    private static final String SELF_TID = selfTid();
    private static final int GC_ROUNDS = 3;
    /** The simulated clock behind Time.SYSTEM (shim/SystemTime.java). */
    private static final SystemTime CLOCK = (SystemTime) Time.SYSTEM;

    private final int[] delays;
    private final int[] cancelOrder;
    private final int[] pendingDelays;
    private final int[] churnSlots;
    private final int[] churnDelays;

    private TimerBench(Path inputs) throws IOException {
        ByteBuffer buffer = ByteBuffer.wrap(Files.readAllBytes(inputs)).order(ByteOrder.LITTLE_ENDIAN);
        int n = buffer.getInt();
        int pending = buffer.getInt();
        int iterations = buffer.getInt();
        delays = read(buffer, n);
        cancelOrder = read(buffer, n);
        pendingDelays = read(buffer, pending);
        churnSlots = read(buffer, iterations);
        churnDelays = read(buffer, iterations);
        if (buffer.hasRemaining()) {
            throw new IOException("inputs file longer than its counts say");
        }
    }

    private static int[] read(ByteBuffer buffer, int count) {
        int[] values = new int[count];
        buffer.asIntBuffer().get(values);
        buffer.position(buffer.position() + 4 * count);
        return values;
    }

    /** A timer task that does nothing: the work measured is the timer's. */
    private static final class NoopTask extends TimerTask {
        NoopTask(long delayMs) {
            super(delayMs);
        }

        @Override
        public void run() {
        }
    }

    /** A timer task that counts itself and opens a latch when the last one has run. */
    private static final class CountingTask extends TimerTask {
        private final AtomicInteger fired;
        private final int total;
        private final CountDownLatch allFired;

        CountingTask(long delayMs, AtomicInteger fired, int total, CountDownLatch allFired) {
            super(delayMs);
            this.fired = fired;
            this.total = total;
            this.allFired = allFired;
        }

        @Override
        public void run() {
            if (fired.incrementAndGet() == total) {
                allFired.countDown();
            }
        }
    }

    private static SystemTimer newTimer() {
        CLOCK.setNowMs(0);
        return new SystemTimer("bench", TICK_MS, WHEEL_SIZE, 0);
    }

    /** (a): ns per add, ns per cancel. */
    private double[] addThenCancel() {
        int n = delays.length;
        TimerTask[] tasks = new TimerTask[n];
        SystemTimer timer = newTimer();
        try {
            long started = cpuNs();
            for (int i = 0; i < n; i++) {
                TimerTask task = new NoopTask(delays[i]);
                tasks[i] = task;
                timer.add(task);
            }
            long added = cpuNs();
            for (int i : cancelOrder) {
                tasks[i].cancel();
            }
            long cancelled = cpuNs();
            check(timer.size() == 0, "(a) left timers pending");
            return new double[] {(double) (added - started) / n, (double) (cancelled - added) / n};
        } finally {
            timer.close();
        }
    }

    /** (b): ns per timer from the first add to the last task run. */
    private double addThenFire() throws InterruptedException {
        int n = delays.length;
        AtomicInteger fired = new AtomicInteger();
        CountDownLatch allFired = new CountDownLatch(1);
        SystemTimer timer = newTimer();
        try {
            long started = cpuNs();
            for (int delay : delays) {
                timer.add(new CountingTask(delay, fired, n, allFired));
            }
            for (long nowMs = TICK_MS; nowMs <= MAX_DELAY_MS; nowMs += TICK_MS) {
                CLOCK.setNowMs(nowMs);
                timer.advanceClock(0);
            }
            allFired.await();
            long done = cpuNs();
            check(timer.size() == 0 && fired.get() == n, "(b) did not fire every timer");
            return (double) (done - started) / n;
        } finally {
            timer.close();
        }
    }

    /** (c): ns per cancel-one + add-one iteration with `pending` timers pending. */
    private double churn() {
        TimerTask[] tasks = new TimerTask[pendingDelays.length];
        SystemTimer timer = newTimer();
        try {
            for (int i = 0; i < tasks.length; i++) {
                tasks[i] = new NoopTask(pendingDelays[i]);
                timer.add(tasks[i]);
            }
            int iterations = churnSlots.length;
            long started = cpuNs();
            for (int i = 0; i < iterations; i++) {
                int slot = churnSlots[i];
                tasks[slot].cancel();
                TimerTask task = new NoopTask(churnDelays[i]);
                tasks[slot] = task;
                timer.add(task);
            }
            long elapsed = cpuNs() - started;
            check(timer.size() == tasks.length, "(c) lost or kept timers");
            return (double) elapsed / iterations;
        } finally {
            timer.close();
        }
    }

    /**
     * (d): heap bytes per pending timer after full collections (the caller's array of
     * tasks, allocated before the first reading, is not counted: the Python bench leaves
     * the caller's list of handles out the same way).
     */
    private double bytesPerPending() {
        int n = delays.length;
        TimerTask[] tasks = new TimerTask[n];
        MemoryMXBean memory = ManagementFactory.getMemoryMXBean();
        long before = usedAfterGc(memory);
        SystemTimer timer = newTimer();
        try {
            for (int i = 0; i < n; i++) {
                tasks[i] = new NoopTask(delays[i]);
                timer.add(tasks[i]);
            }
            long after = usedAfterGc(memory);
            Reference.reachabilityFence(tasks);
            return (double) (after - before) / n;
        } finally {
            timer.close();
        }
    }

    private static long usedAfterGc(MemoryMXBean memory) {
        for (int i = 0; i < GC_ROUNDS; i++) {
            System.gc();
        }
        return memory.getHeapMemoryUsage().getUsed();
    }

    private static void check(boolean condition, String message) {
        if (!condition) {
            throw new IllegalStateException(message);
        }
    }

    /**
     * CPU time of every live thread of this process, ns: this thread's from the JVM
     * (clock_gettime, exact), the others' from /proc/self/task/TID/schedstat, which is
     * exact for a thread that is not running at the moment (a running one's figure lags by
     * up to a scheduler tick; the driver reads when the executor has gone idle).
     */
    private static long cpuNs() {
        if (SELF_TID == null) {
            return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
        }
        long total = THREADS.getCurrentThreadCpuTime();
        try (DirectoryStream<Path> threads = Files.newDirectoryStream(TASKS)) {
            for (Path thread : threads) {
                if (thread.getFileName().toString().equals(SELF_TID)) {
                    continue;
                }
                try {
                    String schedstat = Files.readString(thread.resolve("schedstat"));
                    total += Long.parseLong(schedstat.substring(0, schedstat.indexOf(' ')));
                } catch (IOException exited) {
                    // The thread ended between the listing and the read: nothing to add.
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException("cannot read " + TASKS, e);
        }
        return total;
    }

    /** This thread's id in /proc/self/task, or null without /proc (then: the MXBean). */
    private static String selfTid() {
        try {
            return Files.readSymbolicLink(THREAD_SELF).getFileName().toString();
        } catch (IOException | UnsupportedOperationException noProc) {
            return null;
        }
    }

    private String run(String command) throws InterruptedException {
        switch (command) {
            case "a": {
                double[] figures = addThenCancel();
                return "ok " + figures[0] + " " + figures[1];
            }
            case "b":
                return "ok " + addThenFire();
            case "c":
                return "ok " + churn();
            case "d":
                return "ok " + bytesPerPending();
            default:
                return "error unknown command " + command;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: TimerBench INPUTS_FILE WARMUP_ROUNDS");
            System.exit(2);
        }
        TimerBench bench = new TimerBench(Paths.get(args[0]));
        int warmupRounds = Integer.parseInt(args[1]);
        for (int round = 1; round <= warmupRounds; round++) {
            for (String workload : new String[] {"a", "b", "c"}) {
                System.gc();
                System.err.println("java warm-up " + round + "/" + warmupRounds + " (" + workload + ") "
                    + bench.run(workload));
            }
        }
        System.out.println("ready");
        System.out.flush();
        BufferedReader commands = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String command;
        while ((command = commands.readLine()) != null && !command.equals("quit")) {
            String reply;
            try {
                System.gc();
                reply = bench.run(command.trim());
            } catch (RuntimeException e) {
                reply = "error " + e;
            }
            System.out.println(reply);
            System.out.flush();
        }
    }
}
