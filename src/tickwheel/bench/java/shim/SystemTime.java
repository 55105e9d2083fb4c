/*
 * tickwheel's stand-in for Kafka's org.apache.kafka.common.utils.SystemTime, compiled in
 * its place by `tickwheel bench timer` (written for the bench, not Kafka's file).
 *
 * Kafka's Time interface (compiled unmodified) makes Time.SYSTEM the instance returned by
 * SystemTime.getSystemTime(), and Kafka's SystemTimer and TimerTaskList read the time only
 * through Time.SYSTEM. This SystemTime is a simulated clock instead of the system's:
 * TimerBench moves it with setNowMs, as the Python bench moves its ManualClock, so no
 * benchmark sleeps. Kafka's own SystemTime is not used because its sleep calls Utils,
 * which would pull most of Kafka's clients module into the build.
 *
 * Concurrency: one thread (the bench's driver) sets the time; any thread may read it.
 */
package org.apache.kafka.common.utils;

import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;

public final class SystemTime implements Time {
    private static final SystemTime SYSTEM_TIME = new SystemTime();
    private static final long NS_PER_MS = TimeUnit.MILLISECONDS.toNanos(1);

    private volatile long nowMs;

    private SystemTime() {
    }

    public static SystemTime getSystemTime() {
        return SYSTEM_TIME;
    }

    /**
     * Moves the simulated clock to timeMs (the driver's only control of time). An instance
     * method, reached through Time.SYSTEM: a static one would let a caller initialise this
     * class before Time, whose initialiser would then read a SYSTEM_TIME still null.
     */
    public void setNowMs(long timeMs) {
        nowMs = timeMs;
    }

    @Override
    public long milliseconds() {
        return nowMs;
    }

    @Override
    public long nanoseconds() {
        return nowMs * NS_PER_MS;
    }

    @Override
    public void sleep(long ms) {
        throw new UnsupportedOperationException("the simulated clock does not sleep");
    }

    @Override
    public void waitObject(Object obj, Supplier<Boolean> condition, long deadlineMs) {
        throw new UnsupportedOperationException("the simulated clock does not wait");
    }
}
