// Test program for tests/unit/test_guard.py: a JVM that starts a thread of the given name for each line
// read on stdin (a feed handler restarted under the same name, or another thread), prints
// "started NAME" once it runs, and sleeps until killed. Prints "ready" first.
import java.io.BufferedReader;
import java.io.InputStreamReader;

public class Respawn {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready");
        System.out.flush();
        String name;
        while ((name = in.readLine()) != null) {
            final Object started = new Object();
            final String n = name;
            Thread t = new Thread(() -> {
                synchronized (started) {
                    started.notifyAll();
                }
                while (true) {
                    try {
                        Thread.sleep(50);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            }, n);
            t.setDaemon(true);
            synchronized (started) {
                t.start();
                started.wait();
            }
            System.out.println("started " + n);
            System.out.flush();
        }
    }
}
