// Test program for tests/unit/test_java.py: a JVM with a thread whose name is longer than the
// kernel's 15-character comm limit, so it can be found only through a thread dump (jcmd/jstack).
// Prints "ready" once the thread runs, then sleeps until killed.
public class MarketData {
    public static void main(String[] args) throws Exception {
        final Object started = new Object();
        Thread feed = new Thread(() -> {
            synchronized (started) {
                started.notifyAll();
            }
            long spins = 0;
            while (true) {
                try {
                    Thread.sleep(50);
                } catch (InterruptedException e) {
                    return;
                }
                spins++;
            }
        }, "market-data-feed-handler");
        feed.setDaemon(false);
        synchronized (started) {
            feed.start();
            started.wait();
        }
        System.out.println("ready");
        System.out.flush();
        feed.join();
    }
}
