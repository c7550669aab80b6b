"""How every Python peer of the test suite lives: print its "PORT n" line
once serving, then run until its stdin closes (the test that started it
is gone) or it gets SIGTERM/SIGINT (test/behaviour/pypeer.h)."""

import signal
import sys
import threading


def announce_and_wait(port):
    """Print "PORT <port>" and block until stdin closes or a signal ends
    the peer; the caller then stops its servers."""
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())

    def watch_stdin():
        try:
            sys.stdin.read()
        except (OSError, ValueError):
            pass
        done.set()
    threading.Thread(target=watch_stdin, daemon=True).start()
    print("PORT %d" % port, flush=True)
    done.wait()
