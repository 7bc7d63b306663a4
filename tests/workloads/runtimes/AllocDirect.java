// AllocDirect.java - JVM workload for tests/integration/test_runtimes.py:
// direct ByteBuffers (malloc'd by Unsafe.allocateMemory) allocated from a
// named Java method, through interpreted and JIT-compiled frames. Speaks the
// handshake of ../handshake.h.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.util.ArrayList;

public class AllocDirect {
    static final int ROUNDS = 20;
    static final int PER_ROUND = 500;
    static final ArrayList<ByteBuffer> kept = new ArrayList<>();

    static void allocateNamedBuffers(int n) {
        for (int i = 0; i < n; i++) {
            ByteBuffer b = ByteBuffer.allocateDirect(65536 + (i % 7) * 4096);
            if (i % 4 == 0) kept.add(b);
        }
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
        in.readLine();
        for (int r = 0; r < ROUNDS; r++) allocateNamedBuffers(PER_ROUND);
        System.out.println("done");
        System.out.flush();
        in.readLine();
    }
}
