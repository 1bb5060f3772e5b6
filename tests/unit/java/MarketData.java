// Test program for tests/unit/test_java.py, tests/gui/test_java_names.py and tests/hostile/test_attach.py:
// a JVM with two threads whose names are longer than the kernel's 15-byte comm and share it
// ("market-data-feed-handler-0" and "-1" are both "market-data-fee" to the kernel), so each can be
// told apart only through the JVM's thread dump. Each thread prints its own name and Linux tid (read
// from /proc/thread-self, the tests' oracle), then "ready" is printed; it sleeps until killed.
import java.io.File;
import java.util.concurrent.CountDownLatch;

public class MarketData {
    public static void main(String[] args) throws Exception {
        final CountDownLatch started = new CountDownLatch(2);
        Thread[] feeds = new Thread[2];
        for (int i = 0; i < feeds.length; i++) {
            feeds[i] = new Thread(() -> {
                try {
                    String self = new File("/proc/thread-self").getCanonicalPath();   // /proc/PID/task/TID
                    synchronized (MarketData.class) {
                        System.out.println(Thread.currentThread().getName() + " "
                                           + self.substring(self.lastIndexOf('/') + 1));
                    }
                } catch (java.io.IOException e) {
                    System.out.println(Thread.currentThread().getName() + " ?");
                }
                started.countDown();
                while (true) {
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, "market-data-feed-handler-" + i);
            feeds[i].start();
        }
        started.await();
        System.out.println("ready");
        System.out.flush();
        feeds[0].join();
    }
}
