import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import org.zeromq.ZMQ;

/**
 * JeroMQ sockets driven from tests/test_jeromq_interop.py: one command a line on stdin, one
 * reply a line on stdout.  A frame is written "x" followed by its octets in hex.
 *
 * <pre>
 *   new TYPE              -> ID            ID bind|connect ENDPOINT -> ok
 *   ID identity|subscribe|unsubscribe FRAME -> ok
 *   ID send FRAME...      -> ok            ID recv MILLISECONDS -> FRAME... or "timeout"
 *   ID close              -> ok            anything failing     -> "error ..."
 * </pre>
 */
public class Peer {
    public static void main(String[] args) throws Exception {
        ZMQ.Context context = ZMQ.context(1);
        List<ZMQ.Socket> sockets = new ArrayList<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String reply;
            try {
                reply = run(context, sockets, line.split(" "));
            } catch (Exception e) {
                reply = "error " + e;
            }
            System.out.println(reply);
            System.out.flush();
        }
        for (ZMQ.Socket socket : sockets) {
            if (socket != null) {
                socket.close();
            }
        }
        context.term();
    }

    static String run(ZMQ.Context context, List<ZMQ.Socket> sockets, String[] words)
            throws Exception {
        if (words[0].equals("new")) {
            ZMQ.Socket socket = context.socket(ZMQ.class.getField(words[1]).getInt(null));
            socket.setLinger(0);
            socket.setSendTimeOut(5000);
            sockets.add(socket);
            return Integer.toString(sockets.size() - 1);
        }
        int id = Integer.parseInt(words[0]);
        ZMQ.Socket socket = sockets.get(id);
        switch (words[1]) {
            case "bind":
                socket.bind(words[2]);
                return "ok";
            case "connect":
                socket.connect(words[2]);
                return "ok";
            case "identity":
                socket.setIdentity(frame(words[2]));
                return "ok";
            case "subscribe":
                socket.subscribe(frame(words[2]));
                return "ok";
            case "unsubscribe":
                socket.unsubscribe(frame(words[2]));
                return "ok";
            case "send":
                for (int i = 2; i < words.length; i++) {
                    if (!socket.send(frame(words[i]), i < words.length - 1 ? ZMQ.SNDMORE : 0)) {
                        return "error send failed";
                    }
                }
                return "ok";
            case "recv":
                socket.setReceiveTimeOut(Integer.parseInt(words[2]));
                byte[] first = socket.recv(0);
                if (first == null) {
                    return "timeout";
                }
                StringBuilder message = new StringBuilder(hex(first));
                while (socket.hasReceiveMore()) {
                    message.append(' ').append(hex(socket.recv(0)));
                }
                return message.toString();
            case "close":
                socket.close();
                sockets.set(id, null);
                return "ok";
            default:
                return "error unknown command " + words[1];
        }
    }

    static byte[] frame(String word) {
        byte[] data = new byte[(word.length() - 1) / 2];
        for (int i = 0; i < data.length; i++) {
            data[i] = (byte) Integer.parseInt(word.substring(1 + 2 * i, 3 + 2 * i), 16);
        }
        return data;
    }

    static String hex(byte[] data) {
        StringBuilder out = new StringBuilder("x");
        for (byte b : data) {
            out.append(String.format("%02x", b));
        }
        return out.toString();
    }
}
